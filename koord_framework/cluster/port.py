"""The cluster port: the one interface scheduler, descheduler, koordlet and manager talk to.

Objects cross the port as Kubernetes-shaped JSON dicts (camelCase, as ``kubectl get -o json`` prints them):
the embedded ``MemoryCluster`` keeps them so, and the real adapter reads raw JSON responses rather than
client model objects (those cost tens of KiB per pod). Above the port, caches convert dicts into slim records
once (``koord_framework.api.objects``).

Both adapters raise only ``koord_framework.errors.ClusterError`` subclasses:
``NotFoundError``, ``ConflictError`` (already exists, stale resourceVersion, pod already bound) and
``TooManyRequestsError`` (eviction refused by a PodDisruptionBudget or rate limiting: retry later).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from koord_framework.cluster.clock import Clock
from koord_framework.cluster.kinds import KINDS, KindInfo
from koord_framework.errors import ConflictError

Obj = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class WatchEvent:
    """One change of a watched kind, as a subscription delivers it (ADDED, MODIFIED, DELETED)."""

    type: EventType
    kind: str
    obj: Obj
    resource_version: int
    old: Obj | None = None
    """The previous object, for MODIFIED and DELETED events (None when the adapter cannot know it)."""


Handler = Callable[[WatchEvent], None]


@dataclass(frozen=True)
class EvictionRecord:
    """What the cluster keeps of an eviction: every eviction has a reason and the component that asked."""

    namespace: str
    name: str
    uid: str
    node: str
    reason: str
    requested_by: str
    time: float
    dry_run: bool = False


@dataclass(frozen=True)
class EventRecord:
    """A Kubernetes Event as the port records it."""

    kind: str
    namespace: str
    name: str
    reason: str
    message: str
    type: Literal["Normal", "Warning"] = "Normal"
    component: str = ""
    time: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    action: str = ""
    """What the component did or failed to do (``Scheduling``, ``Binding``, ``Evicting``...): the Event's
    ``action``, as client-go's newer recorder writes it."""


def uid_precondition_failed(namespace: str, name: str, wanted: str, found: object) -> ConflictError:
    """The API server's 409 for a write whose UID precondition names another object than the one stored
    (both adapters raise it for an eviction of a pod re-created under the same name)."""
    return ConflictError(
        f"evicting pod {namespace}/{name}: Precondition failed: UID in precondition: {wanted}, "
        f"UID in object meta: {found}"
    )


class Informer(Protocol):
    """The shared informer above the port, as plugins see it (``Handle.informer``): the latest object of each
    kind it follows, and callbacks on changes. Objects are shared read-only dicts: never modify them."""

    def get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        """The cached object, or None (namespaced kinds default to namespace ``default``)."""

    def list(self, kind: str, namespace: str | None = None) -> list[Obj]:
        """The cached objects of a kind, optionally of one namespace."""

    def has_synced(self, kind: str) -> bool:
        """Whether ``kind`` has been listed."""

    def add_handler(
        self,
        kind: str,
        on_add: Callable[[Obj], None] | None = None,
        on_update: Callable[[Obj, Obj], None] | None = None,
        on_delete: Callable[[Obj], None] | None = None,
    ) -> Callable[[], None]:
        """Call back on changes of ``kind`` (the objects already cached first go to ``on_add``); returns
        the function that removes the handler. Register at construction time."""


class ClusterPort(abc.ABC):
    """Abstract cluster. ``kind`` is a Kubernetes kind name the cluster's ``kinds`` know: the built-in ones
    (``koord_framework.cluster.kinds``) and those installed distributions contribute (ADR 0004)."""

    clock: Clock
    kinds: Mapping[str, KindInfo] = KINDS
    """The kinds this cluster serves, by kind name: a ``KindRegistry`` of the built-in kinds and those the
    installed distributions contribute (both adapters); the built-in ones only by default."""

    # --- reads --------------------------------------------------------------------------------------
    @abc.abstractmethod
    def get(self, kind: str, name: str, namespace: str = "") -> Obj:
        """One object (a deep copy the caller may keep). Raises ``NotFoundError``."""

    @abc.abstractmethod
    def list(self, kind: str, namespace: str | None = None) -> tuple[list[Obj], int]:
        """All objects of a kind (optionally one namespace) and the resourceVersion they were read at."""

    def serves(self, kind: str) -> bool:
        """Whether the cluster serves ``kind`` at this moment (a CRD may be installed later). The embedded
        cluster serves every known kind; the real adapter asks the API server's discovery."""
        return True

    @abc.abstractmethod
    def subscribe(
        self, kinds: Iterable[str], handler: Handler, since: int | None = None
    ) -> Callable[[], None]:
        """Deliver watch events of ``kinds`` to ``handler``; returns the function that unsubscribes.

        With ``since``, events after that resourceVersion are replayed first (a watch resumed from a list).
        The embedded cluster calls handlers synchronously, in resourceVersion order, after the write that
        caused them; the real adapter calls them from its watch threads.
        """

    # --- writes -------------------------------------------------------------------------------------
    @abc.abstractmethod
    def create(self, obj: Obj) -> Obj:
        """Create; ``ConflictError`` if it exists. Returns the stored object (uid, resourceVersion set)."""

    @abc.abstractmethod
    def update(self, obj: Obj) -> Obj:
        """Replace; ``ConflictError`` when ``metadata.resourceVersion`` is set and stale."""

    @abc.abstractmethod
    def patch(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> Obj:
        """JSON merge patch (RFC 7386) of the object, or of its status subresource with ``status=True``."""

    def create_no_result(self, obj: Obj, *, handover: bool = False) -> None:
        """``create`` for a caller that does not read the stored object: an adapter may skip building the
        copy it would return (the embedded cluster does; by default this is ``create``).

        ``handover``: the caller gives ``obj`` and everything in it to the cluster and never modifies any
        of it afterwards (its nested values may be shared with other read-only data, e.g. one NodeSLO
        spec section shared by many nodes); the embedded cluster then stores it without copying it."""
        self.create(obj)

    def patch_no_result(
        self, kind: str, name: str, namespace: str, patch: Mapping[str, Any], status: bool = False
    ) -> None:
        """``patch`` for a caller that does not read the result (see ``create_no_result``)."""
        self.patch(kind, name, namespace, patch, status)

    @abc.abstractmethod
    def delete(self, kind: str, name: str, namespace: str = "") -> None:
        """Delete; ``NotFoundError`` when absent."""

    @abc.abstractmethod
    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        """Bind a pending pod to a node (``pods/binding``).

        ``ConflictError`` when the pod is already bound (to any node) or its uid differs; a pod is never
        bound twice. ``NotFoundError`` when the pod is gone.
        """

    @abc.abstractmethod
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
        """Evict through the Eviction API: PodDisruptionBudgets are respected (``TooManyRequestsError``).

        ``reason`` is mandatory and recorded with the eviction (as an Event on the real cluster). ``uid``
        is the uid of the pod the caller decided to evict: it becomes the eviction's UID precondition, so
        that a pod re-created under the same name since is left alone (``ConflictError``). Without it the
        pod found under the name is evicted.
        """

    @abc.abstractmethod
    def record_event(self, event: EventRecord) -> None:
        """Record a Kubernetes Event about an object."""

    # --- conveniences shared by both adapters ------------------------------------------------------
    def try_get(self, kind: str, name: str, namespace: str = "") -> Obj | None:
        from koord_framework.errors import NotFoundError

        try:
            return self.get(kind, name, namespace)
        except NotFoundError:
            return None
