"""``ReservationArgs``: Koordinator's v1 args type (``apis/config/v1``), its defaults and checks.

Koordinator's ``ValidateReservationArgs`` refuses native resources among ``ignoredResources`` and groups
that contain ``/`` or are ``kubernetes.io``; so does this model.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from koord_framework.plugin import PluginArgs

DEFAULT_GC_DURATION_SECONDS: Final = 24 * 3600
DEFAULT_GC_INTERVAL_SECONDS: Final = 60
DEFAULT_RESYNC_INTERVAL_SECONDS: Final = 60
_NATIVE: Final = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


class PreAllocationConfig(BaseModel):
    """``preAllocationConfig``: how Cluster-mode pre-allocation finds its candidate pods."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )

    enable_cluster_mode: bool = False
    """Allow reservations with ``preAllocationPolicy.mode: Cluster`` (else they are unschedulable)."""
    cluster_label_key: str = ""
    """Label marking Cluster-mode candidates (``"true"``); empty means
    ``pod.koordinator.sh/is-pre-allocatable``."""
    cluster_priority_annotation_key: str = ""
    """Annotation ordering Cluster-mode candidates, higher first; empty means
    ``pod.koordinator.sh/pre-allocatable-priority``."""
    prefer_no_pre_allocated_pods: bool = False
    """Place a reservation on free capacity when it fits there, pre-allocating only when it does not
    (unless the reservation requires pre-allocation)."""


class ReservationArgs(PluginArgs):
    """Arguments of the Reservation plugin (``ReservationArgs``)."""

    enable_preemption: bool = False
    """Let reservations preempt lower-priority pods (through the profile's DefaultPreemption)."""
    min_candidate_nodes_percentage: int = Field(10, ge=0, le=100)
    """Koordinator's preemption shortlist, percent of nodes; koord's DefaultPreemption uses its own args."""
    min_candidate_nodes_absolute: int = Field(100, ge=0)
    """Koordinator's preemption shortlist, absolute minimum; koord's DefaultPreemption uses its own args."""
    controller_workers: int = Field(1, ge=1)
    """Workers of the reservation controller (koord's controller runs inline; kept for compatibility)."""
    gc_duration_seconds: int = Field(DEFAULT_GC_DURATION_SECONDS, ge=0)
    """Seconds after which an expired or succeeded reservation is deleted. 0 means the default (24 h)."""
    gc_interval_seconds: int = Field(DEFAULT_GC_INTERVAL_SECONDS, ge=0)
    """Seconds between garbage collection passes. 0 means the default (60 s)."""
    disable_garbage_collection: bool = False
    """Keep expired and succeeded reservations forever."""
    resync_interval_seconds: int = Field(DEFAULT_RESYNC_INTERVAL_SECONDS, ge=0)
    """Seconds between status resyncs of every reservation. 0 means the default (60 s)."""
    ignored_resources: list[str] = Field(default_factory=list)
    """Extended resources the reservation fit checks ignore (e.g. ``example.com/gpu``)."""
    ignored_resource_groups: list[str] = Field(default_factory=list)
    """Extended-resource vendor prefixes the fit checks ignore (``example.com`` ignores ``example.com/*``)."""
    pre_allocation_config: PreAllocationConfig | None = None
    """Pre-allocation settings (Cluster mode, candidate label and priority keys, prefer free capacity)."""
    reservation_selector_index: dict[str, Any] | None = None
    """Koordinator's selector index settings; accepted for compatibility (koord indexes owners always)."""

    @field_validator("ignored_resources")
    @classmethod
    def _extended_only(cls, value: list[str]) -> list[str]:
        for name in value:
            if name in _NATIVE or name.startswith("hugepages-") or "/" not in name:
                raise ValueError(
                    f"{name!r} is not an extended resource; only extended resources may be ignored"
                )
        return value

    @field_validator("ignored_resource_groups")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        for group in value:
            if not group or "/" in group:
                raise ValueError(f"resource group {group!r} must be a vendor prefix without '/'")
            if group == "kubernetes.io" or group.endswith(".kubernetes.io"):
                raise ValueError(f"resource group {group!r} is reserved by Kubernetes")
        return value

    @property
    def gc_duration(self) -> float:
        return float(self.gc_duration_seconds or DEFAULT_GC_DURATION_SECONDS)

    @property
    def gc_interval(self) -> float:
        return float(self.gc_interval_seconds or DEFAULT_GC_INTERVAL_SECONDS)


__all__ = ["PreAllocationConfig", "ReservationArgs"]
