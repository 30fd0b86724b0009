"""The manager-controller extension point: a controller a distribution adds to koord-manager.

A controller plugin (entry-point group ``koord.manager.controllers``; the entry-point name is Koordinator's
controller name, which ``--controllers`` selects) runs in koord-manager's controller loop next to the SLO
controllers: level-triggered over the manager's shared informer, its keys marked dirty by the events of the
kinds it ``watches``, every key reconciled again at each full resync. ``reconcile`` returns the seconds after
which the key is reconciled again (controller-runtime's ``Result{RequeueAfter}``) or ``None``; raising
retries the key with the loop's backoff, as a reconcile returning an error does in controller-runtime.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, cast

from koord_framework.cluster.port import ClusterPort
from koord_framework.plugin import ArgsT, ExtensionPoint, Plugin

__all__ = ["GROUP", "ControllerContext", "ManagerController"]

GROUP = "koord.manager.controllers"
"""Entry-point group of manager controllers."""


class ControllerContext(Protocol):
    """What ``bind`` gives a controller: cached reads (the manager's shared informer, following the kinds
    the controller ``watches``), the cluster to write to (fenced while leader election is on) and
    koord-manager's feature gates."""

    @property
    def cluster(self) -> ClusterPort:
        """Writes (and reads that must not come from the cache)."""

    def get(self, kind: str, name: str, namespace: str = "") -> Mapping[str, Any] | None:
        """The cached object, ``None`` when absent."""

    def list(self, kind: str, namespace: str | None = None) -> list[Mapping[str, Any]]:
        """The cached objects of a watched kind (read-only)."""

    def feature_enabled(self, name: str) -> bool:
        """Whether koord-manager's feature gate ``name`` is on. Raises ``KeyError`` for an unknown gate."""


class ManagerController(Plugin[ArgsT], ExtensionPoint):
    """Base of a koord-manager controller (a controller-runtime reconciler Koordinator adds in
    ``cmd/koord-manager/options/controllers.go``)."""

    extension_point: ClassVar[str] = "ManagerController"
    watches: ClassVar[Sequence[str]] = ()
    """Kinds the controller reads: the manager follows them before the first reconcile, and their events
    go through ``keys_for``."""

    def __init__(self, args: ArgsT | Mapping[str, Any] | None = None) -> None:
        self.args = cast(ArgsT, type(self).parse_args(args if args is not None else {}))
        self._context: ControllerContext | None = None

    def bind(self, context: ControllerContext) -> None:
        """Called once by the manager before the first reconcile."""
        self._context = context

    @property
    def context(self) -> ControllerContext:
        if self._context is None:
            raise RuntimeError(f"controller {self.name} used before bind()")
        return self._context

    @abc.abstractmethod
    def all_keys(self) -> Iterable[str]:
        """Every key the controller owns (what a full resync reconciles)."""

    @abc.abstractmethod
    def reconcile(self, key: str) -> float | None:
        """Bring ``key`` to its desired state; return the seconds until it is reconciled again, or ``None``.
        Raise to be retried with backoff."""

    def keys_for(
        self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> Iterable[str]:
        """The keys an event of a watched kind marks dirty (``old`` ``None``: created; ``new`` ``None``:
        deleted). Default: none (the controller relies on resync and requeues)."""
        return ()
