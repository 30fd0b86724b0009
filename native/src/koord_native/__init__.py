"""koord-native: what the koordlet's resctrl handling needs from C, through a cffi extension.

* ``rdt_capabilities()`` asks the CPU itself (CPUID) what RDT it has: L3/L2 cache allocation with the
  capacity bitmask length, the number of CLOSIDs and CDP; memory bandwidth allocation with its maximum and
  whether it is linear (Intel percentages) or absolute (AMD bandwidth units); L3 monitoring (CMT, MBM).
  ``/proc/cpuinfo`` only says yes or no, and a hypervisor may show flags the CPU does not honour.
* ``write_tasks(path, ids)`` moves threads into a resctrl group (or a cgroup v1) ``tasks`` file with one
  ``write(2)`` per id, as the kernel requires, and returns every id's errno: a thread that exited between
  listing and writing (``ESRCH``) is reported and skipped, never fatal.
* ``mount_resctrl(target)`` mounts the resctrl filesystem (Python has no ``mount(2)``).

Everything else about resctrl (groups, schemata, the mount check) is plain file work and stays in Python.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from koord_native._rdt import ffi, lib

__all__ = [
    "MBA",
    "CacheAllocation",
    "Monitoring",
    "RdtCapabilities",
    "TaskWriteResult",
    "cpu_vendor",
    "mount_resctrl",
    "rdt_capabilities",
    "write_tasks",
]


@dataclass(frozen=True, slots=True)
class CacheAllocation:
    """Cache allocation (CAT) of one cache level."""

    cbm_length: int
    """Bits in a capacity bitmask: ``info/L3/cbm_mask`` is this many ones."""
    num_closids: int
    """Classes of service the hardware has (resctrl groups, the root included)."""
    cdp: bool
    """Code/data prioritization: the kernel then splits the resource into ``L3CODE``/``L3DATA``."""

    @property
    def cbm_mask(self) -> str:
        """The full mask as resctrl's ``info/L3/cbm_mask`` shows it (lowercase hex)."""
        return format((1 << self.cbm_length) - 1, "x")


@dataclass(frozen=True, slots=True)
class MBA:
    """Memory bandwidth allocation."""

    max_value: int
    """Intel: the largest throttle value (percent scale, usually 90 or 100); AMD: the largest bandwidth
    value, ``2 ** bandwidth length`` (2048 on current parts, what Koordinator writes as "unlimited")."""
    linear: bool
    """Intel: throttling delay values are linear (otherwise the kernel rounds to supported steps)."""
    absolute: bool
    """Values are bandwidth units (AMD) rather than percentages (Intel)."""
    num_closids: int


@dataclass(frozen=True, slots=True)
class Monitoring:
    """L3 monitoring: cache occupancy (CMT) and memory bandwidth (MBM)."""

    cmt: bool
    mbm_total: bool
    mbm_local: bool
    max_rmid: int
    occupancy_scale: int
    """Bytes per unit of ``llc_occupancy`` as the hardware counts it."""


@dataclass(frozen=True, slots=True)
class RdtCapabilities:
    """What CPUID says about RDT on the CPU this process runs on."""

    cpuid_available: bool
    vendor: str
    l3_cat: CacheAllocation | None
    l2_cat: CacheAllocation | None
    mba: MBA | None
    monitoring: Monitoring | None

    @property
    def supports_resctrl(self) -> bool:
        """L3 CAT and MBA both present: what Koordinator needs (its ``cat_l3`` and ``mba`` flags)."""
        return self.l3_cat is not None and self.mba is not None

    def as_dict(self) -> dict[str, object]:
        def part(obj: object) -> object:
            if obj is None:
                return None
            return {name: getattr(obj, name) for name in obj.__slots__}  # type: ignore[attr-defined]

        return {
            "cpuid_available": self.cpuid_available,
            "vendor": self.vendor,
            "l3_cat": part(self.l3_cat),
            "l2_cat": part(self.l2_cat),
            "mba": part(self.mba),
            "monitoring": part(self.monitoring),
        }


def rdt_capabilities() -> RdtCapabilities:
    """Ask CPUID (on the CPU this thread runs on; RDT is uniform across a machine's packages)."""
    caps = ffi.new("struct koord_rdt_caps *")
    lib.koord_rdt_detect(caps)
    l3 = CacheAllocation(caps.l3_cbm_length, caps.l3_num_closids, bool(caps.l3_cdp)) if caps.l3_cat else None
    l2 = CacheAllocation(caps.l2_cbm_length, caps.l2_num_closids, bool(caps.l2_cdp)) if caps.l2_cat else None
    mba = (
        MBA(caps.mba_max, bool(caps.mba_linear), bool(caps.mba_absolute), caps.mba_num_closids)
        if caps.mba
        else None
    )
    mon = (
        Monitoring(
            bool(caps.cmt),
            bool(caps.mbm_total),
            bool(caps.mbm_local),
            int(caps.max_rmid),
            int(caps.occupancy_scale),
        )
        if caps.cmt or caps.mbm_total or caps.mbm_local
        else None
    )
    return RdtCapabilities(
        cpuid_available=bool(caps.cpuid_available),
        vendor=ffi.string(caps.vendor).decode("ascii", "replace"),
        l3_cat=l3,
        l2_cat=l2,
        mba=mba,
        monitoring=mon,
    )


def cpu_vendor() -> str:
    """The CPUID vendor string (``GenuineIntel``, ``AuthenticAMD``...), ``unknown`` without CPUID."""
    return rdt_capabilities().vendor


@dataclass(frozen=True, slots=True)
class TaskWriteResult:
    """Per-id outcome of a bulk ``tasks`` write, in the order the ids were given."""

    path: str
    ids: tuple[int, ...]
    errnos: tuple[int, ...]
    """0 for an id the kernel took, else its errno."""

    @property
    def written(self) -> tuple[int, ...]:
        return tuple(i for i, e in zip(self.ids, self.errnos, strict=True) if e == 0)

    @property
    def vanished(self) -> tuple[int, ...]:
        """Threads that no longer exist (``ESRCH``): they exited after they were listed; skip them."""
        return tuple(i for i, e in zip(self.ids, self.errnos, strict=True) if e == errno.ESRCH)

    @property
    def failed(self) -> dict[int, int]:
        """Ids refused for another reason (id -> errno), e.g. ``EINVAL``, ``EACCES``."""
        return {i: e for i, e in zip(self.ids, self.errnos, strict=True) if e not in (0, errno.ESRCH)}

    @property
    def ok(self) -> bool:
        """Every id was taken or had vanished."""
        return not self.failed

    def describe(self) -> str:
        parts = [f"{len(self.written)} written"]
        if self.vanished:
            parts.append(f"{len(self.vanished)} vanished")
        for i, e in sorted(self.failed.items()):
            parts.append(f"{i}: {errno.errorcode.get(e, str(e))} ({os.strerror(e)})")
        return f"{self.path}: " + ", ".join(parts)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def write_tasks(path: str | os.PathLike[str], ids: Iterable[int]) -> TaskWriteResult:
    """Write every id to ``path`` with its own ``write(2)`` (append mode), in the given order.

    Raises ``OSError`` only when the file cannot be opened (no such group, not mounted); the ids' own
    errors are in the result."""
    id_list = tuple(int(i) for i in ids)
    for i in id_list:
        if not _INT64_MIN <= i <= _INT64_MAX:
            raise ValueError(f"task id {i} does not fit in 64 bits")
    name = os.fspath(path)
    n = len(id_list)
    c_ids = ffi.new("int64_t[]", id_list or (0,))
    errs = ffi.new("int[]", max(n, 1))
    rc = lib.koord_write_tasks(os.fsencode(name), c_ids, n, errs)
    if rc < 0:
        raise OSError(-rc, os.strerror(-rc), name)
    return TaskWriteResult(name, id_list, tuple(errs[0:n]))


def mount_resctrl(target: str | os.PathLike[str] = Path("/sys/fs/resctrl")) -> None:
    """``mount -t resctrl resctrl <target>``; raises ``OSError`` with the kernel's errno."""
    name = os.fspath(target)
    rc = lib.koord_mount_resctrl(os.fsencode(name))
    if rc:
        raise OSError(rc, os.strerror(rc), name)
