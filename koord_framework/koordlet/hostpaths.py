"""Where the node agent finds the host: the roots of procfs, the cgroup hierarchy, sysfs and resctrl.

Every read and write of host state goes through one ``HostPaths`` passed explicitly to whoever needs it;
nothing in the koordlet reads ``/proc`` or ``/sys`` by a hard-coded absolute path or a module global. That
is what lets the same code run against the real host (``HostPaths.host()``), a container that mounts the
host under ``/host-*`` (``HostPaths(proc=..., cgroup=...)``) and a fake tree in a test's ``tmp_path``
(``HostPaths.under(tmp_path)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class HostPaths:
    """The roots. ``resctrl`` defaults to ``<sys>/fs/resctrl`` as the kernel mounts it."""

    proc: Path
    """procfs root, ``/proc`` on a host: ``stat``, ``meminfo``, ``cpuinfo``, ``cmdline``."""
    cgroup: Path
    """cgroup mount root, ``/sys/fs/cgroup``: v1 subsystem dirs (``cpu/``, ``cpuset/``...) or the v2 tree."""
    sys: Path
    """sysfs root, ``/sys``: CPU topology (``devices/system/cpu``), NUMA nodes (``devices/system/node``)."""
    resctrl: Path
    """resctrl mount, ``/sys/fs/resctrl``: ``info/L3/cbm_mask``, ``schemata``, group dirs with ``tasks``."""
    kubelet_root: Path = Path("/var/lib/kubelet")
    """kubelet's root dir, ``/var/lib/kubelet``: ``cpu_manager_state`` (``VarLibKubeletRootDir``)."""

    @classmethod
    def host(cls) -> HostPaths:
        """The real host, as the koordlet sees it when it runs in the host's mount namespace."""
        return cls.under(Path("/"))

    @classmethod
    def under(cls, root: str | Path) -> HostPaths:
        """All roots below one directory laid out like ``/`` (a test tree, or a host mounted at ``/host``)."""
        base = Path(root)
        return cls(
            proc=base / "proc",
            cgroup=base / "sys" / "fs" / "cgroup",
            sys=base / "sys",
            resctrl=base / "sys" / "fs" / "resctrl",
            kubelet_root=base / "var" / "lib" / "kubelet",
        )

    def with_cgroup(self, cgroup: str | Path) -> HostPaths:
        """The same host with the cgroup root moved (a private sub-hierarchy, a test tree)."""
        return HostPaths(
            proc=self.proc,
            cgroup=Path(cgroup),
            sys=self.sys,
            resctrl=self.resctrl,
            kubelet_root=self.kubelet_root,
        )

    # --- file paths -------------------------------------------------------------------------------------
    def proc_file(self, *parts: str) -> Path:
        return self.proc.joinpath(*parts)

    def sys_file(self, *parts: str) -> Path:
        return self.sys.joinpath(*parts)

    def resctrl_file(self, *parts: str) -> Path:
        return self.resctrl.joinpath(*parts)

    def describe(self) -> dict[str, str]:
        return {
            "proc": str(self.proc),
            "cgroup": str(self.cgroup),
            "sys": str(self.sys),
            "resctrl": str(self.resctrl),
            "kubeletRoot": str(self.kubelet_root),
        }
