"""``KubeCluster``: the cluster port on a real API server.

It behaves like ``MemoryCluster`` wherever the port promises something, so that one code path runs above
both:

* objects are the API server's JSON dicts (list items get ``apiVersion``/``kind`` filled in), never client
  model objects (docs/adr/0001);
* ``subscribe`` runs one list+watch thread per kind (``watch.KindWatcher``): resume from the last
  resourceVersion, relist on 410, reconnect with backoff. A subscriber that listed first and passes the
  list's version as ``since`` misses nothing in between, and a relist still detects deletions of objects
  it listed (the adapter remembers the keys of its latest full list of each kind for that purpose). Events
  of one subscription never reach its handler concurrently, although they come from several threads;
* ``bind`` posts ``pods/binding`` (409 when the pod is already bound or its uid changed: the scheduler
  forgets the assumed pod and re-queues it); ``evict`` posts ``pods/eviction``, so PodDisruptionBudgets are
  respected (429 → ``TooManyRequestsError``: retry later; it never falls back to deleting the pod), and
  records an ``Evicted`` Event saying who evicted and why;
* ``patch(..., status=True)`` uses the ``status`` subresource where the server has one. Some of
  Koordinator's CRDs (Device, ElasticQuota, PodGroup, NodeResourceTopology) have none, and their status is
  an ordinary field: for those the adapter patches the object's ``status`` directly, and keeps the stored
  status on plain updates and patches, as the embedded cluster does for every kind with a status;
* ``update`` without ``metadata.resourceVersion`` is last-write-wins, as in the embedded cluster (the
  adapter reads the current version first; custom resources refuse unconditional updates).

Where it differs, because a real cluster has kubelets and controllers: deletion of a bound pod is graceful
unless ``grace_period_seconds`` says otherwise, and objects' ``status`` on create is whatever the API
server keeps (it resets most of it).

Every request takes a token from a QPS/burst bucket (``ratelimit.TokenBucket``; defaults far above
kube-scheduler's 50/100) and every response body is read in full, which returns its connection to the pool.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koord_framework.cluster.clock import Clock, WallClock
from koord_framework.cluster.kinds import KindRegistry
from koord_framework.cluster.kube.events import kube_event_recorder
from koord_framework.cluster.kube.transport import (
    DEFAULT_BURST,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_QPS,
    Resource,
    Transport,
)
from koord_framework.cluster.kube.watch import DEFAULT_PAGE_SIZE, KindWatcher, Known, list_all, seed_known
from koord_framework.cluster.memory import EVICTION_EVENT_REASON, STATUS_SUBRESOURCE_KINDS
from koord_framework.cluster.port import (
    ClusterPort,
    EventRecord,
    EvictionRecord,
    Handler,
    Obj,
    WatchEvent,
    uid_precondition_failed,
)
from koord_framework.cluster.served import install_hint
from koord_framework.errors import ClusterError, ConflictError, KindNotServedError, NotFoundError

__all__ = ["KubeCluster"]

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
_UPDATE_ATTEMPTS = 5
PREFETCH_MAX_AGE = 30.0
"""Seconds a prefetched list may wait to be taken; older, it is listed again (``KubeCluster.prefetch``)."""


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _describe(resource: Resource, name: str, namespace: str | None) -> str:
    where = f"{namespace}/{name}" if resource.namespaced else name
    return f"{resource.plural} {where}"


class KubeCluster(ClusterPort):
    """The real cluster. Thread-safe; create with ``from_kubeconfig`` and ``close`` when done."""

    def __init__(
        self,
        transport: Transport,
        *,
        component: str = "koord",
        clock: Clock | None = None,
        grace_period_seconds: int | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        event_queue_size: int = 1000,
        watch_timeout: float | None = None,
        kinds: KindRegistry | None = None,
    ) -> None:
        self.transport = transport
        self.kinds: KindRegistry = kinds if kinds is not None else KindRegistry.discover()
        transport.kinds = self.kinds
        self.clock: Clock = clock if clock is not None else WallClock()
        self.component = component
        self.grace_period_seconds = grace_period_seconds
        """Grace period of pod deletions and evictions; None keeps the pod's own (a kubelet finishes them)."""
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.events = kube_event_recorder(
            transport, component=component, clock=self.clock, capacity=event_queue_size
        )
        """The recorder every component's events go through (correlated, rate-limited, in the background)."""
        self.event_recorder = self.events
        self.evictions: deque[EvictionRecord] = deque(maxlen=1000)
        """The latest evictions this process asked for (the API server keeps only their Events)."""
        self.bind_count = 0
        self._lock = threading.Lock()
        self._listed: dict[str, tuple[int, Known]] = {}
        self._prefetched: dict[str, tuple[threading.Event, dict[str, Any]]] = {}
        self._watchers: set[KindWatcher] = set()

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        request_timeout: float = 30.0,
        component: str = "koord",
        **options: Any,
    ) -> KubeCluster:
        """Connect with a kubeconfig file (None: in-cluster credentials in a pod, else the default file)."""
        transport = Transport.from_kubeconfig(
            kubeconfig,
            context=context,
            qps=qps,
            burst=burst,
            max_connections=max_connections,
            request_timeout=request_timeout,
            user_agent=component,
        )
        return cls(transport, component=component, **options)

    def close(self) -> None:
        """Stop every watch, send the queued events and release the connections."""
        with self._lock:
            watchers = list(self._watchers)
            self._watchers.clear()
        for watcher in watchers:
            watcher.stop()
        self.events.close()
        self.transport.close()

    def __enter__(self) -> KubeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers ------------------------------------------------------------------------------------
    def resource(self, kind: str) -> Resource:
        return self.transport.resource(kind)

    @staticmethod
    def _namespace(resource: Resource, namespace: str | None) -> str | None:
        if not resource.namespaced:
            return None
        return namespace or "default"

    def _fill(self, obj: Obj, resource: Resource) -> Obj:
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        return obj

    # --- reads --------------------------------------------------------------------------------------
    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        resource = self.resource(kind)
        ns = self._namespace(resource, namespace)
        obj = self.transport.request("GET", resource.path(ns, name), f"get {_describe(resource, name, ns)}")
        return self._fill(obj, resource)

    def prefetch(self, kinds: Iterable[str]) -> None:
        """Start full lists of ``kinds`` in the background: the next full ``list`` of each kind takes the
        result (waiting while it is in flight). At start-up the API server serialises thousands of pods
        while the process is still loading its profile (issue 22, gap 4). A prefetch that failed, or that
        finished more than ``PREFETCH_MAX_AGE`` seconds before it is taken, is listed again by ``list``, so
        its errors and its freshness are those of the list the caller makes; one not taken by then is
        dropped. The taker is the informer's first list, which a watch from the list's version follows: like
        a reflector's first list, these are read from the API server's watch cache (``resourceVersion=0``,
        one unpaged answer)."""
        for kind in dict.fromkeys(kinds):
            done, result = threading.Event(), dict[str, Any]()
            with self._lock:
                if kind in self._prefetched:
                    continue
                self._prefetched[kind] = (done, result)
            thread = threading.Thread(
                target=self._prefetch_one, args=(kind, done, result), name=f"prefetch-{kind}", daemon=True
            )
            thread.start()

    def _prefetch_one(self, kind: str, done: threading.Event, result: dict[str, Any]) -> None:
        try:
            resource = self.resource(kind)
            # The informer's first list, followed by a watch from its version: from the watch cache.
            result["listed"] = list_all(
                self.transport, resource, None, page_size=self.page_size, from_cache=True
            )
            result["at"] = time.monotonic()
        except BaseException:
            log.debug("prefetch of %s failed; it is listed again when asked for", kind, exc_info=True)
        finally:
            done.set()
        # Not taken in time (a standby replica waiting for the Lease): too old to use, so not kept either.
        expiry = threading.Timer(PREFETCH_MAX_AGE, self._drop_prefetched, args=(kind, done))
        expiry.daemon = True
        expiry.start()

    def _drop_prefetched(self, kind: str, done: threading.Event) -> None:
        with self._lock:
            pending = self._prefetched.get(kind)
            if pending is not None and pending[0] is done:
                del self._prefetched[kind]

    def _take_prefetched(self, kind: str) -> tuple[list[Obj], str] | None:
        with self._lock:
            pending = self._prefetched.pop(kind, None)
        if pending is None:
            return None
        done, result = pending
        done.wait()
        if "listed" not in result or time.monotonic() - result["at"] > PREFETCH_MAX_AGE:
            return None
        listed: tuple[list[Obj], str] = result["listed"]
        return listed

    def list(self, kind: str, namespace: str | None = None) -> tuple[list[Obj], int]:
        return self._list(kind, namespace, from_cache=False)

    def list_to_watch(self, kind: str) -> tuple[builtins.list[Obj], int]:
        """A full list that a watch from its version follows (the informer's first list): as a reflector's,
        read from the API server's watch cache (``resourceVersion=0``: one unpaged answer, no read of etcd)
        or taken from ``prefetch``. It may lag the newest writes by a moment; the watch delivers them."""
        return self._list(kind, None, from_cache=True)

    def _list(self, kind: str, namespace: str | None, *, from_cache: bool) -> tuple[builtins.list[Obj], int]:
        resource = self.resource(kind)
        ns = self._namespace(resource, namespace) if namespace is not None else None
        prefetched = self._take_prefetched(kind) if ns is None else None
        try:
            items, rv = prefetched or list_all(
                self.transport, resource, ns, page_size=self.page_size, from_cache=from_cache and ns is None
            )
        except NotFoundError as err:
            # A collection answers 404 only when its resource is not served (a namespace that does not
            # exist lists as empty): the kind's CRD is missing. Say which, and how to install it.
            raise KindNotServedError(
                kind, f"the API server does not serve {kind} ({err}); {install_hint(kind)}"
            ) from err
        version = int(rv) if rv.isdigit() else 0
        if ns is None:
            # A full list is usually followed by subscribe(since=version): remember what the subscriber
            # holds, so that a relist can report the deletions among them.
            with self._lock:
                self._listed[kind] = (version, seed_known(items))
        return items, version

    def serves(self, kind: str) -> bool:
        return self.transport.serves(kind)

    def subscribe(
        self, kinds: Iterable[str], handler: Handler, since: int | None = None
    ) -> Callable[[], None]:
        resources = [self.resource(k) for k in dict.fromkeys(kinds)]
        handler_lock = threading.Lock()

        def deliver(event: WatchEvent) -> None:
            with handler_lock:
                handler(event)

        watchers: list[KindWatcher] = []
        for resource in resources:
            known: Known | None = None
            if since is not None:
                with self._lock:
                    listed = self._listed.get(resource.kind)
                    if listed is not None and listed[0] == since:
                        known = listed[1]  # handed over: the watcher keeps it current from here on
                        del self._listed[resource.kind]
            watcher = KindWatcher(
                self.transport,
                resource,
                deliver,
                since=str(since) if since is not None else None,
                known=known,
                page_size=self.page_size,
                watch_timeout=self.watch_timeout,
            )
            watchers.append(watcher)
        with self._lock:
            self._watchers.update(watchers)
        for watcher in watchers:
            watcher.start()

        def unsubscribe() -> None:
            with self._lock:
                self._watchers.difference_update(watchers)
            for watcher in watchers:
                watcher.stop()

        return unsubscribe

    def watchers(self) -> tuple[KindWatcher, ...]:
        """The running watchers (one per kind per subscription): their relist/reconnect counts."""
        with self._lock:
            return tuple(self._watchers)

    def wait_watching(self, timeout: float = 10.0) -> bool:
        """Wait until every watcher knows where to watch from (matters only for ``since=None``)."""
        with self._lock:
            watchers = list(self._watchers)
        return all(w.synced.wait(timeout) for w in watchers)

    # --- writes -------------------------------------------------------------------------------------
    def create(self, obj: Obj) -> Obj:
        if not isinstance(obj, Mapping):
            raise TypeError(f"expected an object (dict), got {type(obj).__name__}")
        resource = self.resource(str(obj.get("kind") or ""))
        body = dict(obj)
        meta = dict(_meta(body))
        ns = self._namespace(resource, meta.get("namespace"))
        if ns is not None:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        # An object read elsewhere (another cluster, a manifest dump) carries its old version; the API
        # server refuses to create an object with one set, the embedded cluster ignores it.
        meta.pop("resourceVersion", None)
        body["metadata"] = meta
        body["apiVersion"] = resource.api_version
        name = meta.get("name") or meta.get("generateName", "") + "*"
        created = self.transport.request(
            "POST", resource.path(ns), f"create {_describe(resource, name, ns)}", body=body
        )
        return self._fill(created, resource)

    def update(self, obj: Obj) -> Obj:
        if not isinstance(obj, Mapping):
            raise TypeError(f"expected an object (dict), got {type(obj).__name__}")
        resource = self.resource(str(obj.get("kind") or ""))
        meta = dict(_meta(obj))
        name = str(meta.get("name") or "")
        ns = self._namespace(resource, meta.get("namespace"))
        what = f"update {_describe(resource, name, ns)}"
        conditional = bool(meta.get("resourceVersion"))
        keep_status = resource.kind in STATUS_SUBRESOURCE_KINDS and not resource.has_status
        for _ in range(_UPDATE_ATTEMPTS):
            body = dict(obj)
            body["apiVersion"] = resource.api_version
            body["metadata"] = dict(meta)
            if ns is not None:
                body["metadata"]["namespace"] = ns
            if not conditional or keep_status:
                current = self.get(resource.kind, name, ns or "")
                if not conditional:
                    body["metadata"]["resourceVersion"] = _meta(current).get("resourceVersion")
                if keep_status:
                    body.pop("status", None)
                    if "status" in current:
                        body["status"] = current["status"]
            try:
                updated = self.transport.request("PUT", resource.path(ns, name), what, body=body)
                return self._fill(updated, resource)
            except ConflictError:
                if conditional:
                    raise
        raise ConflictError(f"{what}: still conflicting after {_UPDATE_ATTEMPTS} attempts")

    def patch(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> Obj:
        resource = self.resource(kind)
        if not isinstance(patch, Mapping):
            raise ClusterError(
                f"a merge patch of {resource.plural} must be an object, got {type(patch).__name__}"
            )
        ns = self._namespace(resource, namespace)
        body: dict[str, Any]
        sub: str | None = None
        if status:
            body = {"status": patch.get("status")} if "status" in patch else {}
            if isinstance(patch.get("metadata"), Mapping):
                # Preconditions only (resourceVersion / uid), as the embedded cluster reads them.
                pre = {k: v for k, v in patch["metadata"].items() if k in ("resourceVersion", "uid")}
                if pre:
                    body["metadata"] = pre
            sub = "status" if resource.has_status else None
        else:
            body = dict(patch)
            if resource.kind in STATUS_SUBRESOURCE_KINDS and not resource.has_status:
                body.pop("status", None)
        what = f"patch {_describe(resource, name, ns)}" + ("/status" if status else "")
        patched = self.transport.request(
            "PATCH", resource.path(ns, name, sub), what, body=body, content_type=MERGE_PATCH
        )
        return self._fill(patched, resource)

    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        resource = self.resource(kind)
        ns = self._namespace(resource, namespace)
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if kind == "Pod" and self.grace_period_seconds is not None:
            options["gracePeriodSeconds"] = self.grace_period_seconds
        self.transport.request(
            "DELETE", resource.path(ns, name), f"delete {_describe(resource, name, ns)}", body=options
        )

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        if not node:
            raise ClusterError(f"binding pod {namespace}/{name}: target node name is empty")
        ns = namespace or "default"
        meta: dict[str, Any] = {"name": name, "namespace": ns}
        if uid:
            meta["uid"] = uid  # the API server refuses (409) a binding whose uid is not the pod's
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        resource = self.resource("Pod")
        self.transport.request(
            "POST", resource.path(ns, name, "binding"), f"bind pod {ns}/{name} to {node}", body=body
        )
        self.bind_count += 1

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
        ns = namespace or "default"
        pod = self.get("Pod", name, ns)
        found_uid = str(_meta(pod).get("uid") or "")
        if uid and found_uid and found_uid != uid:
            raise uid_precondition_failed(ns, name, uid, found_uid)
        uid = uid or found_uid
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        # The precondition names the pod the caller decided about (else the one read above): a pod
        # re-created under the same name in between is left alone, by the API server itself.
        options: dict[str, Any] = {"preconditions": {"uid": uid}} if uid else {}
        if self.grace_period_seconds is not None:
            options["gracePeriodSeconds"] = self.grace_period_seconds
        if dry_run:
            options["dryRun"] = ["All"]
        body = {
            "apiVersion": self._eviction_version(),
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": ns},
            "deleteOptions": options,
        }
        resource = self.resource("Pod")
        self.transport.request(
            "POST",
            resource.path(ns, name, "eviction"),
            f"evict pod {ns}/{name}",
            body=body,
            query={"dryRun": "All"} if dry_run else None,
        )
        now = self.clock.now()
        self.evictions.append(
            EvictionRecord(
                namespace=ns,
                name=name,
                uid=uid,
                node=node,
                reason=reason,
                requested_by=requested_by,
                time=now,
                dry_run=dry_run,
            )
        )
        if not dry_run:
            self.record_event(
                EventRecord(
                    kind="Pod",
                    namespace=ns,
                    name=name,
                    reason=EVICTION_EVENT_REASON,
                    message=f"evicted from node {node or '<none>'} by {requested_by}: {reason}",
                    component=requested_by,
                    time=now,
                    extra={"uid": uid},
                    action="Evicting",
                )
            )

    def _eviction_version(self) -> str:
        """``policy/v1`` where the server has it (1.22+), else ``policy/v1beta1``: PDBs live alongside."""
        version = self.resource("PodDisruptionBudget").api_version
        return version if version.startswith("policy/") else "policy/v1"

    def record_event(self, event: EventRecord) -> None:
        self.events.record(event)

    def flush_events(self, timeout: float = 10.0) -> bool:
        """Wait until the queued Events are posted (tests and shutdown)."""
        return self.events.flush(timeout)

    def __repr__(self) -> str:
        return f"KubeCluster({self.transport.host}, component={self.component!r})"
