"""The kubelet's cgroup tree: which version is mounted, how the driver names pod and container dirs, which
file holds which resource on v1 and v2, and how to read and parse those files.

Paths inside the tree are *parent dirs* relative to a subsystem root, exactly as Koordinator passes them
around (``kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice``); a
``CgroupLayout`` turns a parent dir and a resource into an absolute path under ``HostPaths.cgroup``:

* v1: ``<cgroup>/<subsystem>/<parent dir>/<v1 file>`` (``cpu/``, ``cpuset/``, ``cpuacct/``, ``memory/``...)
* v2: ``<cgroup>/<parent dir>/<v2 file>`` (``cpu.max`` for quota and period, ``cpu.weight`` for shares...)

Resources are keyed by their v1 file name on both versions (Koordinator's ``ResourceType``), so a QoS
strategy writes ``cpu.cfs_quota_us`` and the executor lands it in ``cpu.max`` on a v2 host.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Final

from koord_framework.api.qos import KubeQoS
from koord_framework.errors import KoordError
from koord_framework.koordlet.cpuset import CPUSetError, parse_cpuset
from koord_framework.koordlet.hostpaths import HostPaths

MAX_INT64: Final = 2**63 - 1
CFS_BASE_PERIOD: Final = 100_000
"""Default ``cpu.cfs_period_us`` (100 ms); every quota Koordinator computes assumes it."""
CFS_QUOTA_MIN: Final = 1000
"""The kernel refuses a cfs quota below 1 ms (other than -1, unlimited)."""
CPU_SHARES_MIN: Final = 2
CPU_SHARES_MAX: Final = 262144
CPU_WEIGHT_MIN: Final = 1
CPU_WEIGHT_MAX: Final = 10000
USER_HZ: Final = 100
"""Clock ticks per second of ``/proc/stat`` (``sysconf(_SC_CLK_TCK)``, 100 on Linux)."""


# --- errors --------------------------------------------------------------------------------------------


class CgroupError(KoordError):
    """A cgroup file could not be read, parsed or written. ``path`` names the file."""

    def __init__(self, path: str | Path, message: str) -> None:
        self.path = str(path)
        self.message = message
        super().__init__(f"{path}: {message}")


class CgroupNotFoundError(CgroupError):
    """The cgroup directory or file does not exist (a pod that just left, a kernel without the file)."""


class ResourceUnsupportedError(CgroupError):
    """The resource has no file on this cgroup version or kernel (``cpu.cfs_burst_us`` on an old kernel)."""


class CgroupParseError(CgroupError):
    """The file exists but its content is not what the kernel writes."""


# --- versions and drivers ------------------------------------------------------------------------------


class CgroupVersion(IntEnum):
    V1 = 1
    V2 = 2


class CgroupDriver(StrEnum):
    """The kubelet's ``cgroupDriver``: it decides how the kubepods tree is named."""

    SYSTEMD = "systemd"
    CGROUPFS = "cgroupfs"


V1_SUBSYSTEMS: Final = ("cpu", "cpuacct", "cpuset", "memory", "blkio", "net_cls")


def detect_version(cgroup_root: str | Path) -> CgroupVersion:
    """v1 when subsystem hierarchies are mounted below the root (also the hybrid layout, where the unified
    tree sits at ``unified/`` and carries no controllers the kubelet uses); v2 when the root itself is a
    unified hierarchy (``cgroup.controllers`` present). Koordinator statfs()s the root for the cgroup2
    magic; the files are what a fake tree can reproduce, and on a real host the two tests agree."""
    root = Path(cgroup_root)
    if any((root / sub).is_dir() for sub in ("cpu", "cpuacct", "cpuset", "memory")):
        return CgroupVersion.V1
    if (root / "cgroup.controllers").is_file():
        return CgroupVersion.V2
    raise CgroupNotFoundError(
        root,
        "neither a cgroup v1 hierarchy (cpu/, memory/...) nor a v2 root (cgroup.controllers) is mounted here",
    )


KUBEPODS_SYSTEMD: Final = "kubepods.slice"
KUBEPODS_CGROUPFS: Final = "kubepods"


def detect_driver(cgroup_root: str | Path, version: CgroupVersion) -> CgroupDriver:
    """Guess the driver from the kubepods dir name, like ``GetCgroupDriverFromCgroupName``; systemd when
    neither exists yet (Koordinator's fallback)."""
    base = Path(cgroup_root) / "cpu" if version is CgroupVersion.V1 else Path(cgroup_root)
    if (base / KUBEPODS_SYSTEMD).is_dir():
        return CgroupDriver.SYSTEMD
    if (base / KUBEPODS_CGROUPFS).is_dir():
        return CgroupDriver.CGROUPFS
    return CgroupDriver.SYSTEMD


# --- naming --------------------------------------------------------------------------------------------

_RUNTIME_SCOPE_PREFIX: Final[dict[str, str]] = {
    "docker": "docker-",
    "containerd": "cri-containerd-",
    "pouch": "pouch-",
    "cri-o": "crio-",
}


def split_container_id(container_id: str) -> tuple[str, str]:
    """``containerd://abc`` -> ``("containerd", "abc")``; raises ``ValueError`` for anything else."""
    runtime, sep, hash_id = container_id.partition("://")
    if not sep or not hash_id:
        raise ValueError(f"container id {container_id!r} is not <runtime>://<id>")
    if runtime not in _RUNTIME_SCOPE_PREFIX:
        raise ValueError(f"container id {container_id!r} has an unknown runtime {runtime!r}")
    return runtime, hash_id


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """The kubepods tree of one host: version, driver and the paths they imply."""

    paths: HostPaths
    version: CgroupVersion
    driver: CgroupDriver

    @classmethod
    def detect(
        cls, paths: HostPaths, version: CgroupVersion | None = None, driver: CgroupDriver | None = None
    ) -> CgroupLayout:
        v = version if version is not None else detect_version(paths.cgroup)
        d = driver if driver is not None else detect_driver(paths.cgroup, v)
        return cls(paths, v, d)

    # --- parent dirs (relative) -------------------------------------------------------------------------
    @property
    def kubepods_dir(self) -> str:
        return KUBEPODS_SYSTEMD if self.driver is CgroupDriver.SYSTEMD else KUBEPODS_CGROUPFS

    def qos_dir(self, qos: KubeQoS) -> str:
        """``kubepods.slice/kubepods-besteffort.slice``; Guaranteed pods live directly in the kubepods dir."""
        if qos is KubeQoS.GUARANTEED:
            return self.kubepods_dir
        if self.driver is CgroupDriver.SYSTEMD:
            name = "burstable" if qos is KubeQoS.BURSTABLE else "besteffort"
            return f"{KUBEPODS_SYSTEMD}/kubepods-{name}.slice"
        return f"{KUBEPODS_CGROUPFS}/{'burstable' if qos is KubeQoS.BURSTABLE else 'besteffort'}"

    def pod_dir(self, qos: KubeQoS, uid: str) -> str:
        if self.driver is CgroupDriver.SYSTEMD:
            escaped = uid.replace("-", "_")
            prefix = {
                KubeQoS.GUARANTEED: "kubepods",
                KubeQoS.BURSTABLE: "kubepods-burstable",
                KubeQoS.BEST_EFFORT: "kubepods-besteffort",
            }[qos]
            return f"{self.qos_dir(qos)}/{prefix}-pod{escaped}.slice"
        return f"{self.qos_dir(qos)}/pod{uid}"

    def container_dir(self, pod_dir: str, container_id: str) -> str:
        """The container's dir below its pod: ``cri-containerd-<id>.scope`` (systemd) or ``<id>``."""
        runtime, hash_id = split_container_id(container_id)
        if self.driver is CgroupDriver.SYSTEMD:
            return f"{pod_dir}/{_RUNTIME_SCOPE_PREFIX[runtime]}{hash_id}.scope"
        return f"{pod_dir}/{hash_id}"

    @staticmethod
    def pod_uid_from_dir(basename: str) -> str | None:
        """The pod uid a pod dir name encodes (systemd escapes ``-`` as ``_``), or None."""
        for prefix in ("kubepods-besteffort-pod", "kubepods-burstable-pod", "kubepods-pod"):
            if basename.startswith(prefix) and basename.endswith(".slice"):
                return basename[len(prefix) : -len(".slice")].replace("_", "-")
        if basename.startswith("pod"):
            return basename[len("pod") :]
        return None

    # --- absolute paths ----------------------------------------------------------------------------------
    def subsystem_root(self, subsystem: str) -> Path:
        if self.version is CgroupVersion.V2:
            return self.paths.cgroup
        return self.paths.cgroup / subsystem

    def dir_path(self, subsystem: str, parent_dir: str) -> Path:
        return self.subsystem_root(subsystem) / parent_dir.strip("/")

    def file_path(self, resource: CgroupResource | str, parent_dir: str) -> Path:
        res = resource if isinstance(resource, CgroupResource) else RESOURCES[resource]
        return self.dir_path(res.subsystem, parent_dir) / res.file_name(self.version)

    def walk(self, subsystem: str, parent_dir: str, max_depth: int) -> list[str]:
        """Parent dirs of ``parent_dir`` and its descendants down to ``max_depth`` levels, pre-order and in
        lexical order like Go's ``filepath.Walk`` (``GetBECPUSetPathsByMaxDepth``). Missing root -> []."""
        root = self.dir_path(subsystem, parent_dir)
        base = self.subsystem_root(subsystem)
        out: list[str] = []

        def visit(path: Path, depth: int) -> None:
            out.append(str(path.relative_to(base)))
            if depth >= max_depth:
                return
            try:
                children = sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
            except OSError:
                return
            for name in children:
                visit(path / name, depth + 1)

        if root.is_dir():
            visit(root, 0)
        return out

    def dirs_at_depth(self, subsystem: str, parent_dir: str, depth: int) -> list[str]:
        """Descendants exactly ``depth`` levels below ``parent_dir`` (``GetCgroupPathsByTargetDepth``)."""
        base_depth = len(Path(parent_dir.strip("/")).parts)
        return [
            p for p in self.walk(subsystem, parent_dir, depth) if len(Path(p).parts) == base_depth + depth
        ]


# --- resources -----------------------------------------------------------------------------------------


class ValueKind(StrEnum):
    INT = "int"
    """One integer (``max`` reads as MaxInt64 on v2)."""
    QUOTA = "quota"
    """A cfs quota: -1 (unlimited) or at least 1000 us."""
    CPUSET = "cpuset"
    """A cpu list."""
    RAW = "raw"
    """Read-only or free-form content (``cpu.stat``, ``memory.stat``, ``tasks``)."""


@dataclass(frozen=True, slots=True)
class CgroupResource:
    """One cgroup interface file, keyed by its v1 name."""

    name: str
    subsystem: str
    v2_name: str | None
    kind: ValueKind = ValueKind.INT
    minimum: int | None = None
    maximum: int | None = None
    v2_minimum: int | None = None
    v2_maximum: int | None = None
    optional: bool = False
    """Only present on some kernels (burst, bvt, idle): a missing file means unsupported, not an error."""
    writable: bool = True

    def file_name(self, version: CgroupVersion) -> str:
        if version is CgroupVersion.V1:
            return self.name
        if self.v2_name is None:
            raise ResourceUnsupportedError(self.name, "has no cgroup v2 interface")
        return self.v2_name

    def bounds(self, version: CgroupVersion) -> tuple[int | None, int | None]:
        if version is CgroupVersion.V2 and (self.v2_minimum is not None or self.v2_maximum is not None):
            return self.v2_minimum, self.v2_maximum
        return self.minimum, self.maximum


CPU_SHARES: Final = "cpu.shares"
CPU_CFS_QUOTA: Final = "cpu.cfs_quota_us"
CPU_CFS_PERIOD: Final = "cpu.cfs_period_us"
CPU_BURST: Final = "cpu.cfs_burst_us"
CPU_BVT_WARP_NS: Final = "cpu.bvt_warp_ns"
CPU_IDLE: Final = "cpu.idle"
CPU_STAT: Final = "cpu.stat"
CPU_TASKS: Final = "tasks"
CPU_PROCS: Final = "cgroup.procs"
CPUSET_CPUS: Final = "cpuset.cpus"
CPUSET_MEMS: Final = "cpuset.mems"
CPUSET_CPUS_EFFECTIVE: Final = "cpuset.cpus.effective"
CPUACCT_USAGE: Final = "cpuacct.usage"
MEMORY_LIMIT: Final = "memory.limit_in_bytes"
MEMORY_USAGE: Final = "memory.usage_in_bytes"
MEMORY_STAT: Final = "memory.stat"
MEMORY_MIN: Final = "memory.min"
MEMORY_LOW: Final = "memory.low"
MEMORY_HIGH: Final = "memory.high"

_TABLE: Final = (
    CgroupResource(
        CPU_SHARES,
        "cpu",
        "cpu.weight",
        minimum=CPU_SHARES_MIN,
        maximum=CPU_SHARES_MAX,
        v2_minimum=CPU_WEIGHT_MIN,
        v2_maximum=CPU_WEIGHT_MAX,
    ),
    CgroupResource(CPU_CFS_QUOTA, "cpu", "cpu.max", kind=ValueKind.QUOTA),
    CgroupResource(CPU_CFS_PERIOD, "cpu", "cpu.max", minimum=1000, maximum=1_000_000),
    CgroupResource(
        CPU_BURST, "cpu", "cpu.max.burst", minimum=0, maximum=100 * 10 * CFS_BASE_PERIOD, optional=True
    ),
    CgroupResource(CPU_BVT_WARP_NS, "cpu", CPU_BVT_WARP_NS, minimum=-1, maximum=2, optional=True),
    CgroupResource(CPU_IDLE, "cpu", CPU_IDLE, minimum=0, maximum=1, optional=True),
    CgroupResource(CPU_STAT, "cpu", CPU_STAT, kind=ValueKind.RAW, writable=False),
    CgroupResource(CPU_TASKS, "cpu", "cgroup.threads", kind=ValueKind.RAW),
    CgroupResource(CPU_PROCS, "cpu", CPU_PROCS, kind=ValueKind.RAW),
    CgroupResource(CPUSET_CPUS, "cpuset", CPUSET_CPUS, kind=ValueKind.CPUSET),
    CgroupResource(CPUSET_MEMS, "cpuset", CPUSET_MEMS, kind=ValueKind.CPUSET),
    CgroupResource(
        CPUSET_CPUS_EFFECTIVE, "cpuset", CPUSET_CPUS_EFFECTIVE, kind=ValueKind.CPUSET, writable=False
    ),
    CgroupResource(CPUACCT_USAGE, "cpuacct", CPU_STAT, kind=ValueKind.RAW, writable=False),
    CgroupResource(MEMORY_LIMIT, "memory", "memory.max", minimum=-1, maximum=MAX_INT64),
    CgroupResource(MEMORY_USAGE, "memory", "memory.current", kind=ValueKind.RAW, writable=False),
    CgroupResource(MEMORY_STAT, "memory", MEMORY_STAT, kind=ValueKind.RAW, writable=False),
    CgroupResource(MEMORY_MIN, "memory", MEMORY_MIN, minimum=0, maximum=MAX_INT64, optional=True),
    CgroupResource(MEMORY_LOW, "memory", MEMORY_LOW, minimum=0, maximum=MAX_INT64, optional=True),
    CgroupResource(MEMORY_HIGH, "memory", MEMORY_HIGH, minimum=0, maximum=MAX_INT64, optional=True),
)

RESOURCES: Final[Mapping[str, CgroupResource]] = {r.name: r for r in _TABLE}


def resource(name: str) -> CgroupResource:
    try:
        return RESOURCES[name]
    except KeyError:
        raise ResourceUnsupportedError(
            name, f"unknown cgroup resource; known: {', '.join(sorted(RESOURCES))}"
        ) from None


# --- parsers -------------------------------------------------------------------------------------------


def parse_int_value(text: str, path: str | Path = "") -> int:
    """One integer; ``max`` (v2's unlimited) reads as MaxInt64."""
    value = text.strip()
    if value == "max":
        return MAX_INT64
    try:
        return int(value)
    except ValueError:
        raise CgroupParseError(path, f"expected an integer, got {value!r}") from None


def parse_kv(content: str) -> dict[str, str]:
    """``key value`` lines (``cpu.stat``, ``memory.stat``) into a dict; malformed lines are skipped."""
    out: dict[str, str] = {}
    for line in content.splitlines():
        fields = line.split()
        if len(fields) == 2:
            out[fields[0]] = fields[1]
    return out


def parse_cpu_max(content: str, path: str | Path = "") -> tuple[int, int]:
    """v2 ``cpu.max``: ``"max 100000"`` -> ``(-1, 100000)``, ``"50000 100000"`` -> ``(50000, 100000)``."""
    fields = content.split()
    if len(fields) != 2:
        raise CgroupParseError(path, f"cpu.max must be '<quota|max> <period>', got {content.strip()!r}")
    quota = -1 if fields[0] == "max" else parse_int_value(fields[0], path)
    return quota, parse_int_value(fields[1], path)


@dataclass(frozen=True, slots=True)
class CPUStat:
    """Throttling counters of ``cpu.stat`` (v2's ``throttled_usec`` converted to ns)."""

    nr_periods: int
    nr_throttled: int
    throttled_ns: int


def throttled_ratio(current: CPUStat, previous: CPUStat) -> float:
    """Share of periods throttled between two reads (``CalcCPUThrottledRatio``); 0 without new periods."""
    periods = current.nr_periods - previous.nr_periods
    if periods <= 0:
        return 0.0
    return (current.nr_throttled - previous.nr_throttled) / periods


def parse_cpu_stat(content: str, version: CgroupVersion, path: str | Path = "") -> CPUStat:
    kv = parse_kv(content)
    keys = (
        "nr_periods",
        "nr_throttled",
        "throttled_time" if version is CgroupVersion.V1 else "throttled_usec",
    )
    try:
        values = [int(kv[k]) for k in keys]
    except KeyError as err:
        raise CgroupParseError(path, f"cpu.stat lacks field {err.args[0]}") from None
    except ValueError:
        raise CgroupParseError(path, f"cpu.stat has a non-integer field: {content.strip()!r}") from None
    throttled_ns = values[2] if version is CgroupVersion.V1 else values[2] * 1000
    return CPUStat(values[0], values[1], throttled_ns)


@dataclass(frozen=True, slots=True)
class MemoryStat:
    """The ``memory.stat`` fields Koordinator reads (v1 ``total_*`` or the v2 names)."""

    cache: int = 0
    rss: int = 0
    inactive_file: int = 0
    active_file: int = 0
    inactive_anon: int = 0
    active_anon: int = 0
    unevictable: int = 0

    def usage(self) -> int:
        """Usage without page cache: anon + unevictable (``MemoryStatRaw.Usage``)."""
        return self.inactive_anon + self.active_anon + self.unevictable

    def usage_with_page_cache(self) -> int:
        return self.usage() + self.active_file + self.inactive_file


_MEMSTAT_V1: Final = {
    "cache": "total_cache",
    "rss": "total_rss",
    "inactive_file": "total_inactive_file",
    "active_file": "total_active_file",
    "inactive_anon": "total_inactive_anon",
    "active_anon": "total_active_anon",
    "unevictable": "total_unevictable",
}
_MEMSTAT_V2: Final = {
    "cache": "file",
    "rss": "anon",
    "inactive_file": "inactive_file",
    "active_file": "active_file",
    "inactive_anon": "inactive_anon",
    "active_anon": "active_anon",
    "unevictable": "unevictable",
}


def parse_memory_stat(content: str, version: CgroupVersion, path: str | Path = "") -> MemoryStat:
    kv = parse_kv(content)
    names = _MEMSTAT_V1 if version is CgroupVersion.V1 else _MEMSTAT_V2
    values: dict[str, int] = {}
    for attr, key in names.items():
        if key not in kv:
            raise CgroupParseError(path, f"memory.stat lacks field {key}")
        try:
            values[attr] = int(kv[key])
        except ValueError:
            raise CgroupParseError(path, f"memory.stat field {key} is not an integer: {kv[key]!r}") from None
    return MemoryStat(**values)


def parse_int_lines(content: str, path: str | Path = "") -> list[int]:
    """``tasks``/``cgroup.procs``: one id per line, blanks skipped."""
    out: list[int] = []
    for line in content.splitlines():
        text = line.strip()
        if not text:
            continue
        try:
            out.append(int(text))
        except ValueError:
            raise CgroupParseError(path, f"expected one integer per line, got {text!r}") from None
    return out


def shares_to_weight(shares: int) -> int:
    """``cpu.shares`` (v1) -> ``cpu.weight`` (v2) as the kubelet maps them: [2, 262144] -> [1, 10000]."""
    weight = 1 + (shares - 2) * 9999 // 262142
    return max(CPU_WEIGHT_MIN, min(CPU_WEIGHT_MAX, weight))


def weight_to_shares(weight: int) -> int:
    shares = (weight - 1) * 262142 // 9999 + 2
    return max(CPU_SHARES_MIN, min(CPU_SHARES_MAX, shares))


# --- reader --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CgroupReader:
    """Typed reads of one host's cgroup files, v1 or v2 (Koordinator's ``CgroupReader``)."""

    layout: CgroupLayout

    @property
    def version(self) -> CgroupVersion:
        return self.layout.version

    def path(self, name: str, parent_dir: str) -> Path:
        return self.layout.file_path(resource(name), parent_dir)

    def read_raw(self, name: str, parent_dir: str) -> str:
        path = self.path(name, parent_dir)
        try:
            with open(path, encoding="ascii", errors="replace") as fh:
                return fh.read().rstrip("\n")
        except FileNotFoundError:
            if not path.parent.exists():
                raise CgroupNotFoundError(path.parent, "cgroup dir does not exist") from None
            raise CgroupNotFoundError(path, "cgroup file does not exist") from None
        except OSError as err:
            raise CgroupError(path, f"cannot read: {err.strerror or err}") from None

    def exists(self, name: str, parent_dir: str) -> bool:
        try:
            return self.path(name, parent_dir).exists()
        except ResourceUnsupportedError:
            return False

    def read_int(self, name: str, parent_dir: str) -> int:
        return parse_int_value(self.read_raw(name, parent_dir), self.path(name, parent_dir))

    def read_cpu_quota(self, parent_dir: str) -> int:
        """cfs quota in us; -1 when unlimited on either version."""
        if self.version is CgroupVersion.V2:
            return parse_cpu_max(
                self.read_raw(CPU_CFS_QUOTA, parent_dir), self.path(CPU_CFS_QUOTA, parent_dir)
            )[0]
        return self.read_int(CPU_CFS_QUOTA, parent_dir)

    def read_cpu_period(self, parent_dir: str) -> int:
        if self.version is CgroupVersion.V2:
            return parse_cpu_max(
                self.read_raw(CPU_CFS_PERIOD, parent_dir), self.path(CPU_CFS_PERIOD, parent_dir)
            )[1]
        return self.read_int(CPU_CFS_PERIOD, parent_dir)

    def read_cpu_shares(self, parent_dir: str) -> int:
        value = self.read_int(CPU_SHARES, parent_dir)
        return weight_to_shares(value) if self.version is CgroupVersion.V2 else value

    def read_cpuset_raw(self, parent_dir: str) -> str:
        """The CPUs the cgroup may use: ``cpuset.cpus`` on v1; ``cpuset.cpus.effective`` on v2, where an empty
        ``cpuset.cpus`` means "the parent's" (Koordinator's v2 reader does the same)."""
        if self.version is CgroupVersion.V2:
            return self.read_raw(CPUSET_CPUS_EFFECTIVE, parent_dir)
        return self.read_raw(CPUSET_CPUS, parent_dir)

    def read_cpuset(self, parent_dir: str) -> frozenset[int]:
        raw = self.read_cpuset_raw(parent_dir)
        try:
            return parse_cpuset(raw)
        except CPUSetError as err:
            raise CgroupParseError(self.path(CPUSET_CPUS, parent_dir), str(err)) from None

    def read_cpuacct_usage(self, parent_dir: str) -> int:
        """Cumulative CPU time in nanoseconds (v2: ``usage_usec`` of ``cpu.stat`` x 1000)."""
        path = self.path(CPUACCT_USAGE, parent_dir)
        raw = self.read_raw(CPUACCT_USAGE, parent_dir)
        if self.version is CgroupVersion.V2:
            kv = parse_kv(raw)
            if "usage_usec" not in kv:
                raise CgroupParseError(path, "cpu.stat lacks usage_usec")
            return parse_int_value(kv["usage_usec"], path) * 1000
        return parse_int_value(raw, path)

    def read_cpu_stat(self, parent_dir: str) -> CPUStat:
        return parse_cpu_stat(
            self.read_raw(CPU_STAT, parent_dir), self.version, self.path(CPU_STAT, parent_dir)
        )

    def read_memory_stat(self, parent_dir: str) -> MemoryStat:
        return parse_memory_stat(
            self.read_raw(MEMORY_STAT, parent_dir), self.version, self.path(MEMORY_STAT, parent_dir)
        )

    def read_memory_usage(self, parent_dir: str) -> int:
        return self.read_int(MEMORY_USAGE, parent_dir)

    def read_memory_limit(self, parent_dir: str) -> int:
        """Bytes; -1 when unlimited (v1's page-counter max and v2's ``max`` both read as -1)."""
        value = self.read_int(MEMORY_LIMIT, parent_dir)
        return -1 if value >= 0x7FFFFFFFFFFFF000 else value

    def read_tasks(self, parent_dir: str) -> list[int]:
        return parse_int_lines(self.read_raw(CPU_TASKS, parent_dir), self.path(CPU_TASKS, parent_dir))

    def read_procs(self, parent_dir: str) -> list[int]:
        return parse_int_lines(self.read_raw(CPU_PROCS, parent_dir), self.path(CPU_PROCS, parent_dir))


def iter_resources() -> Iterator[CgroupResource]:
    yield from _TABLE
