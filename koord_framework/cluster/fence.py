"""A write fence: a leader-elected component writes to the cluster only while it may.

Leader election alone does not keep two replicas from acting at once: the old leader's work (bindings
queued behind a client rate limit, evictions of a round, a controller's patches) may go on after its term
ended -- because renewing failed, or because it drained for longer than its term. ``FencedCluster`` wraps
the cluster a component writes through and refuses every write (``FencedError``, a ``ClusterError``)
unless its ``WriteFence`` is open; ``ComponentRunner`` opens the fence when the replica starts leading and
closes it the moment the term is over (renewal failed) and before it releases the Lease, so the last write
of the old leader happens before the Lease is handed over. Reads go through unchanged; the Lease itself
is written through the unwrapped cluster (the elector must keep renewing while the work drains).

A request already on the wire when the fence closes cannot be recalled; it was issued while this replica
still held the Lease by its own clock, and a standby waits ``leaseDuration`` (longer than
``renewDeadline``) on its own clock before taking over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koord_framework.cluster.port import ClusterPort, EventRecord, Handler, Obj
from koord_framework.errors import ClusterError

__all__ = ["FencedCluster", "FencedError", "WriteFence"]


class FencedError(ClusterError):
    """A write refused because this replica may not write (not leading, or its term is over)."""


class WriteFence:
    """Open while the component may write. ``holding`` (the elector's "still leading") is asked on every
    write, so a failed renewal closes the fence at once, without waiting for anyone to notice."""

    def __init__(self, name: str = "component") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._open = False
        self._why = "not started"
        self._holding: Callable[[], bool] = lambda: True
        self.refused = 0
        """Writes refused so far (read by tests and logged when the component stops)."""

    def open(self, holding: Callable[[], bool] | None = None) -> None:
        with self._lock:
            self._open = True
            self._why = ""
            self._holding = holding or (lambda: True)

    def close(self, why: str) -> None:
        with self._lock:
            if self._open:
                self._open = False
                self._why = why

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._open and self._holding()

    def check(self, what: str) -> None:
        """Raise ``FencedError`` naming ``what`` unless the fence is open."""
        with self._lock:
            ok = self._open and self._holding()
            why = self._why or "the Lease is not held"
            if not ok:
                self.refused += 1
        if not ok:
            raise FencedError(f"{self.name}: {what} refused: {why}")


class FencedCluster(ClusterPort):
    """``inner`` with every write checked against ``fence``; anything else is ``inner``'s."""

    def __init__(self, inner: ClusterPort, fence: WriteFence) -> None:
        self.inner = inner
        self.fence = fence
        self.clock = inner.clock
        self.kinds = inner.kinds

    def __getattr__(self, name: str) -> Any:
        # The adapter's extras (close, resource, flush_events, ...): only reached for names not found here.
        return getattr(self.inner, name)

    # --- reads ------------------------------------------------------------------------------------
    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        return self.inner.get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None) -> tuple[list[Obj], int]:
        return self.inner.list(kind, namespace)

    def serves(self, kind: str) -> bool:
        return self.inner.serves(kind)

    def subscribe(
        self, kinds: Iterable[str], handler: Handler, since: int | None = None
    ) -> Callable[[], None]:
        return self.inner.subscribe(kinds, handler, since)

    # --- writes -----------------------------------------------------------------------------------
    def create(self, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        self.fence.check(f"create {obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}")
        return self.inner.create(obj)

    def update(self, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        self.fence.check(f"update {obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}")
        return self.inner.update(obj)

    def patch(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> Obj:
        self.fence.check(f"patch {kind} {namespace}/{name}")
        return self.inner.patch(kind, name, namespace, patch, status)

    def create_no_result(self, obj: Obj, *, handover: bool = False) -> None:
        meta = obj.get("metadata") or {}
        self.fence.check(f"create {obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}")
        self.inner.create_no_result(obj, handover=handover)

    def patch_no_result(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> None:
        self.fence.check(f"patch {kind} {namespace}/{name}")
        self.inner.patch_no_result(kind, name, namespace, patch, status)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        self.fence.check(f"delete {kind} {namespace}/{name}")
        self.inner.delete(kind, name, namespace)

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        self.fence.check(f"bind pod {namespace}/{name} to {node}")
        self.inner.bind(namespace, name, node, uid)

    def evict(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        requested_by: str,
        dry_run: bool = False,
        uid: str | None = None,
    ) -> None:
        if not dry_run:
            self.fence.check(f"evict pod {namespace}/{name}")
        self.inner.evict(namespace, name, reason=reason, requested_by=requested_by, dry_run=dry_run, uid=uid)

    def record_event(self, event: EventRecord) -> None:
        # Events are best effort: a replica that may not write drops them instead of failing its caller.
        if self.fence.is_open:
            self.inner.record_event(event)
