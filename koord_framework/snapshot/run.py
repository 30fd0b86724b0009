"""Taking a snapshot: every kind of ``SNAPSHOT_KINDS`` page by page, cleaned, optionally anonymized, checked
by the same validation the ``--cluster`` loader runs, and written as it comes; progress on stderr."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from koord_framework import __version__
from koord_framework.cluster.kinds import KIND_DISTRIBUTIONS, KindInfo
from koord_framework.cluster.kube.errors import ExpiredError, KubeApiError
from koord_framework.cluster.manifest_checks import validate_object
from koord_framework.errors import ManifestError
from koord_framework.snapshot.anonymize import Anonymizer
from koord_framework.snapshot.clean import clean_object
from koord_framework.snapshot.kinds import CONFIG_MAPS, DEFAULT_CONFIG_NAMESPACE, SNAPSHOT_KINDS
from koord_framework.snapshot.source import SnapshotSource
from koord_framework.snapshot.writer import SnapshotWriter

__all__ = ["Progress", "SnapshotOptions", "SnapshotResult", "take_snapshot"]

_RESTARTS = 3


@dataclass(frozen=True)
class SnapshotOptions:
    page_size: int = 500
    anonymize: bool = False
    salt: str = ""
    config_namespace: str = DEFAULT_CONFIG_NAMESPACE
    kinds: tuple[str, ...] = SNAPSHOT_KINDS
    config_maps: tuple[str, ...] = CONFIG_MAPS


@dataclass
class SnapshotResult:
    counts: dict[str, int] = field(default_factory=dict)
    """Objects written per kind."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Kinds not dumped and why (not installed, not served: the snapshot is still complete)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Kinds that could not be read (403, an API error): the snapshot is partial."""
    invalid: list[str] = field(default_factory=list)
    """Objects left out because the loader would refuse them (kind ns/name: problem)."""
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.failed and not self.invalid

    @property
    def total(self) -> int:
        return sum(self.counts.values())


class Progress:
    """Progress lines on ``stream``: per kind the count so far and the rate (at most one a ``every`` seconds),
    a line per finished kind; skips and failures always (also when ``quiet``). The command prints the final
    summary line itself."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        quiet: bool = False,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet, self.every, self.clock = quiet, every, clock
        self._start = self._last = 0.0

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def kind_started(self, kind: str) -> None:
        self._start = self._last = self.clock()

    def page(self, kind: str, count: int) -> None:
        now = self.clock()
        if self.quiet or now - self._last < self.every:
            return
        self._last = now
        self._say(f"  {kind}: {count} so far ({_rate(count, now - self._start)})")

    def kind_done(self, kind: str, count: int) -> None:
        if not self.quiet:
            took = self.clock() - self._start
            self._say(f"{kind}: {count} in {took:.1f} s ({_rate(count, took)})")

    def problem(self, text: str) -> None:
        self._say(text)


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:.0f}/s" if seconds > 0 else "-"


def take_snapshot(
    source: SnapshotSource,
    writer: SnapshotWriter,
    kinds: Mapping[str, KindInfo],
    options: SnapshotOptions = SnapshotOptions(),
    progress: Progress | None = None,
) -> SnapshotResult:
    """Dump ``source`` through ``writer``. Raises ``ClusterError`` (``Unreachable``) when the source fails
    as a whole; the writer is then aborted. Per-kind failures are recorded in the result instead."""
    progress = progress if progress is not None else Progress()
    anonymizer = (
        Anonymizer(options.salt, kept_names=[options.config_namespace]) if options.anonymize else None
    )
    result = SnapshotResult()
    started = time.monotonic()
    try:
        source.check()
        for kind in options.kinds:
            _dump_kind(source, writer, kinds, kind, options, anonymizer, result, progress)
        _dump_config_maps(source, writer, kinds, options, anonymizer, result, progress)
        result.seconds = time.monotonic() - started
        writer.finish(_index(source, options, result))
    except BaseException:
        writer.abort()
        raise
    return result


def _dump_kind(
    source: SnapshotSource,
    writer: SnapshotWriter,
    kinds: Mapping[str, KindInfo],
    kind: str,
    options: SnapshotOptions,
    anonymizer: Anonymizer | None,
    result: SnapshotResult,
    progress: Progress,
) -> None:
    info = kinds.get(kind)
    if info is None:
        dist = KIND_DISTRIBUTIONS.get(kind)
        result.skipped[kind] = "kind not installed here" + (
            f" (install {dist}, which registers it through the 'koord.kinds' entry points)" if dist else ""
        )
        progress.problem(f"skip {kind}: {result.skipped[kind]}")
        return
    try:
        served = source.serves(kind)
    except KubeApiError as err:
        _failed(kind, err, result, progress)
        return
    if not served:
        result.skipped[kind] = f"the API server does not serve {info.plural}.{info.group or 'core'}"
        progress.problem(f"skip {kind}: {result.skipped[kind]}")
        return
    api_version = source.api_version(kind)
    out = writer.kind_file(info.plural)
    progress.kind_started(kind)
    try:
        for attempt in range(_RESTARTS):
            try:
                for page in source.pages(kind, options.page_size):
                    out.write(_prepare(page, api_version, kind, kinds, anonymizer, result, progress))
                    progress.page(kind, out.count)
                break
            except ExpiredError:
                if attempt == _RESTARTS - 1:
                    raise
                progress.problem(f"{kind}: the list's continue token expired; listing it again")
                out.restart()
    except BaseException as err:
        out.discard()
        if isinstance(err, ExpiredError) or (isinstance(err, KubeApiError) and err.status != 0):
            _failed(kind, err, result, progress)  # this kind only (403, an API error): the rest goes on
            return
        raise
    result.counts[kind] = out.count
    out.commit()
    progress.kind_done(kind, out.count)


def _failed(kind: str, err: Exception, result: SnapshotResult, progress: Progress) -> None:
    status = getattr(err, "status", 0)
    what = "forbidden" if status == 403 else "cannot be read"
    result.failed[kind] = f"{what}: {err}"
    progress.problem(f"skip {kind}: {what}: {err} (the snapshot will be partial)")


def _prepare(
    page: list[dict[str, Any]],
    api_version: str,
    kind: str,
    kinds: Mapping[str, KindInfo],
    anonymizer: Anonymizer | None,
    result: SnapshotResult,
    progress: Progress,
) -> list[dict[str, Any]]:
    out = []
    for obj in page:
        clean_object(obj, api_version, kind)
        meta = obj.get("metadata") or {}
        where = "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)
        if anonymizer is not None:
            anonymizer.anonymize(obj)
        try:
            out.append(validate_object(obj, f"{kind} {where}", None, "", kinds))
        except ManifestError as err:
            # The loader would refuse the whole snapshot for it: leave it out and say so.
            result.invalid.append(f"{kind} {where}: {err}")
            progress.problem(f"skip {kind} {where}: the --cluster loader would refuse it: {err}")
    return out


def _dump_config_maps(
    source: SnapshotSource,
    writer: SnapshotWriter,
    kinds: Mapping[str, KindInfo],
    options: SnapshotOptions,
    anonymizer: Anonymizer | None,
    result: SnapshotResult,
    progress: Progress,
) -> None:
    if not options.config_maps:
        return
    found = []
    ns = options.config_namespace
    for name in options.config_maps:
        try:
            obj = source.get("ConfigMap", ns, name)
        except KubeApiError as err:
            if err.status == 0:
                raise
            _failed(f"ConfigMap {ns}/{name}", err, result, progress)
            continue
        if obj is None:
            result.skipped[f"ConfigMap {ns}/{name}"] = "not found"
            progress.problem(f"skip ConfigMap {ns}/{name}: not found")
            continue
        clean_object(obj, "v1", "ConfigMap")
        if anonymizer is not None:
            anonymizer.anonymize(obj)
        found.append(validate_object(obj, f"ConfigMap {ns}/{name}", None, "", kinds))
    if found:
        writer.write_file("configmaps.yaml", found)
    result.counts["ConfigMap"] = len(found)


def _index(source: SnapshotSource, options: SnapshotOptions, result: SnapshotResult) -> dict[str, Any]:
    return {
        "koordVersion": __version__,
        "server": source.describe(),
        "takenAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": result.complete,
        "anonymized": options.anonymize,
        "configNamespace": options.config_namespace,
        "counts": {k: v for k, v in result.counts.items()},
        "skipped": result.skipped,
        "failed": result.failed,
        "invalid": result.invalid,
        "seconds": round(result.seconds, 3),
    }
