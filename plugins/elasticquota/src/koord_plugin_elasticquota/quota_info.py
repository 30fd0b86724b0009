"""One quota's bookkeeping (``core/quota_info.go``): min/max/weights, request/used sums, pods, runtime.

Resource lists are ``dict[str, int]`` in canonical units (``koord_framework.api.resources``). Sums are
clamped at zero after every change, as upstream's ``add*NonNegative`` helpers do, and keep the keys they have
seen (a pod added and removed leaves ``cpu: 0`` behind, which messages print as such).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import add

__all__ = ["CalculateInfo", "PodEntry", "QuotaInfo", "add_non_negative", "limited"]


def add_non_negative(a: dict[str, int], b: dict[str, int] | None) -> dict[str, int]:
    if not b:
        return a
    out = add(a, b)
    for key, value in out.items():
        if value < 0:
            out[key] = 0
    return out


def limited(request: dict[str, int], max_: dict[str, int]) -> dict[str, int]:
    """``min(request, max)`` for the names ``max`` has; other names pass through (getLimitRequest)."""
    out = dict(request)
    for key, value in out.items():
        cap = max_.get(key)
        if cap is not None and value > cap:
            out[key] = cap
    return out


@dataclass(slots=True)
class CalculateInfo:
    max: dict[str, int] = field(default_factory=dict)
    min: dict[str, int] = field(default_factory=dict)
    auto_scale_min: dict[str, int] = field(default_factory=dict)
    """``min`` scaled down when the children's mins exceed the parent's runtime (min scaling)."""
    used: dict[str, int] = field(default_factory=dict)
    non_preemptible_used: dict[str, int] = field(default_factory=dict)
    request: dict[str, int] = field(default_factory=dict)
    non_preemptible_request: dict[str, int] = field(default_factory=dict)
    child_request: dict[str, int] = field(default_factory=dict)
    self_request: dict[str, int] = field(default_factory=dict)
    self_used: dict[str, int] = field(default_factory=dict)
    self_non_preemptible_used: dict[str, int] = field(default_factory=dict)
    self_non_preemptible_request: dict[str, int] = field(default_factory=dict)
    shared_weight: dict[str, int] = field(default_factory=dict)
    runtime: dict[str, int] = field(default_factory=dict)
    guaranteed: dict[str, int] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)

    def copy(self) -> CalculateInfo:
        return CalculateInfo(**{f.name: dict(getattr(self, f.name)) for f in fields(self)})


@dataclass(slots=True)
class PodEntry:
    pod: PodInfo
    assigned: bool = False


@dataclass(slots=True)
class QuotaInfo:
    name: str
    parent: str
    is_parent: bool
    allow_lent_resource: bool
    runtime_version: int = 0
    refreshed_at: int = -1
    """The manager's change count when the runtime was last refreshed (-1: never)."""
    calc: CalculateInfo = field(default_factory=CalculateInfo)
    pods: dict[str, PodEntry] = field(default_factory=dict)
    """Pods of this quota by ``namespace/name`` (upstream's pod cache key)."""

    def limited_request(self) -> dict[str, int]:
        return limited(self.calc.request, self.calc.max)

    def masked_runtime(self) -> dict[str, int]:
        names = self.calc.max
        return {k: v for k, v in self.calc.runtime.items() if k in names}

    def add_request(self, delta: dict[str, int], delta_np: dict[str, int] | None, is_self: bool) -> None:
        ci = self.calc
        ci.request = add_non_negative(ci.request, delta)
        ci.non_preemptible_request = add_non_negative(ci.non_preemptible_request, delta_np)
        if is_self:
            ci.self_request = add_non_negative(ci.self_request, delta)
            ci.self_non_preemptible_request = add_non_negative(ci.self_non_preemptible_request, delta_np)

    def add_used(self, delta: dict[str, int], delta_np: dict[str, int] | None, is_self: bool) -> None:
        ci = self.calc
        ci.used = add_non_negative(ci.used, delta)
        ci.non_preemptible_used = add_non_negative(ci.non_preemptible_used, delta_np)
        if is_self:
            ci.self_used = add_non_negative(ci.self_used, delta)
            ci.self_non_preemptible_used = add_non_negative(ci.self_non_preemptible_used, delta_np)

    def clear_for_reset(self) -> None:
        ci = self.calc
        for name in (
            "request",
            "non_preemptible_request",
            "used",
            "non_preemptible_used",
            "runtime",
            "child_request",
            "guaranteed",
            "allocated",
            "self_used",
            "self_request",
            "self_non_preemptible_used",
            "self_non_preemptible_request",
        ):
            setattr(ci, name, {})
        self.runtime_version = 0
        self.refreshed_at = -1

    def is_pod_assigned(self, pod: PodInfo | None) -> bool:
        if pod is None:
            return False
        entry = self.pods.get(pod.key)
        return entry is not None and entry.assigned

    def assigned_pods(self) -> list[PodInfo]:
        return [e.pod for e in self.pods.values() if e.assigned]
