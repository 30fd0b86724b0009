"""How the strategy touches resctrl: a small ``ResctrlFS`` interface for the operations that *change* it
(mount, mkdir/rmdir of a group, a schemata write, a bulk tasks write), and plain reads through ``HostPaths``
for the rest.

On a host, ``HostResctrlFS`` does them with ``mount(2)`` and the bulk ``write(2)`` loop of the
``koord-native`` shim and ordinary ``os`` calls. A test hands the strategy the testing kit's ``FakeResctrl``
instead, which answers the way the kernel does (refusing malformed schemata and unknown task ids), because
a plain file under a fake tree would take any write.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from koord_framework.koordlet import HostPaths
from koord_framework.koordlet.system import (
    AMD_VENDOR_ID,
    HostReadError,
    is_resctrl_supported,
    resctrl_flags_by_cpuinfo,
    resctrl_flags_by_kernel_cmdline,
    vendor_id,
)
from koord_plugin_resctrl.schemata import Schemata, SchemataError, parse_schemata_map


class CacheAllocationInfo(Protocol):
    @property
    def cbm_length(self) -> int: ...
    @property
    def num_closids(self) -> int: ...


class MBAInfo(Protocol):
    @property
    def max_value(self) -> int: ...
    @property
    def absolute(self) -> bool: ...


class RdtCapabilitiesInfo(Protocol):
    """What CPUID answered (``koord_native.RdtCapabilities`` on a host)."""

    @property
    def cpuid_available(self) -> bool: ...
    @property
    def vendor(self) -> str: ...
    @property
    def l3_cat(self) -> CacheAllocationInfo | None: ...
    @property
    def mba(self) -> MBAInfo | None: ...
    @property
    def supports_resctrl(self) -> bool: ...


class ResctrlFS(Protocol):
    """The operations that change resctrl. Each raises ``OSError`` with the kernel's errno."""

    def capabilities(self) -> RdtCapabilitiesInfo: ...
    def mount(self, target: Path) -> None: ...
    def make_group(self, path: Path) -> None: ...
    def remove_group(self, path: Path) -> None: ...
    def write_schemata(self, path: Path, text: str) -> None:
        """One ``write(2)`` of every line: the kernel applies all of them or none."""

    def write_tasks(self, path: Path, ids: Sequence[int]) -> Sequence[int]:
        """One ``write(2)`` per id; returns each id's errno (0 when taken)."""


class NativeUnavailable(RuntimeError):
    """``koord-native`` is not installed (no C compiler when koord was installed)."""


class HostResctrlFS:
    """The real host, through the ``koord-native`` shim."""

    def __init__(self) -> None:
        try:
            import koord_native
        except ImportError as err:
            raise NativeUnavailable(
                f"koord-native is not importable ({err}); install it with a C compiler present "
                "(pip install ./native) to use resctrl on this node"
            ) from None
        self._native = koord_native

    def capabilities(self) -> RdtCapabilitiesInfo:
        caps: RdtCapabilitiesInfo = self._native.rdt_capabilities()
        return caps

    def mount(self, target: Path) -> None:
        self._native.mount_resctrl(target)

    def make_group(self, path: Path) -> None:
        os.mkdir(path, 0o755)

    def remove_group(self, path: Path) -> None:
        os.rmdir(path)

    def write_schemata(self, path: Path, text: str) -> None:
        data = text.encode("ascii")
        # O_TRUNC as `echo ... > schemata` does: kernfs ignores it, a plain file (a test tree) needs it
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(
                    errno.EIO, f"short write of schemata ({written} of {len(data)} bytes)", str(path)
                )
        finally:
            os.close(fd)

    def write_tasks(self, path: Path, ids: Sequence[int]) -> Sequence[int]:
        answers: tuple[int, ...] = self._native.write_tasks(path, ids).errnos
        return answers


# --- support detection (Koordinator's IsSupportResctrl / CheckAndTryEnableResctrlCat) -------------------


@dataclass(frozen=True, slots=True)
class SupportReport:
    """Why resctrl is (not) used on this node. Only the CPU flags decide, as in Koordinator; the kernel
    command line and CPUID are reported next to them."""

    supported: bool
    cat_flag: bool
    mba_flag: bool
    kernel_cat: bool
    kernel_mba: bool
    vendor: str
    cpuid: dict[str, object] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "supported": self.supported,
            "cpuinfo": {"cat_l3": self.cat_flag, "mba": self.mba_flag},
            "kernelCmdline": {"l3cat": self.kernel_cat, "mba": self.kernel_mba},
            "vendor": self.vendor,
            "cpuid": self.cpuid,
            "notes": list(self.notes),
        }


def detect_support(paths: HostPaths, fs: ResctrlFS) -> SupportReport:
    """§4.3: ``cat_l3`` and ``mba`` in ``/proc/cpuinfo`` decide. The kernel check (AMD is always fine, else
    ``rdt=...l3cat...mba`` on the command line) and CPUID are computed and reported only. Raises
    ``HostReadError`` when cpuinfo or cmdline cannot be read (Koordinator returns the error)."""
    flags = resctrl_flags_by_cpuinfo(paths)
    vendor = vendor_id(paths)
    if vendor == AMD_VENDOR_ID:
        kernel_cat = kernel_mba = True
    else:
        kflags = resctrl_flags_by_kernel_cmdline(paths)
        kernel_cat, kernel_mba = kflags.cat, kflags.mba
    notes: list[str] = []
    cpuid: dict[str, object] = {}
    try:
        caps = fs.capabilities()
    except OSError as err:
        notes.append(f"CPUID not available: {err}")
    else:
        l3, mba = caps.l3_cat, caps.mba
        cpuid = {
            "available": caps.cpuid_available,
            "vendor": caps.vendor,
            "l3CbmLength": l3.cbm_length if l3 else None,
            "closids": l3.num_closids if l3 else None,
            "mbaMax": mba.max_value if mba else None,
        }
        if caps.cpuid_available and (flags.cat and flags.mba) != caps.supports_resctrl:
            notes.append(
                "CPUID and /proc/cpuinfo disagree on CAT/MBA (a hypervisor or a kernel option); "
                "/proc/cpuinfo decides, as in Koordinator"
            )
    if not (kernel_cat and kernel_mba):
        notes.append("kernel command line lacks rdt=l3cat,mba (reported only, as in Koordinator)")
    return SupportReport(
        supported=is_resctrl_supported(paths),
        cat_flag=flags.cat,
        mba_flag=flags.mba,
        kernel_cat=kernel_cat,
        kernel_mba=kernel_mba,
        vendor=vendor,
        cpuid=cpuid,
        notes=tuple(notes),
    )


class ResctrlNotEnabled(RuntimeError):
    pass


def check_root_schemata(paths: HostPaths) -> str | None:
    """None when the root ``schemata`` shows a usable L3 and MB (``CheckResctrlSchemataValid``)."""
    try:
        content = paths.resctrl_file("schemata").read_text()
    except OSError as err:
        return f"cannot read resctrl schemata, err: {err.strerror or err}"
    try:
        raw = Schemata.parse(content, -1)
    except SchemataError as err:
        return f"cannot read resctrl schemata, err: {err}"
    msg = raw.validate()
    return None if msg is None else f"resctrl schemata is invalid, err: {msg}"


def ensure_resctrl_enabled(paths: HostPaths, fs: ResctrlFS) -> bool:
    """``CheckAndTryEnableResctrlCat``: ``info/L3/cbm_mask`` present, else mount resctrl (unless the root
    schemata is already valid) and look again. Returns whether it mounted; raises ``ResctrlNotEnabled``."""
    cbm = paths.resctrl_file("info", "L3", "cbm_mask")
    if cbm.exists():
        return False
    mounted = False
    if check_root_schemata(paths) is not None:
        try:
            fs.mount(paths.resctrl)
        except OSError as err:
            raise ResctrlNotEnabled(
                f"cannot mount resctrl at {paths.resctrl}: {err.strerror or err}"
            ) from None
        mounted = True
        problem = check_root_schemata(paths)
        if problem is not None:
            raise ResctrlNotEnabled(
                f"resctrl subsystem {paths.resctrl} is mounted, but schemata "
                f"{paths.resctrl_file('schemata')} is still invalid, err: {problem}"
            )
    if not cbm.exists():
        raise ResctrlNotEnabled(f"resctrl cat is not enabled: {cbm} does not exist")
    return mounted


# --- host facts ------------------------------------------------------------------------------------------


def read_cbm_mask(paths: HostPaths) -> str:
    """``info/L3/cbm_mask`` trimmed (``ReadCatL3CbmString``)."""
    path = paths.resctrl_file("info", "L3", "cbm_mask")
    try:
        return path.read_text().strip()
    except OSError as err:
        raise HostReadError(path, f"failed to read l3 cbm: {err.strerror or err}") from None


def l3_cache_count(paths: HostPaths) -> int:
    """Number of L3 caches (Koordinator's ``len(L3ToCPU)`` from lscpu): distinct L3 cache ids in sysfs
    (``cpuN/cache/indexK`` with ``level`` 3; ``shared_cpu_list`` when ``id`` is absent). 0 when sysfs does
    not say."""
    root = paths.sys_file("devices", "system", "cpu")
    seen: set[str] = set()
    try:
        cpus = [e for e in os.scandir(root) if re.fullmatch(r"cpu\d+", e.name)]
    except OSError:
        return 0
    for cpu in cpus:
        cache = Path(cpu.path) / "cache"
        try:
            indexes = [e for e in os.scandir(cache) if e.name.startswith("index")]
        except OSError:
            continue
        for idx in indexes:
            d = Path(idx.path)
            try:
                if (d / "level").read_text().strip() != "3":
                    continue
            except OSError:
                continue
            for name in ("id", "shared_cpu_list"):
                try:
                    seen.add(f"{name}:{(d / name).read_text().strip()}")
                    break
                except OSError:
                    continue
    return len(seen)


def root_cache_ids(paths: HostPaths) -> list[int]:
    """The L3 cache ids of the root ``schemata`` (``GetCacheIds``), sorted."""
    path = paths.resctrl_file("schemata")
    try:
        content = path.read_text()
    except OSError as err:
        raise HostReadError(path, f"cannot read: {err.strerror or err}") from None
    return sorted(parse_schemata_map(content).get("L3", {}))
