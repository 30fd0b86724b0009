"""Koordinator's ClusterColocationProfile webhooks: the pod mutation (profiles, batch resources, the
extended-resource-spec annotation), the pod validation (QoS vs priority class, batch resources) and the
profiles applied to Reservations.

The handlers are imported on first use: koord-scheduler imports this package only for the
ClusterColocationProfile kind (``kinds.py``, a ``koord.kinds`` entry point), at start-up (issue 22)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koord_plugin_colocationprofile.handlers import (
        ClusterColocationProfile,
        ExtendedResourceSpec,
        PodColocationValidation,
        ReservationColocationProfile,
    )

__all__ = [
    "ClusterColocationProfile",
    "ExtendedResourceSpec",
    "PodColocationValidation",
    "ReservationColocationProfile",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from koord_plugin_colocationprofile import handlers

        return getattr(handlers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
