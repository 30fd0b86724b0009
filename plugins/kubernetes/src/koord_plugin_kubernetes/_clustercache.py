"""Cluster objects some plugins read by listing (Services, ReplicaSets, StatefulSets, Namespaces, PDBs).

kube-scheduler reads these through informer listers; here one cache per handle lists a kind once and
follows its watch events, so a scheduling cycle never copies the objects out of the cluster again.
"""

from __future__ import annotations

from typing import Any

from koord_framework.scheduler.interface import Handle

Obj = dict[str, Any]


def cluster_cache(handle: Handle) -> ClusterCache:
    """The cache of this handle (one per profile, shared by its plugins through ``Handle.shared``)."""
    return handle.shared(ClusterCache, lambda: ClusterCache(handle))


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class ClusterCache:
    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._stores: dict[str, dict[str, dict[str, Obj]]] = {}
        self.version = 0
        """Bumped whenever any kind's store changes: what plugins derive from the objects is valid while it
        stays the same."""

    def _store(self, kind: str) -> dict[str, dict[str, Obj]]:
        store = self._stores.get(kind)
        if store is not None:
            return store
        store = {}
        self._stores[kind] = store
        self.version += 1
        try:
            cluster = self._handle.cluster
            items, rv = cluster.list(kind)
            for obj in items:
                ns, name = _key(obj)
                store.setdefault(ns, {})[name] = obj
            cluster.subscribe([kind], lambda ev: self._on_event(store, ev), since=rv)
        except Exception:
            # A kind the cluster does not serve (or no cluster behind a test handle): nothing to list.
            pass
        return store

    def _on_event(self, store: dict[str, dict[str, Obj]], event: Any) -> None:
        self.version += 1
        ns, name = _key(event.obj or {})
        if event.type == "DELETED":
            store.get(ns, {}).pop(name, None)
        else:
            store.setdefault(ns, {})[name] = event.obj

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        store = self._store(kind)
        if namespace is not None:
            return list(store.get(namespace, {}).values())
        return [o for objs in store.values() for o in objs.values()]

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        return self._store(kind).get(namespace, {}).get(name)
