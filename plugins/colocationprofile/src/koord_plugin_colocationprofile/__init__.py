"""Koordinator's ClusterColocationProfile webhooks: the pod mutation (profiles, batch resources, the
extended-resource-spec annotation), the pod validation (QoS vs priority class, batch resources) and the
profiles applied to Reservations."""

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
