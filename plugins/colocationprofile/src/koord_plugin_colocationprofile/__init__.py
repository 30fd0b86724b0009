"""Koordinator's ClusterColocationProfile webhooks: the pod mutation (profiles, batch resources, the
extended-resource-spec annotation) and the pod validation (QoS vs priority class, batch resources)."""

from koord_plugin_colocationprofile.handlers import (
    ClusterColocationProfile,
    ExtendedResourceSpec,
    PodColocationValidation,
)

__all__ = ["ClusterColocationProfile", "ExtendedResourceSpec", "PodColocationValidation"]
