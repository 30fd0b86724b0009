"""An informer-like shared cache above the cluster port, and typed caches of slim pod and node records.

Scheduler, descheduler, koordlet and manager each need "the current objects of kind K, and a call when one
changes". ``SharedInformer`` lists a kind once, then follows its watch from the listed resourceVersion, so
nothing is missed between the two; several components share one informer and so one copy of every object.

Objects held and passed to handlers are the very dicts the cluster's watch delivered: no copy per
component. They are read-only by contract, as client-go's shared informer objects are.

Handlers run in the order events arrive, one event at a time (a dispatch lock serialises them), but
*without* the store lock held: a handler may read the informer, take its own locks, or write to the
cluster. Register handlers at start-up: ``add_handler`` waits for the dispatch in progress, so calling it
while holding a lock that a handler also takes can deadlock.

``PodCache`` and ``NodeCache`` turn objects into ``PodInfo`` / ``NodeRecord`` once per object version
(an event that repeats a known resourceVersion reuses the record) and index pods by node name. A binding
does not parse the pod again: the new record is the previous one with the node name, resource version and
condition times replaced (``rebound``). Memory is what makes 150,000 pods fit: one record per pod,
dictionaries of references for the indexes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from koord_framework.api.objects import NodeRecord, PodInfo, condition_times, copy_pod_info
from koord_framework.cluster.kinds import unknown_kind
from koord_framework.cluster.memory import ResourceExpiredError
from koord_framework.cluster.port import ClusterPort, Obj, WatchEvent

__all__ = [
    "NodeCache",
    "PodCache",
    "SharedInformer",
]

log = logging.getLogger(__name__)

OnAdd = Callable[[Obj], None]
OnUpdate = Callable[[Obj, Obj], None]
OnDelete = Callable[[Obj], None]
Key = tuple[str, str]
_RELIST_ATTEMPTS = 3


def _key(obj: Obj) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _no_watch() -> None:
    return None


@dataclass(frozen=True, eq=False)
class _Handlers:
    """The callbacks one ``add_handler`` registered for a kind."""

    on_add: OnAdd | None
    on_update: OnUpdate | None
    on_delete: OnDelete | None


class SharedInformer:
    """Lists and watches kinds on demand; keeps the latest object of each."""

    def __init__(self, cluster: ClusterPort) -> None:
        self.cluster = cluster
        self._store_lock = threading.Lock()
        self._dispatch_lock = threading.RLock()
        self._objects: dict[str, dict[Key, Obj]] = {}
        self._handlers: dict[str, list[_Handlers]] = {}
        self._unsubscribe: dict[str, Callable[[], None]] = {}
        self._synced_rv: dict[str, int] = {}
        self._stopped = False
        self._namespaced: dict[str, bool] = {}
        """Kind → whether it is namespaced, for the kinds followed (read on every ``get``)."""

    # --- lifecycle ---------------------------------------------------------------------------------
    def ensure(self, kind: str) -> None:
        """Start following ``kind`` (list, then watch from the listed version) unless already done."""
        if kind in self._unsubscribe:  # followed already: every read passes here, so no lock
            return
        kinds = self.cluster.kinds
        info = kinds.get(kind)
        if info is None:
            raise ValueError(unknown_kind(kind, kinds))
        self._namespaced[kind] = info.namespaced
        # The list runs outside the dispatch lock: the lists of several kinds (Pod and Node at start-up)
        # can be in flight at once, and events of kinds already followed keep flowing meanwhile. Nothing of
        # this kind is dispatched before its watch exists, so storing the list and subscribing under the
        # dispatch lock is still atomic for this kind's handlers. Two threads ensuring one kind at once
        # both list it and the second result is dropped: no lock is held while listing, so a handler that
        # reads a kind not followed yet cannot deadlock with a thread listing it.
        list_shared = getattr(self.cluster, "list_shared", None)  # the embedded cluster's stored dicts
        # A real cluster's first list comes from the API server's watch cache, as a reflector's does; one
        # listed again because the watch could not start from it is a consistent read.
        list_to_watch = getattr(self.cluster, "list_to_watch", None)
        for attempt in range(_RELIST_ATTEMPTS):
            if list_shared is not None:
                objs, rv = list_shared(kind)
            elif list_to_watch is not None and attempt == 0:
                objs, rv = list_to_watch(kind)
            else:
                objs, rv = self.cluster.list(kind)
            with self._dispatch_lock:
                if kind in self._unsubscribe:
                    return  # another thread's list came first
                with self._store_lock:
                    self._objects[kind] = {_key(o): o for o in objs}
                    self._synced_rv[kind] = rv
                if self._stopped:  # stopped while the list was in flight: readable, not followed
                    self._unsubscribe[kind] = _no_watch
                    return
                try:
                    self._unsubscribe[kind] = self.cluster.subscribe([kind], self._on_event, since=rv)
                    return
                except ResourceExpiredError:
                    # So many writes came between list and watch that the event log dropped some: list
                    # again, as a reflector does on "410 Gone".
                    if attempt == _RELIST_ATTEMPTS - 1:
                        raise

    def ensure_all(self, kinds: Iterable[str]) -> None:
        """``ensure`` several kinds, their lists in flight at once (a thread per kind but the first);
        returns when all are followed, raising the first failure."""
        kinds = [k for k in dict.fromkeys(kinds) if k not in self._unsubscribe]
        if len(kinds) < 2:
            for kind in kinds:
                self.ensure(kind)
            return
        errors: dict[str, BaseException] = {}

        def follow(kind: str) -> None:
            try:
                self.ensure(kind)
            except BaseException as err:  # handed to the caller below
                errors[kind] = err

        threads = [
            threading.Thread(target=follow, args=(kind,), name=f"informer-list-{kind}", daemon=True)
            for kind in kinds[1:]
        ]
        for thread in threads:
            thread.start()
        follow(kinds[0])
        for thread in threads:
            thread.join()
        for kind in kinds:
            if kind in errors:
                raise errors[kind]

    def stop(self) -> None:
        """Stop every watch; the cached objects stay readable."""
        with self._dispatch_lock:
            self._stopped = True
            for unsubscribe in self._unsubscribe.values():
                unsubscribe()
            self._unsubscribe.clear()

    def has_synced(self, kind: str) -> bool:
        return kind in self._synced_rv

    # --- reads -------------------------------------------------------------------------------------
    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        """The cached object (read-only), or None. Namespaced kinds default to namespace ``default``."""
        self.ensure(kind)
        if self._namespaced[kind]:
            namespace = namespace or "default"
        with self._store_lock:
            return self._objects.get(kind, {}).get((namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        """The cached objects of a kind (read-only), optionally of one namespace."""
        self.ensure(kind)
        with self._store_lock:
            objs = self._objects.get(kind, {})
            if namespace is None:
                return list(objs.values())
            return [o for (ns, _), o in objs.items() if ns == namespace]

    # --- handlers ----------------------------------------------------------------------------------
    def add_handler(
        self,
        kind: str,
        on_add: OnAdd | None = None,
        on_update: OnUpdate | None = None,
        on_delete: OnDelete | None = None,
    ) -> Callable[[], None]:
        """Call back on changes of ``kind``; returns the function that removes the handler.

        The objects already cached are first delivered to ``on_add``, so a late handler sees the same
        history as an early one.
        """
        self.ensure(kind)
        handlers = _Handlers(on_add, on_update, on_delete)
        with self._dispatch_lock:
            self._handlers.setdefault(kind, []).append(handlers)
            if on_add is not None:
                with self._store_lock:
                    existing = list(self._objects.get(kind, {}).values())
                for obj in existing:
                    on_add(obj)

        def remove() -> None:
            with self._dispatch_lock:
                registered = self._handlers.get(kind, [])
                if handlers in registered:
                    registered.remove(handlers)

        return remove

    def _on_event(self, event: WatchEvent) -> None:
        key = _key(event.obj)
        with self._dispatch_lock:
            with self._store_lock:
                objs = self._objects.setdefault(event.kind, {})
                previous = objs.get(key)
                if event.type == "DELETED":
                    objs.pop(key, None)
                else:
                    objs[key] = event.obj
                self._synced_rv[event.kind] = max(self._synced_rv.get(event.kind, 0), event.resource_version)
            for h in list(self._handlers.get(event.kind, ())):
                if event.type == "DELETED":
                    if h.on_delete is not None:
                        h.on_delete(previous if previous is not None else event.obj)
                elif previous is None:
                    if h.on_add is not None:
                        h.on_add(event.obj)
                elif h.on_update is not None:
                    h.on_update(previous, event.obj)


R = TypeVar("R", PodInfo, NodeRecord)

_BIND_META = frozenset({"resourceVersion", "generation", "annotations"})
_BIND_SPEC = frozenset({"nodeName"})
_BIND_STATUS = frozenset({"conditions"})
_TOP = frozenset({"metadata", "spec", "status"})


def _resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


_ABSENT = object()


def _same_except(a: Any, b: Any, skip: frozenset[str]) -> bool:
    """Whether two JSON objects are equal apart from the keys in ``skip`` (shared parts compare by identity
    first, so two versions of one stored object compare in time proportional to their key count)."""
    if a is b:
        return True
    a = {} if a is None else a  # an absent part (a pod without status) reads as empty, as parsing does
    b = {} if b is None else b
    if not isinstance(a, dict) or not isinstance(b, dict):
        return False
    # Plain loops instead of ``a.keys() ^ b.keys()``: no set is built, and this runs three times per bind
    # event (an allocation per call is what triggers most garbage collections of a scheduling run).
    for k in b:
        if k not in a and k not in skip:
            return False
    for k, v in a.items():
        if k not in skip:
            w = b.get(k, _ABSENT)
            if w is _ABSENT or (v is not w and v != w):
                return False
    return True


def rebound(record: PodInfo, old: Obj, new: Obj) -> PodInfo | None:
    """The record of ``new`` derived from ``record`` (built from ``old``) when the change is a binding.

    A binding (``pods/binding``) changes only ``spec.nodeName``, the PodScheduled condition and the
    system-managed ``resourceVersion``/``generation``; everything a ``PodInfo`` parses from the rest — the
    containers' resources above all — is unchanged, so instead of parsing the whole pod again the record is
    copied with the node name, the resource version and the two condition times replaced. Any other change
    returns None (parse it in full).

    A change of annotations alone (PreBind's batched patch, written right before the binding) is derived
    the same way: a record reads nothing from annotations but keeps them, so only they are replaced.
    """
    if not _same_except(old, new, _TOP):
        return None
    if not (
        _same_except(old.get("metadata"), new.get("metadata"), _BIND_META)
        and _same_except(old.get("spec"), new.get("spec"), _BIND_SPEC)
        and _same_except(old.get("status"), new.get("status"), _BIND_STATUS)
    ):
        return None
    spec = new.get("spec") or {}
    status = new.get("status") or {}
    scheduled, initialized = condition_times(status)
    copy = copy_pod_info(record)
    copy.node_name = str(spec.get("nodeName") or "")
    copy.resource_version = _resource_version(new)
    copy.scheduled_time = scheduled
    copy.initialized_time = initialized
    annotations = (new.get("metadata") or {}).get("annotations")
    if annotations is not (old.get("metadata") or {}).get("annotations"):
        copy.annotations = dict(annotations or {})
    return copy


class _RecordListeners(Generic[R]):
    """Typed callbacks of a record cache, run after its indexes are updated."""

    def __init__(self) -> None:
        self.adds: list[Callable[[R], None]] = []
        self.updates: list[Callable[[R, R], None]] = []
        self.deletes: list[Callable[[R], None]] = []

    def add(
        self,
        on_add: Callable[[R], None] | None,
        on_update: Callable[[R, R], None] | None,
        on_delete: Callable[[R], None] | None,
    ) -> None:
        if on_add is not None:
            self.adds.append(on_add)
        if on_update is not None:
            self.updates.append(on_update)
        if on_delete is not None:
            self.deletes.append(on_delete)


def _build(builder: Callable[[Obj], R], obj: Obj, kind: str) -> R | None:
    try:
        return builder(obj)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        meta = obj.get("metadata") or {}
        log.warning(
            "%s %s/%s is left out of the cache: %s", kind, meta.get("namespace", ""), meta.get("name"), err
        )
        return None


class PodCache:
    """``PodInfo`` of every pod, by ``namespace/name`` and by node name ("" for unassigned pods)."""

    def __init__(self, informer: SharedInformer) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[Key, PodInfo] = {}
        self._by_node: dict[str, dict[Key, PodInfo]] = {}
        self._listeners: _RecordListeners[PodInfo] = _RecordListeners()
        informer.add_handler("Pod", self._on_add, self._on_update, self._on_delete)

    def get(self, namespace: str, name: str) -> PodInfo | None:
        with self._lock:
            return self._by_key.get((namespace or "default", name))

    def record_of(self, obj: Mapping[str, Any]) -> PodInfo | None:
        """The record of this very pod manifest (same resourceVersion), or None: a handler registered on
        the informer after this cache (every plugin's) reads it instead of parsing the pod again."""
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if not rv:
            return None
        with self._lock:
            info = self._by_key.get((str(meta.get("namespace") or "default"), str(meta.get("name") or "")))
        return info if info is not None and info.resource_version == str(rv) else None

    def on_node(self, node: str) -> list[PodInfo]:
        """Pods assigned to ``node`` (terminal ones included; callers filter what they must)."""
        with self._lock:
            return list(self._by_node.get(node, {}).values())

    def unassigned(self) -> list[PodInfo]:
        """Pods without ``spec.nodeName``."""
        return self.on_node("")

    def all(self) -> list[PodInfo]:
        with self._lock:
            return list(self._by_key.values())

    def node_names(self) -> list[str]:
        """Nodes that have at least one pod assigned."""
        with self._lock:
            return [n for n, pods in self._by_node.items() if n and pods]

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_key)

    def add_listener(
        self,
        on_add: Callable[[PodInfo], None] | None = None,
        on_update: Callable[[PodInfo, PodInfo], None] | None = None,
        on_delete: Callable[[PodInfo], None] | None = None,
    ) -> None:
        """Typed callbacks, run after the cache's indexes reflect the change. Existing pods are not
        replayed: read ``all()`` after adding the listener."""
        self._listeners.add(on_add, on_update, on_delete)

    def _put(self, info: PodInfo) -> PodInfo | None:
        key = (info.namespace, info.name)
        old = self._by_key.get(key)
        if old is not None:
            self._by_node.get(old.node_name, {}).pop(key, None)
        self._by_key[key] = info
        self._by_node.setdefault(info.node_name, {})[key] = info
        return old

    def _remove(self, key: Key) -> PodInfo | None:
        old = self._by_key.pop(key, None)
        if old is not None:
            on_node = self._by_node.get(old.node_name)
            if on_node is not None:
                on_node.pop(key, None)
                if not on_node:
                    del self._by_node[old.node_name]
        return old

    def _on_add(self, obj: Obj) -> None:
        self._store(obj)

    def _on_update(self, old_obj: Obj, obj: Obj) -> None:
        ns, name = _key(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self._lock:
            current = self._by_key.get((ns or "default", name))
        if current is not None and rv and current.resource_version == rv:
            return  # this version's record is already built
        if current is not None and current.resource_version == _resource_version(old_obj):
            info = rebound(current, old_obj, obj)
            if info is not None:
                self._publish(info)
                return
        if not self._store(obj):
            self._on_delete(old_obj)

    def _store(self, obj: Obj) -> bool:
        info = _build(PodInfo.from_manifest, obj, "Pod")
        if info is None:
            return False
        self._publish(info)
        return True

    def _publish(self, info: PodInfo) -> None:
        with self._lock:
            old = self._put(info)
        if old is None:
            for add in self._listeners.adds:
                add(info)
        else:
            for update in self._listeners.updates:
                update(old, info)

    def _on_delete(self, obj: Obj) -> None:
        ns, name = _key(obj)
        with self._lock:
            old = self._remove((ns or "default", name))
        if old is not None:
            for delete in self._listeners.deletes:
                delete(old)


class NodeCache:
    """``NodeRecord`` of every node, by name."""

    def __init__(self, informer: SharedInformer) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, NodeRecord] = {}
        self._listeners: _RecordListeners[NodeRecord] = _RecordListeners()
        informer.add_handler("Node", self._on_add, self._on_update, self._on_delete)

    def get(self, name: str) -> NodeRecord | None:
        with self._lock:
            return self._by_name.get(name)

    def record_of(self, obj: Mapping[str, Any]) -> NodeRecord | None:
        """The record of this very node manifest (same resourceVersion), or None (see ``PodCache``)."""
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if not rv:
            return None
        with self._lock:
            record = self._by_name.get(str(meta.get("name") or ""))
        return record if record is not None and record.resource_version == str(rv) else None

    def all(self) -> list[NodeRecord]:
        with self._lock:
            return list(self._by_name.values())

    def names(self) -> list[str]:
        with self._lock:
            return list(self._by_name)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_name)

    def add_listener(
        self,
        on_add: Callable[[NodeRecord], None] | None = None,
        on_update: Callable[[NodeRecord, NodeRecord], None] | None = None,
        on_delete: Callable[[NodeRecord], None] | None = None,
    ) -> None:
        """Typed callbacks, run after the cache reflects the change (existing nodes are not replayed)."""
        self._listeners.add(on_add, on_update, on_delete)

    def _on_add(self, obj: Obj) -> None:
        self._store(obj)

    def _on_update(self, old_obj: Obj, obj: Obj) -> None:
        name = _key(obj)[1]
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self._lock:
            current = self._by_name.get(name)
        if current is not None and rv and current.resource_version == rv:
            return
        if not self._store(obj):
            self._on_delete(old_obj)

    def _store(self, obj: Obj) -> bool:
        record = _build(NodeRecord.from_manifest, obj, "Node")
        if record is None:
            return False
        with self._lock:
            old = self._by_name.get(record.name)
            self._by_name[record.name] = record
        if old is None:
            for add in self._listeners.adds:
                add(record)
        else:
            for update in self._listeners.updates:
                update(old, record)
        return True

    def _on_delete(self, obj: Obj) -> None:
        with self._lock:
            old = self._by_name.pop(_key(obj)[1], None)
        if old is not None:
            for delete in self._listeners.deletes:
                delete(old)
