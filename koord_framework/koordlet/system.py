"""Host facts outside the cgroup tree: CPU time and memory from procfs, CPU topology from sysfs, the CPU
vendor and feature flags, and the resctrl support checks Koordinator makes (``pkg/koordlet/util/system``).

Every function takes the ``HostPaths`` to read from; nothing is cached at module level, so one process can
look at the real host and at a fake tree side by side.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from koord_framework.errors import KoordError
from koord_framework.koordlet.cpuset import CPUSetError, parse_cpuset
from koord_framework.koordlet.hostpaths import HostPaths

AMD_VENDOR_ID: Final = "AuthenticAMD"
INTEL_VENDOR_ID: Final = "GenuineIntel"


class HostReadError(KoordError):
    """A host file (procfs/sysfs/resctrl) is missing or malformed; names the file."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = str(path)
        super().__init__(f"{path}: {message}")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise HostReadError(path, "does not exist") from None
    except OSError as err:
        raise HostReadError(path, f"cannot read: {err.strerror or err}") from None


# --- CPU time and memory -------------------------------------------------------------------------------


def parse_cpu_ticks(fields: Sequence[str], path: str | Path = "") -> int:
    """Busy ticks of one ``cpu``/``cpuN`` line: user + nice + system + irq + softirq (idle and iowait
    excluded, steal ignored), like ``parseCPUStatUsageTicks``."""
    if len(fields) <= 7:
        raise HostReadError(path, f"malformed cpu line {' '.join(fields)!r}")
    try:
        return sum(int(fields[i]) for i in (1, 2, 3, 6, 7))
    except ValueError:
        raise HostReadError(path, f"non-integer field in cpu line {' '.join(fields)!r}") from None


def read_cpu_ticks(paths: HostPaths) -> int:
    """Cumulative busy ticks of the whole node from ``/proc/stat``."""
    path = paths.proc_file("stat")
    for line in _read(path).splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            return parse_cpu_ticks(fields, path)
    raise HostReadError(path, "has no aggregate 'cpu' line")


@dataclass(frozen=True, slots=True)
class MemInfo:
    """``/proc/meminfo`` in bytes."""

    total: int
    available: int
    free: int = 0
    buffers: int = 0
    cached: int = 0

    def usage(self) -> int:
        """Memory in use without page cache: ``MemTotal - MemAvailable`` (``MemUsageBytes``)."""
        return max(0, self.total - self.available)

    def usage_with_page_cache(self) -> int:
        return max(0, self.total - self.free)


def read_meminfo(paths: HostPaths) -> MemInfo:
    path = paths.proc_file("meminfo")
    values: dict[str, int] = {}
    for line in _read(path).splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if parts:
            try:
                values[key.strip()] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
            except ValueError:
                continue
    if "MemTotal" not in values or "MemAvailable" not in values:
        raise HostReadError(path, "lacks MemTotal or MemAvailable")
    return MemInfo(
        total=values["MemTotal"],
        available=values["MemAvailable"],
        free=values.get("MemFree", 0),
        buffers=values.get("Buffers", 0),
        cached=values.get("Cached", 0),
    )


# --- CPU topology --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcessorInfo:
    """One logical CPU as ``lscpu -e=CPU,NODE,SOCKET,CORE`` reports it; ``core_id`` is unique machine-wide."""

    cpu_id: int
    core_id: int
    socket_id: int
    node_id: int


@dataclass(frozen=True, slots=True)
class NodeCPUInfo:
    processors: tuple[ProcessorInfo, ...]

    @property
    def cpu_ids(self) -> frozenset[int]:
        return frozenset(p.cpu_id for p in self.processors)

    def __len__(self) -> int:
        return len(self.processors)


def _int_file(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_node_cpu_info(paths: HostPaths) -> NodeCPUInfo:
    """The online CPUs with their socket, NUMA node and (machine-wide) core id.

    Reads sysfs topology (``devices/system/cpu/cpuN/topology``, ``devices/system/node/nodeM/cpulist``); when
    sysfs lacks it (some containers), falls back to ``/proc/cpuinfo``'s processor/physical id/core id with
    every CPU on NUMA node 0. Core ids are renumbered per (socket, core) in CPU order, as lscpu does, so that
    hyper-thread siblings share a core id and different sockets never do.
    """
    cpu_root = paths.sys_file("devices", "system", "cpu")
    raw: list[tuple[int, int, int]] = []  # (cpu, socket, core-in-socket)
    online: frozenset[int] | None = None
    try:
        online = parse_cpuset(_read(cpu_root / "online"))
    except (HostReadError, CPUSetError):
        online = None
    if cpu_root.is_dir():
        for entry in os.scandir(cpu_root):
            m = re.fullmatch(r"cpu(\d+)", entry.name)
            if not m:
                continue
            cpu = int(m.group(1))
            if online is not None and cpu not in online:
                continue
            topo = Path(entry.path) / "topology"
            socket = _int_file(topo / "physical_package_id")
            core = _int_file(topo / "core_id")
            if socket is None or core is None:
                continue
            raw.append((cpu, socket, core))
    if not raw:
        raw = _topology_from_cpuinfo(paths)
    nodes: dict[int, int] = {}
    node_root = paths.sys_file("devices", "system", "node")
    if node_root.is_dir():
        for entry in os.scandir(node_root):
            m = re.fullmatch(r"node(\d+)", entry.name)
            if not m:
                continue
            try:
                for cpu in parse_cpuset(_read(Path(entry.path) / "cpulist")):
                    nodes[cpu] = int(m.group(1))
            except (HostReadError, CPUSetError):
                continue
    raw.sort()
    logical: dict[tuple[int, int], int] = {}
    out = []
    for cpu, socket, core in raw:
        core_key = (socket, core)
        if core_key not in logical:
            logical[core_key] = len(logical)
        out.append(ProcessorInfo(cpu, logical[core_key], socket, nodes.get(cpu, 0)))
    return NodeCPUInfo(tuple(out))


def _topology_from_cpuinfo(paths: HostPaths) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    cpu = socket = core = None
    for line in (*_read(paths.proc_file("cpuinfo")).splitlines(), ""):
        key, _, value = line.partition(":")
        key = key.strip()
        if not key:
            if cpu is not None:
                out.append((cpu, socket or 0, core if core is not None else cpu))
            cpu = socket = core = None
            continue
        try:
            if key == "processor":
                cpu = int(value)
            elif key == "physical id":
                socket = int(value)
            elif key == "core id":
                core = int(value)
        except ValueError:
            continue
    return out


# --- CPU vendor and flags, resctrl support -------------------------------------------------------------


def vendor_id(paths: HostPaths) -> str:
    """The first ``vendor_id`` of ``/proc/cpuinfo`` (``GenuineIntel``, ``AuthenticAMD``...), ``unknown``
    when no line names one (``GetVendorIDByCPUInfo``). A missing file is an error."""
    for line in _read(paths.proc_file("cpuinfo")).splitlines():
        if "vendor_id" in line:
            attrs = line.split(":")
            if len(attrs) >= 2:
                return attrs[1].strip()
    return "unknown"


def cpu_flags(paths: HostPaths) -> frozenset[str]:
    """Every token of every line containing ``flags``, split on single spaces exactly like Koordinator (so
    ``"flags\\t\\t:"`` is one token and never a flag)."""
    out: set[str] = set()
    for line in _read(paths.proc_file("cpuinfo")).splitlines():
        if "flags" in line:
            out.update(line.split(" "))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class ResctrlFlags:
    cat: bool
    mba: bool


def resctrl_flags_by_cpuinfo(paths: HostPaths) -> ResctrlFlags:
    """``cat_l3`` and ``mba`` in the CPU flags (``isResctrlAvailableByCpuInfo``)."""
    flags = cpu_flags(paths)
    return ResctrlFlags(cat="cat_l3" in flags, mba="mba" in flags)


_KERNEL_L3CAT: Final = re.compile(r".* rdt=.*l3cat.*")
_KERNEL_MBA: Final = re.compile(r".* rdt=.*mba.*")


def resctrl_flags_by_kernel_cmdline(paths: HostPaths) -> ResctrlFlags:
    """``rdt=...l3cat...`` / ``rdt=...mba...`` on a kernel command line (``isResctrlAvailableByKernelCmd``;
    Go's ``Regexp.Match`` searches, hence ``re.search``)."""
    cat = mba = False
    for line in _read(paths.proc_file("cmdline")).splitlines():
        cat = cat or bool(_KERNEL_L3CAT.search(line))
        mba = mba or bool(_KERNEL_MBA.search(line))
    return ResctrlFlags(cat=cat, mba=mba)


def is_resctrl_mbm_available(paths: HostPaths) -> bool:
    flags = cpu_flags(paths)
    return "cqm_mbm_total" in flags and "cqm_mbm_local" in flags


def is_resctrl_cqm_available(paths: HostPaths) -> bool:
    flags = cpu_flags(paths)
    return "cqm_llc" in flags and "cqm_occup_llc" in flags


def is_resctrl_supported(paths: HostPaths) -> bool:
    """Whether CAT and MBA can be used: **only the CPU flags decide** (``IsSupportResctrl``). Koordinator also
    reads the kernel command line (AMD is always fine) but only logs that result, so it is not consulted."""
    flags = resctrl_flags_by_cpuinfo(paths)
    return flags.cat and flags.mba


def is_vendor_support_resctrl(paths: HostPaths, arm_vendor_ids: Iterable[str] = ()) -> bool:
    """Intel, AMD or a registered MPAM-capable ARM vendor (``IsVendorSupportResctrl``); False when cpuinfo
    cannot be read."""
    try:
        vendor = vendor_id(paths)
    except HostReadError:
        return False
    return vendor in (AMD_VENDOR_ID, INTEL_VENDOR_ID) or vendor in set(arm_vendor_ids)


def read_resctrl_tasks(paths: HostPaths, group: str) -> set[int]:
    """The task ids in ``<resctrl>/<group>/tasks`` (``""`` is the root group); blank lines skipped, a
    non-integer line is an error (``ReadResctrlTasksMap``)."""
    path = paths.resctrl_file(group, "tasks") if group else paths.resctrl_file("tasks")
    out: set[int] = set()
    for line in _read(path).split("\n"):
        text = line.strip()
        if not text:
            continue
        try:
            out.add(int(text))
        except ValueError:
            raise HostReadError(path, f"task id {text!r} is not an integer") from None
    return out
