"""The admission-webhook extension point of koord-manager (Koordinator's ``pkg/webhook`` handlers).

A plugin distribution contributes an ``AdmissionHandler`` subclass through the entry-point group
``koord.manager.webhooks``. The manager's webhook server (``koord_framework.manager.webhook.server``) serves
every installed handler at its ``path`` (Koordinator's: ``/mutate-pod``, ``/validate-pod``,
``/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``, ...); several handlers may share a path, and then
run in ``order`` (then name) on one request, as Koordinator's handler calls its sub-handlers in turn.

* a **mutating** handler changes the object it is given in place; the server answers the JSONPatch from the
  object as decoded to the object after every handler of the path;
* a **validating** handler raises ``Denied`` with the reason; the first denial answers;
* a handler that raises anything else answers as its ``failure_policy`` says: ``"Fail"`` denies (code 500)
  with the exception as the reason, ``"Ignore"`` allows with the reason as a warning.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, cast

from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin

__all__ = [
    "GROUP",
    "AdmissionHandler",
    "AdmissionRequest",
    "Denied",
    "FailurePolicy",
    "Gates",
    "GroupVersionKind",
    "GroupVersionResource",
    "Lister",
    "Operation",
    "Writer",
]

GROUP = "koord.manager.webhooks"
"""Entry-point group of admission handlers."""

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
FailurePolicy = Literal["Fail", "Ignore"]


@dataclass(frozen=True)
class GroupVersionKind:
    group: str = ""
    version: str = ""
    kind: str = ""


@dataclass(frozen=True)
class GroupVersionResource:
    group: str = ""
    version: str = ""
    resource: str = ""


@dataclass(frozen=True)
class AdmissionRequest:
    """One ``admission.k8s.io/v1`` ``AdmissionRequest`` (the fields handlers read).

    ``object`` / ``old_object`` are the raw JSON objects as the API server sent them (``None`` when absent:
    ``old_object`` on CREATE, ``object`` on DELETE)."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    operation: Operation
    name: str = ""
    namespace: str = ""
    sub_resource: str = ""
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    dry_run: bool = False
    user_info: Mapping[str, Any] = field(default_factory=dict)


class Denied(Exception):
    """Raised by a handler to refuse the request; ``reason`` becomes the response's ``status.message``."""

    def __init__(self, reason: str, code: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class Lister(Protocol):
    """Cached reads of the cluster (the manager's shared informer): what handlers look objects up in."""

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None: ...

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]: ...


class Writer(Protocol):
    """Writes a handler may make while admitting (Koordinator's quota evaluator records the usage it admitted
    on the ElasticQuota), limited to the kinds in the handler's ``writes``. Both methods go to the cluster,
    not the informer's cache; errors are ``koord_framework.errors``' (``ConflictError`` for a stale
    ``metadata.resourceVersion``)."""

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The object as the cluster has it now (``None`` when absent)."""
        ...

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace ``obj`` (optimistic concurrency on its resourceVersion); the stored object."""
        ...


class Gates(Protocol):
    """The component's feature gates (``--feature-gates``)."""

    def enabled(self, name: str) -> bool: ...


class _AllDefaults:
    def enabled(self, name: str) -> bool:
        return False


class AdmissionHandler(Plugin[ArgsT], ExtensionPoint):
    """Base of an admission handler (one of Koordinator's webhook sub-handlers)."""

    extension_point: ClassVar[str] = "AdmissionWebhook"
    path: ClassVar[str] = ""
    """The URL path the handler is served at (Koordinator's, with the leading ``/``)."""
    mutating: ClassVar[bool] = False
    """True: a mutating webhook (changes the object); False: a validating one (raises ``Denied``)."""
    failure_policy: ClassVar[FailurePolicy] = "Fail"
    """What an exception other than ``Denied`` means: deny (``Fail``) or allow with a warning (``Ignore``)."""
    order: ClassVar[int] = 100
    """Position among the handlers of one path (lower first); Koordinator's order of sub-handlers."""
    resources: ClassVar[Sequence[str]] = ()
    """The resources (plural, ``""`` group first) the handler admits; others are allowed untouched."""
    watches: ClassVar[Sequence[str]] = ()
    """Kinds the handler reads through ``lister`` (the server caches them in its informer)."""
    gate: ClassVar[str] = ""
    """The feature gate that enables the handler (Koordinator's ``PodMutatingWebhook``, ...); "" none."""
    writes: ClassVar[Sequence[str]] = ()
    """Kinds the handler writes through ``writer`` (most write nothing: a webhook answers, not acts)."""

    def __init__(self, args: ArgsT | Mapping[str, Any] | None = None) -> None:
        self.args = cast(ArgsT, type(self).parse_args(args if args is not None else {}))
        self._lister: Lister | None = None
        self._writer: Writer | None = None
        self.gates: Gates = _AllDefaults()

    def bind(self, lister: Lister, gates: Gates | None = None, writer: Writer | None = None) -> None:
        """Called once by the server before the first request: where cached objects are read, the
        component's feature gates, and (for a handler with ``writes``) where it writes."""
        self._lister = lister
        if gates is not None:
            self.gates = gates
        if writer is not None:
            self._writer = writer

    @property
    def writer(self) -> Writer:
        if self._writer is None:
            raise RuntimeError(f"admission handler {self.name!r} has no writer (its `writes` is empty?)")
        return self._writer

    @property
    def lister(self) -> Lister:
        if self._lister is None:
            raise RuntimeError(f"admission handler {self.name!r} used before bind()")
        return self._lister

    def handles(self, request: AdmissionRequest) -> bool:
        """Whether the handler looks at ``request``: its resources, no subresource (Koordinator's
        ``shouldIgnoreIfNotPod``)."""
        return not request.sub_resource and (
            not self.resources or request.resource.resource in self.resources
        )

    @abc.abstractmethod
    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        """Admit ``request``: a mutating handler changes ``obj`` (the decoded ``request.object``) in place; a
        validating one raises ``Denied``. ``ValueError`` for an object it cannot read (named field)."""
