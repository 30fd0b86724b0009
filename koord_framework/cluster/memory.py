"""``MemoryCluster``: the embedded cluster, the default backend of every command and test.

It keeps Kubernetes-shaped dicts and behaves like an API server where the platform can tell the difference:
a global resourceVersion, watch events in resourceVersion order with replay from a listed version,
optimistic concurrency, JSON merge patches and status subresources, ``pods/binding`` that never binds a pod
twice, and ``pods/eviction`` that respects PodDisruptionBudgets. Time comes from a ``Clock`` (a
``VirtualClock`` unless told otherwise) so that simulations are reproducible.

Where it deliberately differs from a real cluster (each because nothing runs beside it: no kubelet, no
controllers):

* ``create`` keeps the ``status`` it is given (the API server resets it), so manifests of running pods,
  nodes with capacity and NodeMetrics with usage can be loaded as they are;
* ``delete`` removes an object at once (no graceful deletion, no finalizers, no garbage collection);
* PodDisruptionBudget status is computed afresh at each eviction (see ``koord_framework.cluster.disruption``).

Storage and sharing: the stored object of each version is never modified after it is stored (every write
stores a new dict), so watch events carry the stored dicts themselves, without a copy; handlers must treat
``event.obj`` and ``event.old`` as read-only. For the same reason consecutive versions may share the parts a
write leaves alone (a binding copies only ``spec``, ``status`` and ``metadata``). ``get``/``list``/
``create``/... return copies the caller owns.

Watch delivery is synchronous: the thread that writes delivers the resulting events to the handlers before
its write call returns, outside the cluster lock (so that a handler may call back into the cluster and
take its own locks without deadlocking against other threads). When several threads write at once, one
of them delivers for all, still in resourceVersion order; handler exceptions are re-raised to the thread
that delivered them after every handler has seen the event.

The event log that serves replays (``subscribe(..., since=rv)``) keeps the last ``event_log_size`` events
(10,000 by default, about the writes of a few scheduling cycles of a large cluster: a watcher that lists and
then subscribes needs only the events in between). Asking to replay from a version that has left the log
raises ``ResourceExpiredError``, the API server's "410 Gone", after which the caller lists again.
"""

from __future__ import annotations

import builtins
import random
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koord_framework.cluster.clock import Clock, VirtualClock, format_time
from koord_framework.cluster.disruption import DisruptionStatus, disruption_status, eviction_refusal
from koord_framework.cluster.events import EventRecorder, MemoryEventWriter
from koord_framework.cluster.kinds import KIND_DISTRIBUTIONS, KINDS, KindInfo, KindRegistry, unknown_kind
from koord_framework.cluster.merge_patch import copy_json, copy_object, merge_patch_shared
from koord_framework.cluster.port import (
    ClusterPort,
    EventRecord,
    EventType,
    EvictionRecord,
    Handler,
    Obj,
    WatchEvent,
    uid_precondition_failed,
)
from koord_framework.errors import (
    ClusterError,
    ConflictError,
    ExpiredError,
    ManifestError,
    NotFoundError,
    TooManyRequestsError,
)

DEFAULT_EVENT_LOG_SIZE = 10_000

EVICTION_EVENT_REASON = "Evicted"
"""``reason`` of the Event recorded for every eviction (the eviction's own reason goes in its message)."""

# Kinds whose ``status`` is a subresource: a plain update or patch leaves their status alone, and only
# ``patch(..., status=True)`` changes it, as on a real API server.
STATUS_SUBRESOURCE_KINDS = frozenset(
    {
        "Pod",
        "Node",
        "Namespace",
        "Service",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "DaemonSet",
        "Job",
        "NodeMetric",
        "NodeSLO",
        "ElasticQuota",
        "PodGroup",
        "Device",
        "Reservation",
        "PodMigrationJob",
        "ClusterColocationProfile",
    }
)

# Workload kinds whose ``spec.replicas`` is the expected pod count a PodDisruptionBudget percentage uses.


def has_status_subresource(info: KindInfo) -> bool:
    """Whether the kind's ``status`` is a subresource: as listed above for the built-in kinds, as its CRD
    declares for a contributed one."""
    if info.kind in KINDS or info.kind in KIND_DISTRIBUTIONS:
        # Koordinator's kinds keep the memory cluster's long-standing behaviour whoever contributes them.
        return info.kind in STATUS_SUBRESOURCE_KINDS
    return info.status_subresource


_SCALED_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet"})

# Kubernetes' generateName alphabet (no vowels, no confusable digits).
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


ResourceExpiredError = ExpiredError
"""The embedded cluster's name for the shared ``ExpiredError`` (kept for readers of older code)."""


@dataclass(eq=False)
class _Subscription:
    """One subscriber of the embedded cluster: the kinds it follows and where it started."""

    kinds: frozenset[str]
    handler: Handler
    start_rv: int
    """Live events at or below this version were written before the subscription: not delivered."""
    active: bool = True


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _without_status_and_meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


EVENT_RECORD_LIMIT = 20_000
"""Event records the embedded cluster keeps (a scheduler records one per bound pod)."""


class _RecentLog(list[EventRecord]):
    """A list that forgets its older half when it grows past ``limit`` (amortised O(1) appends)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def append(self, item: EventRecord) -> None:
        super().append(item)
        if len(self) > self.limit:
            del self[: len(self) - self.limit // 2]


class MemoryCluster(ClusterPort):
    """The embedded cluster. Thread-safe: one re-entrant lock guards the store."""

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        seed: int | None = None,
        event_log_size: int = DEFAULT_EVENT_LOG_SIZE,
        kinds: KindRegistry | None = None,
    ) -> None:
        if event_log_size < 1:
            raise ValueError("event_log_size must be at least 1")
        self.clock: Clock = clock if clock is not None else VirtualClock()
        self.kinds: KindRegistry = kinds if kinds is not None else KindRegistry.discover()
        """The kinds this cluster serves: the built-in ones and those installed distributions contribute."""
        self._kind_infos: dict[str, KindInfo] = {}
        """The kinds looked up so far (every operation looks its kind up: a plain dict is cheapest)."""
        self._rng = random.Random(seed) if seed is not None else None
        self._lock = threading.RLock()
        self._store: dict[str, dict[str, dict[str, Obj]]] = {}
        self._rv = 0
        self._log: deque[WatchEvent] = deque()
        self._log_size = event_log_size
        self._log_floor = 0
        self._subs: list[_Subscription] = []
        self._pending: deque[tuple[WatchEvent, _Subscription | None]] = deque()
        self._delivering = False
        self.evictions: list[EvictionRecord] = []
        self.events: list[EventRecord] = _RecentLog(EVENT_RECORD_LIMIT)
        """The latest events components asked to record, in order (before correlation)."""
        self.event_store = MemoryEventWriter()
        """The Events as an API server would hold them: correlated, deduplicated, spam-filtered."""
        self.event_recorder = EventRecorder(
            self.event_store, component="koord", clock=self.clock, kinds=self.kinds
        )
        self.bind_count = 0
        self.write_count = 0
        self._stamp_second: int | None = None
        self._stamp_text = ""

    # --- construction from manifests ----------------------------------------------------------------
    @classmethod
    def from_paths(
        cls, paths: Sequence[str | Path], clock: Clock | None = None, *, seed: int | None = None
    ) -> MemoryCluster:
        """A cluster holding the objects of the manifest files and folders ``paths``."""
        cluster = cls(clock, seed=seed)
        cluster.load(paths)
        return cluster

    def load(self, paths: Sequence[str | Path]) -> int:
        """Validate every document of ``paths``, then create them all; returns how many were created.

        Nothing is created unless everything is valid: a malformed document, a duplicate across files or an
        object the cluster already holds raises ``ManifestError`` naming file, document and field.
        """
        from koord_framework.cluster.manifests import load_documents

        docs = load_documents(paths, self.kinds)
        with self._lock:
            for doc in docs:
                info = self.kinds[doc.obj["kind"]]
                meta = _meta(doc.obj)
                namespace = self._namespace(info, meta.get("namespace"))
                if meta["name"] in self._store.get(info.kind, {}).get(namespace, {}):
                    where = f"{namespace}/{meta['name']}" if namespace else meta["name"]
                    raise ManifestError(
                        doc.file, doc.doc, doc.prefix + "metadata.name", f"{info.kind} {where} already exists"
                    )
            for doc in docs:
                self._create_locked(doc.obj)  # freshly parsed: nobody else holds these dicts
        self._deliver()
        return len(docs)

    # --- reads --------------------------------------------------------------------------------------
    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        info = self._info(kind)
        with self._lock:
            obj = self._find(info, name, namespace)
            if obj is None:
                raise NotFoundError(self._describe(info, name, namespace, "not found"))
            return copy_object(obj)

    def list(self, kind: str, namespace: str | None = None) -> tuple[list[Obj], int]:
        info = self._info(kind)
        with self._lock:
            by_ns = self._store.get(info.kind, {})
            if namespace is None or not info.namespaced:
                objs = [copy_object(o) for names in by_ns.values() for o in names.values()]
            else:
                objs = [copy_object(o) for o in by_ns.get(namespace or "default", {}).values()]
            return objs, self._rv

    def list_shared(self, kind: str) -> tuple[builtins.list[Obj], int]:
        """Like ``list`` but without copies: the stored dicts themselves, which must not be modified.

        For caches that hold what they list read-only (``SharedInformer``): listing 150,000 pods this way
        skips 150,000 deep copies.
        """
        info = self._info(kind)
        with self._lock:
            by_ns = self._store.get(info.kind, {})
            return [o for names in by_ns.values() for o in names.values()], self._rv

    def count(self, kind: str) -> int:
        """How many objects of a kind the cluster holds (no copies made)."""
        info = self._info(kind)
        with self._lock:
            return sum(len(names) for names in self._store.get(info.kind, {}).values())

    @property
    def resource_version(self) -> int:
        """The version of the latest write (0 for a cluster never written to)."""
        with self._lock:
            return self._rv

    def subscribe(
        self, kinds: Iterable[str], handler: Handler, since: int | None = None
    ) -> Callable[[], None]:
        wanted = frozenset(self._info(k).kind for k in kinds)
        with self._lock:
            sub = _Subscription(wanted, handler, self._rv if since is None else max(self._rv, since))
            if since is not None:
                if since < self._log_floor:
                    raise ResourceExpiredError(
                        f"too old resource version: {since} (the event log starts after {self._log_floor})"
                    )
                for event in self._log:
                    if event.resource_version > since and event.kind in wanted:
                        self._pending.append((event, sub))
            self._subs.append(sub)
        self._deliver()

        def unsubscribe() -> None:
            with self._lock:
                sub.active = False
                if sub in self._subs:
                    self._subs.remove(sub)

        return unsubscribe

    # --- writes -------------------------------------------------------------------------------------
    def create(self, obj: Obj) -> Obj:
        with self._lock:
            stored = self._create_locked(copy_json(obj))
            out = copy_object(stored)
        self._deliver()
        return out

    def create_no_result(self, obj: Obj, *, handover: bool = False) -> None:
        # No copy of the stored object back: a controller creating thousands of objects reads none. A
        # handed-over object is stored as it is: stored versions are never modified, so sharing read-only
        # parts with the caller is safe; only the two dicts the store writes into are the caller's own.
        if handover and isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            stored = {**obj, "metadata": dict(obj["metadata"])}
        else:
            stored = copy_json(obj)
        with self._lock:
            self._create_locked(stored)
        self._deliver()

    def update(self, obj: Obj) -> Obj:
        """Replace an object. ``ConflictError`` when ``metadata.resourceVersion`` is set and stale.

        For kinds with a status subresource (``STATUS_SUBRESOURCE_KINDS``) the stored status is kept, as a
        real API server does: change status with ``patch(..., status=True)``.
        """
        if not isinstance(obj, Mapping):
            raise TypeError(f"expected an object (dict), got {type(obj).__name__}")
        info = self._info(str(obj.get("kind") or ""))
        new = copy_json(dict(obj))
        meta = _meta(new)
        name = str(meta.get("name") or "")
        with self._lock:
            current = self._find(info, name, meta.get("namespace"))
            if current is None:
                raise NotFoundError(self._describe(info, name, meta.get("namespace"), "not found"))
            self._check_preconditions(info, current, meta)
            cur_meta = _meta(current)
            new.setdefault("apiVersion", current.get("apiVersion", info.api_version))
            new["metadata"] = meta = dict(meta)
            for key in ("uid", "creationTimestamp", "namespace"):
                if key in cur_meta:
                    meta[key] = cur_meta[key]
            if has_status_subresource(info):
                new.pop("status", None)
                if "status" in current:
                    new["status"] = copy_json(current["status"])
            stored = self._replace_locked(info, current, new)
            out = copy_object(stored)
        self._deliver()
        return out

    def patch(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> Obj:
        with self._lock:
            stored = self._patch_locked(kind, name, namespace, patch, status)
            out = copy_object(stored)
        self._deliver()
        return out

    def patch_no_result(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> None:
        # No copy of the stored object back: the copy of a NodeMetric (its pods' usage) or a node cost
        # more than the patch itself.
        with self._lock:
            self._patch_locked(kind, name, namespace, patch, status)
        self._deliver()

    def _patch_locked(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool
    ) -> Obj:
        info = self._info(kind)
        if not isinstance(patch, Mapping):
            raise ClusterError(
                f"a merge patch of {info.plural} must be an object, got {type(patch).__name__}"
            )
        if status and not has_status_subresource(info):
            raise NotFoundError(f"{info.plural} have no status subresource")
        current = self._find(info, name, namespace)
        if current is None:
            raise NotFoundError(self._describe(info, name, namespace, "not found"))
        patch_meta = patch.get("metadata")
        if isinstance(patch_meta, Mapping):
            self._check_preconditions(info, current, patch_meta)
        if status:
            new = dict(current)
            if "status" in patch:
                new["status"] = merge_patch_shared(current.get("status"), patch["status"])
                if new["status"] is None:
                    del new["status"]
            new["metadata"] = dict(_meta(current))
        else:
            # Stored versions are never modified (see ``bind``): the new version shares what the patch
            # leaves alone.
            new = merge_patch_shared(current, patch)
            if not isinstance(new.get("metadata"), dict):
                raise ClusterError(self._describe(info, name, namespace, "metadata: Required value"))
            cur_meta, new_meta = _meta(current), new["metadata"]
            for key in ("name", "namespace", "uid", "creationTimestamp"):
                if new_meta.get(key) != cur_meta.get(key):
                    raise ClusterError(
                        self._describe(info, name, namespace, f"metadata.{key}: field is immutable")
                    )
            if new.get("kind") != current.get("kind"):
                raise ClusterError(self._describe(info, name, namespace, "kind: field is immutable"))
            if has_status_subresource(info):
                new.pop("status", None)
                if "status" in current:
                    new["status"] = current["status"]
        return self._replace_locked(info, current, new)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        info = self._info(kind)
        with self._lock:
            current = self._find(info, name, namespace)
            if current is None:
                raise NotFoundError(self._describe(info, name, namespace, "not found"))
            self._delete_locked(info, current)
        self._deliver()

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        info = KINDS["Pod"]
        if not node:
            raise ClusterError(f"binding pod {namespace}/{name}: target node name is empty")
        with self._lock:
            pod = self._find(info, name, namespace)
            if pod is None:
                raise NotFoundError(self._describe(info, name, namespace, "not found"))
            meta = _meta(pod)
            if uid is not None and meta.get("uid") != uid:
                raise ConflictError(
                    f"pod {namespace}/{name}: uid {uid} does not match the pod's uid {meta.get('uid')}"
                )
            spec = pod.get("spec") or {}
            if spec.get("nodeName"):
                raise ConflictError(
                    f"pod {namespace}/{name} is already assigned to node {spec['nodeName']!r}"
                )
            if meta.get("deletionTimestamp"):
                raise ConflictError(f"pod {namespace}/{name} is being deleted, cannot be assigned to a host")
            # Stored versions are never modified, so the new version shares every part the binding leaves
            # alone (containers, labels, ...) and copies only the dicts it changes: a deep copy of the pod
            # used to be most of a binding's cost.
            new = dict(pod)
            new["spec"] = {**spec, "nodeName": node}
            new["status"] = dict(pod.get("status") or {})
            self._set_pod_scheduled(new)
            self._replace_locked(info, pod, new)
            self.bind_count += 1
        self._deliver()

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
        if not reason or not reason.strip():
            raise ValueError("an eviction needs a reason")
        info = KINDS["Pod"]
        with self._lock:
            pod = self._find(info, name, namespace)
            if pod is None:
                raise NotFoundError(self._describe(info, name, namespace, "not found"))
            ns = _meta(pod).get("namespace") or "default"
            if uid and _meta(pod).get("uid") != uid:
                raise uid_precondition_failed(ns, name, uid, _meta(pod).get("uid"))
            pdbs = list(self._store.get("PodDisruptionBudget", {}).get(ns, {}).values())
            if pdbs:
                ns_pods = list(self._store.get("Pod", {}).get(ns, {}).values())
                refusal = eviction_refusal(pod, pdbs, ns_pods, self._scale_of)
                if refusal is not None:
                    if refusal.code == 429:
                        raise TooManyRequestsError(f"evicting pod {ns}/{name}: {refusal.message}")
                    raise ClusterError(f"evicting pod {ns}/{name}: {refusal.message}")
            now = self.clock.now()
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            record = EvictionRecord(
                namespace=ns,
                name=name,
                uid=str(_meta(pod).get("uid") or ""),
                node=node,
                reason=reason,
                requested_by=requested_by,
                time=now,
                dry_run=dry_run,
            )
            if not dry_run:
                self._delete_locked(info, pod)
                self.record_event(
                    EventRecord(
                        kind="Pod",
                        namespace=ns,
                        name=name,
                        reason=EVICTION_EVENT_REASON,
                        message=f"evicted from node {node or '<none>'} by {requested_by}: {reason}",
                        component=requested_by,
                        time=now,
                        extra={"node": node, "evictionReason": reason, "uid": record.uid},
                        action="Evicting",
                    )
                )
            self.evictions.append(record)
        self._deliver()

    def record_event(self, event: EventRecord) -> None:
        with self._lock:
            self.events.append(event)
            self.event_recorder.record(event)

    # --- PodDisruptionBudget status, for tests and the simulator ------------------------------------
    def disruption_status(self, namespace: str, name: str) -> DisruptionStatus:
        """The status the disruption controller would report for a PodDisruptionBudget right now."""
        info = KINDS["PodDisruptionBudget"]
        with self._lock:
            pdb = self._find(info, name, namespace)
            if pdb is None:
                raise NotFoundError(self._describe(info, name, namespace, "not found"))
            pods = list(self._store.get("Pod", {}).get(namespace or "default", {}).values())
            return disruption_status(pdb, pods, self._scale_of)

    # --- internals (callers hold the lock) ----------------------------------------------------------
    def _info(self, kind: str) -> KindInfo:
        info = self._kind_infos.get(kind)
        if info is None:
            info = self.kinds.get(kind)
            if info is None:
                raise NotFoundError(unknown_kind(kind, self.kinds))
            self._kind_infos[kind] = info
        return info

    @staticmethod
    def _namespace(info: KindInfo, namespace: Any) -> str:
        if not info.namespaced:
            return ""
        return str(namespace or "default")

    @staticmethod
    def _describe(info: KindInfo, name: str, namespace: Any, what: str) -> str:
        where = f"{namespace or 'default'}/{name}" if info.namespaced else name
        return f'{info.plural} "{where}" {what}'

    def _find(self, info: KindInfo, name: str, namespace: Any) -> Obj | None:
        return self._store.get(info.kind, {}).get(self._namespace(info, namespace), {}).get(name)

    def _timestamp(self) -> str:
        """The clock's time as Kubernetes writes it; formatted once per second of clock time, since a load
        of thousands of objects happens within one virtual second."""
        second = int(self.clock.now())
        if second != self._stamp_second:
            self._stamp_second, self._stamp_text = second, format_time(second)
        return self._stamp_text

    def _new_uid(self) -> str:
        if self._rng is None:
            return str(uuid.uuid4())
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _generated_name(self, prefix: str) -> str:
        pick = self._rng.choice if self._rng is not None else random.choice
        return prefix + "".join(pick(_NAME_ALPHABET) for _ in range(5))

    def _check_preconditions(self, info: KindInfo, current: Obj, meta: Mapping[str, Any]) -> None:
        cur_meta = _meta(current)
        rv = meta.get("resourceVersion")
        if rv not in (None, "") and str(rv) != cur_meta.get("resourceVersion"):
            raise ConflictError(
                self._describe(
                    info,
                    cur_meta.get("name", ""),
                    cur_meta.get("namespace"),
                    "has been modified; please apply your changes to the latest version and try again",
                )
            )
        uid = meta.get("uid")
        if uid not in (None, "") and uid != cur_meta.get("uid"):
            raise ConflictError(
                self._describe(
                    info,
                    cur_meta.get("name", ""),
                    cur_meta.get("namespace"),
                    f"precondition failed: uid {uid}",
                )
            )

    def _create_locked(self, obj: Obj) -> Obj:
        """Store ``obj`` (already a private copy) as a new object; returns the stored dict."""
        if not isinstance(obj, dict):
            raise TypeError(f"expected an object (dict), got {type(obj).__name__}")
        info = self._info(str(obj.get("kind") or ""))
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["name"] = self._generated_name(str(meta["generateName"]))
        if not isinstance(name, str) or not name:
            raise ClusterError(f"{info.plural}: metadata.name: Required value")
        namespace = self._namespace(info, meta.get("namespace"))
        if info.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        by_name = self._store.setdefault(info.kind, {}).setdefault(namespace, {})
        if name in by_name:
            raise ConflictError(self._describe(info, name, namespace, "already exists"))
        obj.setdefault("apiVersion", info.api_version)
        if not meta.get("uid"):
            meta["uid"] = self._new_uid()
        if not meta.get("creationTimestamp"):
            meta["creationTimestamp"] = self._timestamp()
        meta.setdefault("generation", 1)
        self._commit("ADDED", info.kind, obj, None)
        by_name[name] = obj
        return obj

    def _replace_locked(self, info: KindInfo, current: Obj, new: Obj) -> Obj:
        """Store ``new`` in place of ``current``; a write that changes nothing is skipped, as upstream."""
        cur_meta = _meta(current)
        new_meta = new["metadata"] = dict(new["metadata"])
        # Both are system-managed: a writer cannot set them, so they never make a write differ.
        new_meta["resourceVersion"] = cur_meta.get("resourceVersion")
        new_meta["generation"] = cur_meta.get("generation", 1)
        if new == current:
            return current
        if _without_status_and_meta(new) != _without_status_and_meta(current):
            new_meta["generation"] = int(cur_meta.get("generation") or 0) + 1
        self._commit("MODIFIED", info.kind, new, current)
        self._store[info.kind][self._namespace(info, new_meta.get("namespace"))][str(new_meta["name"])] = new
        return new

    def _delete_locked(self, info: KindInfo, current: Obj) -> None:
        meta = _meta(current)
        namespace = self._namespace(info, meta.get("namespace"))
        last = dict(current)
        last["metadata"] = dict(meta)
        self._commit("DELETED", info.kind, last, current)
        del self._store[info.kind][namespace][str(meta["name"])]

    def _commit(self, type_: EventType, kind: str, obj: Obj, old: Obj | None) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        event = WatchEvent(type=type_, kind=kind, obj=obj, resource_version=self._rv, old=old)
        self._log.append(event)
        if len(self._log) > self._log_size:
            self._log_floor = self._log.popleft().resource_version
        self._pending.append((event, None))
        self.write_count += 1

    def _set_pod_scheduled(self, pod: Obj) -> None:
        """Kubernetes' ``UpdatePodCondition`` with PodScheduled=True: the transition time moves only when
        the condition's status changes. Replaces ``status.conditions`` (a new list; the condition dicts it
        keeps are shared, never modified)."""
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
        now = self._timestamp()
        for i, cond in enumerate(conditions):
            if cond.get("type") == "PodScheduled":
                same = cond.get("status") == "True"
                conditions[i] = {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": cond.get("lastTransitionTime") if same else now,
                }
                break
        else:
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
            )
        status["conditions"] = conditions

    def _scale_of(self, ref: Mapping[str, Any], namespace: str) -> tuple[tuple[str, str, str], int] | None:
        """The workload a controller ``ownerReference`` points at and its replicas (the disruption
        controller's finders), or None when the cluster does not hold it."""
        kind = ref.get("kind")
        if kind not in _SCALED_KINDS:
            return None
        obj = self._store.get(str(kind), {}).get(namespace, {}).get(str(ref.get("name") or ""))
        if obj is None or (ref.get("uid") and ref.get("uid") != _meta(obj).get("uid")):
            return None
        if kind == "ReplicaSet":
            for owner in _meta(obj).get("ownerReferences") or ():
                if (
                    isinstance(owner, Mapping)
                    and owner.get("controller")
                    and owner.get("kind") == "Deployment"
                ):
                    return self._scale_of(owner, namespace)
        replicas = (obj.get("spec") or {}).get("replicas")
        scale = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
        return (str(kind), namespace, str(_meta(obj).get("name"))), scale

    # --- watch delivery ----------------------------------------------------------------------------
    def _deliver(self) -> None:
        """Deliver pending events, in order, outside the lock; one thread delivers at a time."""
        with self._lock:
            if self._delivering:
                return
            self._delivering = True
        first_error: BaseException | None = None
        try:
            while True:
                with self._lock:
                    if not self._pending:
                        self._delivering = False
                        break
                    event, target = self._pending.popleft()
                    if target is not None:
                        receivers = [target] if target.active else []
                    else:
                        receivers = [
                            s
                            for s in self._subs
                            if s.active and event.kind in s.kinds and event.resource_version > s.start_rv
                        ]
                for sub in receivers:
                    try:
                        sub.handler(event)
                    except Exception as err:
                        if first_error is None:
                            first_error = err
        except BaseException:
            with self._lock:
                self._delivering = False
            raise
        if first_error is not None:
            raise first_error

    def __repr__(self) -> str:
        with self._lock:
            counts = {k: sum(len(v) for v in by_ns.values()) for k, by_ns in self._store.items()}
        listing = ", ".join(f"{k}={n}" for k, n in sorted(counts.items()) if n)
        return f"MemoryCluster(rv={self._rv}, {listing or 'empty'})"
