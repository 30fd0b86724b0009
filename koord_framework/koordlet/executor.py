"""The one door through which the koordlet writes host state (Koordinator's ``resourceexecutor``).

Every QoS strategy describes what it wants as ``CgroupUpdate`` (a cgroup interface file of a parent dir)
or ``FileUpdate`` (any other host file: resctrl ``schemata``/``tasks``, sysctls) and hands it to the
``ResourceExecutor``, which

* **validates** the value before touching the file (cfs quota -1 or >= 1000 us, ``cpu.shares`` in
  [2, 262144], a cpuset that parses and names only CPUs the node has, the ranges of Koordinator's
  validators) -- a bad value never reaches the kernel;
* **translates** v1 names and values to cgroup v2 (quota and period into ``cpu.max``, shares into
  ``cpu.weight``, -1 into ``max``);
* **skips unchanged values**: it reads the file and compares semantically (cpusets as sets, ``max`` as
  MaxInt64), and a *cacheable* update is skipped without even reading while the same value was written less
  than ``force_update_seconds`` ago;
* **orders multi-file updates** so no hierarchy is left half-done: ``leveled_update`` first loosens from the
  top down (a cpuset grows to old | new, a quota rises) and then writes the real values from the bottom up,
  so a parent never holds less than a child; if a write fails, what that batch already wrote is **rolled
  back** in reverse order (each undo restores a state that was valid before);
* **keeps an audit record** of every write attempt (time, file, old and new value, who asked and why, the
  outcome) in a bounded ring, and counts outcomes on the Prometheus registry it was given;
* **never raises for a failed write**: the result says what happened, and the agent goes on. A missing
  cgroup dir (the pod just left) or a kernel without the file is a skip, not a failure, as in Koordinator.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry, Counter

from koord_framework.cluster.clock import Clock, WallClock
from koord_framework.koordlet.cgroups import (
    CFS_QUOTA_MIN,
    CPU_CFS_PERIOD,
    CPU_CFS_QUOTA,
    CPU_SHARES,
    CPUSET_CPUS,
    CPUSET_CPUS_EFFECTIVE,
    MAX_INT64,
    MEMORY_HIGH,
    MEMORY_LIMIT,
    MEMORY_LOW,
    MEMORY_MIN,
    CgroupLayout,
    CgroupParseError,
    CgroupResource,
    CgroupVersion,
    ResourceUnsupportedError,
    ValueKind,
    parse_cpu_max,
    parse_int_value,
    resource,
    shares_to_weight,
)
from koord_framework.koordlet.cpuset import CPUSetError, format_cpuset, parse_cpuset, same_cpus

__all__ = [
    "AuditRecord",
    "CgroupUpdate",
    "FileUpdate",
    "ResourceExecutor",
    "Update",
    "WriteResult",
    "WriteStatus",
]


@dataclass(frozen=True, slots=True)
class CgroupUpdate:
    """Set one cgroup interface (named by its v1 file, e.g. ``cpu.cfs_quota_us``) of one parent dir."""

    resource: str
    parent_dir: str
    value: str
    reason: str = ""
    """Why, in a few words (``suppress BE by node cpu usage``); goes to the audit record."""
    owner: str = ""
    """Who asked: the strategy's name (``BECPUSuppress``)."""

    @property
    def key(self) -> str:
        return f"{self.parent_dir.strip('/')}/{self.resource}"


@dataclass(frozen=True, slots=True)
class FileUpdate:
    """Set any other host file (resctrl ``schemata``, a sysctl). ``validate`` returns a problem or None;
    ``equal(current, new)`` decides whether the write can be skipped (text equality by default)."""

    path: Path
    value: str
    reason: str = ""
    owner: str = ""
    validate: Callable[[str], str | None] | None = None
    equal: Callable[[str, str], bool] | None = None
    append: bool = False
    """Append instead of replacing (resctrl ``tasks`` takes one id per write and keeps the others)."""

    @property
    def key(self) -> str:
        return str(self.path)


Update = CgroupUpdate | FileUpdate


class WriteStatus(StrEnum):
    WRITTEN = "written"
    UNCHANGED = "unchanged"
    """The file already held the value (or the merge pass had nothing to loosen)."""
    CACHED = "cached"
    """A cacheable update whose value was written recently; not even read."""
    UNSUPPORTED = "unsupported"
    """This kernel/cgroup version has no such file; skipped."""
    MISSING = "missing"
    """The cgroup dir or file does not exist (e.g. the pod is gone); skipped."""
    INVALID = "invalid"
    """Refused by validation; nothing was written."""
    FAILED = "failed"
    """The kernel refused the write or the file could not be read."""
    ROLLED_BACK = "rolled-back"
    """Written, then undone because a later write of the same batch failed."""


_FAILURES: Final = frozenset({WriteStatus.INVALID, WriteStatus.FAILED})


@dataclass(frozen=True, slots=True)
class WriteResult:
    key: str
    path: str
    status: WriteStatus
    value: str
    """The text that was (or would have been) written."""
    old: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status not in _FAILURES

    @property
    def changed(self) -> bool:
        return self.status is WriteStatus.WRITTEN


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One write attempt, as ``koord koordlet --once`` prints it and an operator reads it."""

    time: float
    path: str
    old: str | None
    new: str
    status: WriteStatus
    reason: str
    owner: str
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "time": self.time,
            "path": self.path,
            "old": self.old,
            "new": self.new,
            "status": self.status.value,
            "reason": self.reason,
            "owner": self.owner,
            "error": self.error,
        }


class _Skip(Exception):
    def __init__(self, status: WriteStatus, message: str = "") -> None:
        self.status = status
        super().__init__(message)


@dataclass(slots=True)
class _Plan:
    """An update resolved against the host: the file, the text to write and the comparison rule."""

    key: str
    path: Path
    text: str
    compare: Callable[[str, str], bool]
    append: bool = False


def _int_or_none(text: str) -> int | None:
    try:
        return parse_int_value(text)
    except CgroupParseError:
        return None


def _same_int(current: str, new: str) -> bool:
    a, b = _int_or_none(current), _int_or_none(new)
    if a is None or b is None:
        return current.strip() == new.strip()
    return a == b


def _same_text(current: str, new: str) -> bool:
    return current.strip() == new.strip()


def _unlimited_as_max(value: int) -> int:
    """-1 and ``max`` are +infinity when deciding whether a quota or limit grows."""
    return MAX_INT64 if value in (-1, MAX_INT64) else value


class ResourceExecutor:
    """Validated, deduplicated, audited writes of host state. One per agent; strategies share it."""

    def __init__(
        self,
        layout: CgroupLayout,
        *,
        clock: Clock | None = None,
        node_cpus: Iterable[int] | None = None,
        force_update_seconds: float = 60.0,
        audit_capacity: int = 4096,
        registry: CollectorRegistry | None = None,
        dry_run: bool = False,
    ) -> None:
        self.layout = layout
        self.dry_run = dry_run
        """Validate, compare and audit every update as usual, but write nothing (``koord koordlet
        --dry-run``): the audit then lists what would have been written."""
        self.clock: Clock = clock or WallClock()
        self.node_cpus: frozenset[int] | None = frozenset(node_cpus) if node_cpus is not None else None
        self.force_update_seconds = force_update_seconds
        self._audit: deque[AuditRecord] = deque(maxlen=audit_capacity)
        self._cache: dict[str, tuple[str, float]] = {}
        self._ops = 0
        self._lock = threading.RLock()
        self._counter: Counter | None = None
        if registry is not None:
            self._counter = Counter(
                "koordlet_resource_update",
                "Host resource writes requested through the executor, by resource file and outcome.",
                ["resource", "status"],
                registry=registry,
            )

    # --- public API --------------------------------------------------------------------------------------
    @property
    def audit(self) -> list[AuditRecord]:
        with self._lock:
            return list(self._audit)

    def audit_since(self, since: float) -> list[AuditRecord]:
        with self._lock:
            return [r for r in self._audit if r.time >= since]

    def update(self, update: Update, *, cacheable: bool = False) -> WriteResult:
        """Write one value if it differs; never raises for host problems (see ``WriteResult.status``)."""
        with self._lock:
            return self._update(update, cacheable=cacheable, log=None)

    def update_batch(self, updates: Iterable[Update], *, cacheable: bool = False) -> list[WriteResult]:
        """Independent writes in order; one failing does not stop or undo the others."""
        with self._lock:
            return [self._update(u, cacheable=cacheable, log=None) for u in updates]

    def transaction(self, updates: Sequence[Update], *, cacheable: bool = False) -> list[WriteResult]:
        """Writes in the given order, all or nothing: when one fails, the ones already written are restored
        in reverse order and reported ``ROLLED_BACK``. Skips (unchanged, missing, unsupported) are no failure.
        """
        with self._lock:
            log: list[tuple[int, _Plan, str, Update]] = []
            results: list[WriteResult] = []
            for u in updates:
                res = self._update(u, cacheable=cacheable, log=log, index=len(results))
                results.append(res)
                if not res.ok:
                    self._rollback(log, results, cause=res)
                    break
            return results

    def leveled_update(
        self, levels: Sequence[Sequence[CgroupUpdate]], *, cacheable: bool = False
    ) -> list[WriteResult]:
        """Update one interface across a hierarchy (``levels[0]`` the top, e.g. the besteffort dir, then
        pods, then containers) without ever leaving a child looser than its parent.

        Pass 1, top to bottom: mergeable resources are loosened to ``merge(old, new)`` (cpuset union, the
        larger quota or memory protection) and other resources get their final value. Pass 2, bottom to top:
        mergeable resources get their final value. Koordinator's ``LeveledUpdateBatch``, plus rollback of the
        whole batch when a write fails. Returns one result per update, in the order of ``levels`` flattened:
        the decisive one (pass 2 for mergeable resources), ``ROLLED_BACK`` for updates undone.
        """
        with self._lock:
            flat = [u for level in levels for u in level]
            positions = {id(u): i for i, u in enumerate(flat)}
            results: list[WriteResult | None] = [None] * len(flat)
            log: list[tuple[int, _Plan, str, Update]] = []
            done: set[int] = set()

            def fail(pos: int, res: WriteResult) -> list[WriteResult]:
                results[pos] = res
                self._rollback(log, results, cause=res)
                return [
                    r if r is not None else WriteResult(u.key, "", WriteStatus.UNCHANGED, u.value)
                    for r, u in zip(results, flat, strict=True)
                ]

            for u in flat:
                pos = positions[id(u)]
                if cacheable and self._cached(u):
                    results[pos] = self._result_for_cached(u)
                    done.add(pos)
                    continue
                if _mergeable(u.resource):
                    res = self._merge_update(u, log=log, index=pos)
                else:
                    res = self._update(u, cacheable=False, log=log, index=pos)
                    done.add(pos)
                results[pos] = res
                if not res.ok:
                    return fail(pos, res)
            for u in reversed(flat):
                pos = positions[id(u)]
                if pos in done:
                    continue
                res = self._update(u, cacheable=False, log=log, index=pos)
                if not res.ok:
                    return fail(pos, res)
                merged = results[pos]
                if res.status is WriteStatus.UNCHANGED and merged is not None and merged.changed:
                    res = WriteResult(res.key, res.path, WriteStatus.WRITTEN, res.value, merged.old, None)
                results[pos] = res
                if cacheable and res.status in (WriteStatus.WRITTEN, WriteStatus.UNCHANGED):
                    self._cache[u.key] = (u.value, self.clock.now())
            return [r for r in results if r is not None]

    def read(self, update_or_key: CgroupUpdate | tuple[str, str]) -> str:
        """The current raw text of the file an update would write (for strategies that merge themselves)."""
        if isinstance(update_or_key, CgroupUpdate):
            name, parent = update_or_key.resource, update_or_key.parent_dir
        else:
            name, parent = update_or_key
        return self.layout.file_path(resource(name), parent).read_text().rstrip("\n")

    def forget(self, prefix: str = "") -> None:
        """Drop cached values (all, or those under a parent dir): the next cacheable update reads again."""
        with self._lock:
            if not prefix:
                self._cache.clear()
                return
            for key in [k for k in self._cache if k.startswith(prefix.strip("/"))]:
                del self._cache[key]

    # --- internals ---------------------------------------------------------------------------------------
    def _cached(self, u: Update) -> bool:
        self._ops += 1
        if self._ops % 4096 == 0:
            # Entries older than the force-update window are useless; dropping them bounds the cache when
            # pods come and go for weeks.
            cutoff = self.clock.now() - self.force_update_seconds
            for key in [k for k, (_, t) in self._cache.items() if t < cutoff]:
                del self._cache[key]
        hit = self._cache.get(u.key)
        return hit is not None and hit[0] == u.value and self.clock.now() - hit[1] < self.force_update_seconds

    def _result_for_cached(self, u: Update) -> WriteResult:
        return WriteResult(u.key, "", WriteStatus.CACHED, u.value)

    def _update(
        self,
        u: Update,
        *,
        cacheable: bool,
        log: list[tuple[int, _Plan, str, Update]] | None,
        index: int = 0,
    ) -> WriteResult:
        if cacheable and self._cached(u):
            self._count(u, WriteStatus.CACHED)
            return self._result_for_cached(u)
        try:
            plan = self._plan(u)
        except _Skip as skip:
            return self._finish(u, "", skip.status, u.value, None, str(skip) or None)
        current: str | None = None
        if not plan.append:
            try:
                current = _read_text(plan.path)
            except _Skip as skip:
                return self._finish(u, str(plan.path), skip.status, plan.text, None, str(skip))
            if plan.compare(current, plan.text):
                if cacheable:
                    self._cache[u.key] = (u.value, self.clock.now())
                return self._finish(
                    u, str(plan.path), WriteStatus.UNCHANGED, plan.text, current, None, audit=False
                )
        try:
            self._write(plan.path, plan.text, append=plan.append)
        except _Skip as skip:
            return self._finish(u, str(plan.path), skip.status, plan.text, current, str(skip))
        if log is not None and current is not None:
            log.append((index, plan, current, u))
        if cacheable:
            self._cache[u.key] = (u.value, self.clock.now())
        return self._finish(u, str(plan.path), WriteStatus.WRITTEN, plan.text, current, None)

    def _merge_update(
        self, u: CgroupUpdate, *, log: list[tuple[int, _Plan, str, Update]], index: int
    ) -> WriteResult:
        """Pass-1 write of a mergeable resource: loosen only (never tighten) towards the new value."""
        try:
            plan = self._plan(u)
            current = _read_text(plan.path)
        except _Skip as skip:
            return self._finish(u, "", skip.status, u.value, None, str(skip) or None)
        merged = self._merged_text(u, current, plan.text)
        if merged is None:
            return self._finish(
                u, str(plan.path), WriteStatus.UNCHANGED, plan.text, current, None, audit=False
            )
        loose = CgroupUpdate(
            u.resource, u.parent_dir, merged, f"{u.reason} (loosen before tightening)", u.owner
        )
        try:
            merged_plan = self._plan(loose)
            self._write(merged_plan.path, merged_plan.text)
        except _Skip as skip:
            return self._finish(loose, str(plan.path), skip.status, merged, current, str(skip))
        log.append((index, merged_plan, current, loose))
        return self._finish(loose, str(plan.path), WriteStatus.WRITTEN, merged_plan.text, current, None)

    def _write(self, path: Path, text: str, *, append: bool = False) -> None:
        if not self.dry_run:
            _write_text(path, text, append=append)

    def _merged_text(self, u: CgroupUpdate, current: str, new_text: str) -> str | None:
        """The looser of old and new for pass 1, or None when the old value is already loose enough."""
        if u.resource == CPUSET_CPUS:
            if self.layout.version is CgroupVersion.V2 and not current.strip():
                # An empty v2 cpuset means "the parent's": what the cgroup really has is the effective set.
                try:
                    current = _read_text(self.layout.file_path(resource(CPUSET_CPUS_EFFECTIVE), u.parent_dir))
                except _Skip:
                    return None
            try:
                old, new = parse_cpuset(current), parse_cpuset(u.value)
            except CPUSetError:
                return None
            if new <= old:
                return None
            return format_cpuset(old | new)
        if u.resource == CPU_CFS_QUOTA:
            old_quota = (
                parse_cpu_max(current)[0]
                if self.layout.version is CgroupVersion.V2
                else _int_or_none(current)
            )
            new_quota = _int_or_none(u.value)
            if old_quota is None or new_quota is None:
                return None
            return u.value if _unlimited_as_max(new_quota) > _unlimited_as_max(old_quota) else None
        old_v, new_v = _int_or_none(current), _int_or_none(new_text)
        if old_v is None or new_v is None:
            return None
        return u.value if _unlimited_as_max(new_v) > _unlimited_as_max(old_v) else None

    def _rollback(
        self,
        log: list[tuple[int, _Plan, str, Update]],
        results: Sequence[WriteResult | None],
        *,
        cause: WriteResult,
    ) -> None:
        for index, plan, old, u in reversed(log):
            try:
                self._write(plan.path, old)
                status = WriteStatus.ROLLED_BACK
                err = f"undone because {cause.path or cause.key} failed: {cause.error}"
            except _Skip as skip:
                status, err = WriteStatus.FAILED, f"rollback failed: {skip}"
            self._record(u, str(plan.path), status, old, plan.text, err)
            prev = results[index]
            if prev is not None and isinstance(results, list):
                results[index] = WriteResult(prev.key, prev.path, status, prev.value, prev.old, err)
            self._cache.pop(u.key, None)
        log.clear()

    def _finish(
        self,
        u: Update,
        path: str,
        status: WriteStatus,
        text: str,
        old: str | None,
        error: str | None,
        *,
        audit: bool = True,
    ) -> WriteResult:
        self._count(u, status)
        if audit and status in (WriteStatus.WRITTEN, WriteStatus.FAILED, WriteStatus.INVALID):
            self._record(u, path, status, text, old, error)
        return WriteResult(u.key, path, status, text, old, error)

    def _record(
        self, u: Update, path: str, status: WriteStatus, new: str, old: str | None, error: str | None
    ) -> None:
        if status is WriteStatus.ROLLED_BACK:
            new, old = old or "", new
        self._audit.append(
            AuditRecord(self.clock.now(), path or u.key, old, new, status, u.reason, u.owner, error)
        )

    def _count(self, u: Update, status: WriteStatus) -> None:
        if self._counter is not None:
            name = u.resource if isinstance(u, CgroupUpdate) else u.path.name
            self._counter.labels(name, status.value).inc()

    # --- planning: validation and v1 -> v2 translation --------------------------------------------------
    def _plan(self, u: Update) -> _Plan:
        if isinstance(u, FileUpdate):
            if u.validate is not None and (problem := u.validate(u.value)) is not None:
                raise _Skip(WriteStatus.INVALID, f"{u.path}: {problem}")
            return _Plan(u.key, u.path, u.value, u.equal or _same_text, u.append)
        try:
            res = resource(u.resource)
        except ResourceUnsupportedError as err:
            raise _Skip(WriteStatus.INVALID, str(err)) from None
        if not res.writable:
            raise _Skip(WriteStatus.INVALID, f"{res.name} is read-only")
        problem = self._validate(res, u.value)
        if problem is not None:
            raise _Skip(WriteStatus.INVALID, f"{u.parent_dir}/{res.name}: {problem}")
        try:
            path = self.layout.file_path(res, u.parent_dir)
        except ResourceUnsupportedError as err:
            raise _Skip(WriteStatus.UNSUPPORTED, str(err)) from None
        if not path.parent.is_dir():
            raise _Skip(WriteStatus.MISSING, f"cgroup dir {path.parent} does not exist")
        if not path.exists():
            status = WriteStatus.UNSUPPORTED if res.optional else WriteStatus.MISSING
            raise _Skip(status, f"cgroup file {path} does not exist")
        if self.layout.version is CgroupVersion.V2:
            return self._plan_v2(u, res, path)
        value = u.value.strip()
        if res.kind is ValueKind.QUOTA and value == "max":
            value = "-1"
        compare = _cpuset_compare if res.kind is ValueKind.CPUSET else _same_int
        if res.kind is ValueKind.RAW:
            compare = _same_text
        return _Plan(
            u.key, path, value, compare, append=res.name in ("tasks", "cgroup.procs", "cgroup.threads")
        )

    def _plan_v2(self, u: CgroupUpdate, res: CgroupResource, path: Path) -> _Plan:
        value = u.value.strip()
        if res.name in (CPU_CFS_QUOTA, CPU_CFS_PERIOD):
            # cpu.max holds both numbers; keep the other one as the kernel has it.
            quota, period = parse_cpu_max(_read_text(path), path)
            if res.name == CPU_CFS_QUOTA:
                q = int(value) if value not in ("-1", "max") else -1
                text = f"{'max' if q == -1 else q} {period}"
            else:
                text = f"{'max' if quota == -1 else quota} {int(value)}"

            def same_max(current: str, new: str) -> bool:
                try:
                    return parse_cpu_max(current) == parse_cpu_max(new)
                except Exception:
                    return _same_text(current, new)

            return _Plan(u.key, path, text, same_max)
        if res.name == CPU_SHARES:
            return _Plan(u.key, path, str(shares_to_weight(int(value))), _same_int)
        if res.name in (MEMORY_LIMIT, MEMORY_HIGH) and value == "-1":
            return _Plan(u.key, path, "max", _same_int)
        if res.kind is ValueKind.CPUSET:
            return _Plan(u.key, path, value, _cpuset_compare)
        if res.kind is ValueKind.RAW:
            return _Plan(u.key, path, value, _same_text, append=res.name in ("tasks", "cgroup.procs"))
        return _Plan(u.key, path, value, _same_int)

    def _validate(self, res: CgroupResource, value: str) -> str | None:
        text = value.strip()
        if res.kind is ValueKind.RAW:
            return None if text else "empty value"
        if res.kind is ValueKind.CPUSET:
            try:
                cpus = parse_cpuset(text)
            except CPUSetError as err:
                return str(err)
            if res.name == CPUSET_CPUS and self.node_cpus is not None and not cpus <= self.node_cpus:
                extra = format_cpuset(cpus - self.node_cpus)
                have = format_cpuset(self.node_cpus)
                return f"cpuset {text!r} names cpus {extra} the node does not have ({have})"
            return None
        if res.kind is ValueKind.QUOTA:
            if text == "max":
                return None
            try:
                quota = int(text)
            except ValueError:
                return f"cfs quota must be an integer, got {text!r}"
            if quota != -1 and quota < CFS_QUOTA_MIN:
                return f"cfs quota must be -1 (unlimited) or >= {CFS_QUOTA_MIN} us, got {quota}"
            return None
        if text == "max" and res.name in (MEMORY_LIMIT, MEMORY_HIGH, MEMORY_MIN, MEMORY_LOW):
            return None
        try:
            number = int(text)
        except ValueError:
            return f"must be an integer, got {text!r}"
        if res.name == MEMORY_LIMIT and number == -1:
            return None
        low, high = res.minimum, res.maximum  # validated in v1 units; v2 translation happens after
        if low is not None and number < low:
            return f"must be >= {low}, got {number}"
        if high is not None and number > high:
            return f"must be <= {high}, got {number}"
        return None


def _mergeable(name: str) -> bool:
    return name in (CPUSET_CPUS, CPU_CFS_QUOTA, MEMORY_MIN, MEMORY_LOW, MEMORY_HIGH)


def _cpuset_compare(current: str, new: str) -> bool:
    return same_cpus(current, new)


def _read_text(path: Path) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().rstrip("\n")
    except FileNotFoundError:
        raise _Skip(WriteStatus.MISSING, f"{path} does not exist") from None
    except OSError as err:
        raise _Skip(WriteStatus.FAILED, f"cannot read {path}: {err.strerror or err}") from None


def _os_write(path: Path, text: str, append: bool) -> None:
    # One write(2) per value: cgroup files act on each write call, never on a partial buffer.
    with open(path, "a" if append else "w", encoding="ascii") as fh:
        fh.write(text)


def _write_text(path: Path, text: str, *, append: bool = False) -> None:
    try:
        _os_write(path, text, append)
    except FileNotFoundError:
        raise _Skip(WriteStatus.MISSING, f"{path} does not exist") from None
    except OSError as err:
        raise _Skip(WriteStatus.FAILED, f"cannot write {text!r} to {path}: {err.strerror or err}") from None
