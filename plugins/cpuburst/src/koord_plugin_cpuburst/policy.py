"""The pieces of CPU burst, exactly as Koordinator's ``cpuburst`` plugin computes them."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Final

from koord_framework.koordlet.cgroups import CFS_BASE_PERIOD, CFS_QUOTA_MIN
from koord_framework.koordlet.nodeslo import CPUBurstConfig, CPUBurstPolicy

ANNOTATION_POD_CPU_BURST: Final = "koordinator.sh/cpuBurst"
CFS_INCREASE_STEP: Final = 1.2
CFS_DECREASE_STEP: Final = 0.8
SHARE_POOL_COOLING_THRESHOLD_RATIO: Final = 0.9
LIMITER_CONSUME_ABOVE_PERCENT: Final = 100
LIMITER_SAVE_BELOW_PERCENT: Final = 60


class CFSOperation(Enum):
    SCALE_UP = "cfsScaleUp"
    SCALE_DOWN = "cfsScaleDown"
    REMAIN = "cfsRemain"
    RESET = "cfsReset"


class NodeBurstState(Enum):
    OVERLOAD = "nodeBurstOverload"
    """Share-pool usage >= threshold."""
    COOLING = "nodeBurstCooling"
    """0.9 x threshold <= usage < threshold."""
    IDLE = "nodeBurstIdle"
    UNKNOWN = "nodeBurstUnknown"
    """No node metrics or CPU topology."""


def cpu_burst_enabled(policy: str) -> bool:
    """``cpuBurstEnabled``: only ``auto`` and ``cpuBurstOnly``; ``none`` and unknown strings do not burst."""
    return policy in (CPUBurstPolicy.AUTO, CPUBurstPolicy.CPU_BURST_ONLY)


def cfs_quota_burst_enabled(policy: str) -> bool:
    """``cfsQuotaBurstEnabled``: only ``auto`` and ``cfsQuotaBurstOnly``."""
    return policy in (CPUBurstPolicy.AUTO, CPUBurstPolicy.CFS_QUOTA_BURST_ONLY)


def milli_cpu_to_quota(milli: int) -> int:
    """``MilliCPUToQuota``: limit-derived quota; unlimited (-1) for no limit, at least 1000 us."""
    quota = milli * CFS_BASE_PERIOD // 1000
    if quota <= 0:
        return -1
    return max(quota, CFS_QUOTA_MIN)


def static_burst_us(limit_milli: int, cfg: BurstConfig) -> int:
    """``cpu.cfs_burst_us`` of a container: ``limit x cpuBurstPercent% x period``; 0 when the policy does not
    burst or the container has no CPU limit (``calcStaticCPUBurstVal``)."""
    if not cpu_burst_enabled(cfg.policy) or limit_milli <= 0:
        return 0
    cores = (limit_milli / 1000) * ((cfg.cpu_burst_percent or 0) / 100)
    return int(cores * CFS_BASE_PERIOD)


def quota_ceil(base: int, cfs_quota_burst_percent: int | None) -> int:
    """Highest quota scaling may reach: ``base x percent / 100`` in float64 as upstream computes it
    (``cpu_burst.go:380-383``); the base itself when the percent is unset or not above 100."""
    pct = cfs_quota_burst_percent
    if pct is None or pct <= 100:
        return base
    return int(float(base) * float(pct) / 100)


@dataclass(frozen=True, slots=True)
class BurstConfig:
    """The burst settings one pod is handled with: the node's ``cpuBurstStrategy`` with the pod's annotation
    laid over it (upstream's ``*slov1alpha1.CPUBurstConfig``).

    Deliberately not the NodeSLO's validated model: the koordlet does not range-check or enum-check what it
    merges, so ``policy`` may be any string (one that is none of the four bursts nothing and resets quotas)
    and a percent may be out of the webhook's range (``cfsQuotaBurstPercent`` 90 pins the quota at its base).
    """

    policy: str = ""
    cpu_burst_percent: int | None = None
    cfs_quota_burst_percent: int | None = None
    cfs_quota_burst_period_seconds: int | None = None

    @classmethod
    def from_node(cls, cfg: CPUBurstConfig) -> BurstConfig:
        return cls(
            policy=str(cfg.policy.value) if cfg.policy is not None else "",
            cpu_burst_percent=cfg.cpu_burst_percent,
            cfs_quota_burst_percent=cfg.cfs_quota_burst_percent,
            cfs_quota_burst_period_seconds=cfg.cfs_quota_burst_period_seconds,
        )


class _GoDecodeError(ValueError):
    """The annotation is something Go's ``json.Unmarshal`` into ``CPUBurstConfig`` would reject."""


_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_ANNOTATION_FIELDS: Final = {
    "policy": "policy",
    "cpuburstpercent": "cpu_burst_percent",
    "cfsquotaburstpercent": "cfs_quota_burst_percent",
    "cfsquotaburstperiodseconds": "cfs_quota_burst_period_seconds",
}


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's members in document order (duplicates kept), told apart from a JSON array."""


def _reject_constant(name: str) -> Any:
    raise _GoDecodeError(f"{name} is not JSON")


def _decode_pod_annotation(raw: str) -> dict[str, Any]:
    """The fields of ``raw`` as ``GetPodCPUBurstConfig`` (``apis/slo/v1alpha1/pod.go:38``) decodes them: keys
    matched case-insensitively, unknown keys ignored, later duplicates winning,
    integers only as JSON integers within int64 (no ``"200"``, ``200.0`` or ``true``). ``null`` clears a
    number (a pointer in Go) and leaves ``policy`` (a plain string) as it was. Any mismatch is an
    error for the whole annotation, as in Go."""
    try:
        decoded = json.loads(raw, object_pairs_hook=_Pairs, parse_constant=_reject_constant)
    except ValueError as err:
        raise _GoDecodeError(str(err)) from None
    if decoded is None:  # JSON null into a struct: a no-op, not an error
        return {}
    if not isinstance(decoded, _Pairs):  # an array, string or number cannot fill a struct
        raise _GoDecodeError("not a JSON object")
    fields: dict[str, Any] = {}
    for key, value in decoded:
        name = _ANNOTATION_FIELDS.get(key.casefold())
        if name is None:
            continue
        if value is None:
            if name != "policy":  # null clears a pointer field; into a plain string it is a no-op
                fields.pop(name, None)
        elif name == "policy":
            if not isinstance(value, str):
                raise _GoDecodeError("policy is not a string")
            fields[name] = value
        else:
            if isinstance(value, bool) or not isinstance(value, int):
                raise _GoDecodeError(f"{key} is not an integer")
            if not _INT64_MIN <= value <= _INT64_MAX:
                raise _GoDecodeError(f"{key} overflows int64")
            fields[name] = value
    return fields


def pod_burst_config(annotations: Mapping[str, str], node_cfg: BurstConfig) -> BurstConfig:
    """The node's config with the fields the pod annotation ``koordinator.sh/cpuBurst`` sets overlaid
    (``genPodBurstConfig``, ``cpu_burst.go:667``). An annotation Go cannot decode leaves the node's config
    whole; a decoded one replaces every field Go's ``omitempty`` marshal keeps (a non-empty policy, any
    non-null number, zero included)."""
    raw = annotations.get(ANNOTATION_POD_CPU_BURST)
    if raw is None:
        return node_cfg
    try:
        fields = _decode_pod_annotation(raw)
    except _GoDecodeError:
        return node_cfg
    if fields.get("policy") == "":
        del fields["policy"]
    return replace(node_cfg, **fields)


def node_burst_state(usage_ratio: float, threshold_percent: int) -> NodeBurstState:
    thr = threshold_percent / 100
    if usage_ratio >= thr:
        return NodeBurstState.OVERLOAD
    if thr * SHARE_POOL_COOLING_THRESHOLD_RATIO <= usage_ratio < thr:
        return NodeBurstState.COOLING
    return NodeBurstState.IDLE


def change_operation_by_node(state: NodeBurstState, op: CFSOperation) -> CFSOperation:
    """An overloaded node scales down instead of up or remaining; a cooling or unknown one holds instead of
    scaling up (``changeOperationByNode``)."""
    if state is NodeBurstState.OVERLOAD and op in (CFSOperation.SCALE_UP, CFSOperation.REMAIN):
        return CFSOperation.SCALE_DOWN
    if state in (NodeBurstState.COOLING, NodeBurstState.UNKNOWN) and op is CFSOperation.SCALE_UP:
        return CFSOperation.REMAIN
    return op


def target_quota(op: CFSOperation, current: int, base: int, ceil: int) -> int:
    """Next container quota: x1.2 up, x0.8 down, base on reset; always within [base, ceil]."""
    target = current
    if op is CFSOperation.SCALE_UP:
        target = int(current * CFS_INCREASE_STEP)
    elif op is CFSOperation.SCALE_DOWN:
        target = int(current * CFS_DECREASE_STEP)
    elif op is CFSOperation.RESET:
        target = base
    return max(base, min(target, ceil))


class BurstLimiter:
    """Token bucket that stops a container from bursting continuously (``burstLimiter``).

    Capacity = ``period x (maxPercent - 100)`` tokens; starts with a random share in [0, 0.5) of it. Each
    ``allow`` spends ``(usage% - 100) x whole seconds elapsed`` while the container uses at least its limit,
    and saves ``(100 - usage%) x seconds`` while below 60 %; the balance stays within +-capacity and bursting
    is allowed while it is positive.
    """

    def __init__(
        self,
        period_seconds: int,
        max_percent: int,
        now: float,
        *,
        init_ratio: float | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._rng = rng or random.Random()
        self.init(period_seconds, max_percent, now, init_ratio)

    def init(
        self, period_seconds: int, max_percent: int, now: float, init_ratio: float | None = None
    ) -> None:
        capacity = period_seconds * (max_percent - 100)
        ratio = init_ratio if init_ratio is not None else self._rng.random() / 2
        self.capacity = capacity
        self.tokens = int(capacity * ratio)
        self.last_update = now
        self.expire_seconds = 2 * period_seconds

    def allow(self, now: float, usage_percent: int) -> tuple[bool, int]:
        elapsed = int(now - self.last_update)
        if usage_percent >= LIMITER_CONSUME_ABOVE_PERCENT:
            self.tokens -= (usage_percent - 100) * elapsed
        elif usage_percent < LIMITER_SAVE_BELOW_PERCENT:
            self.tokens += (100 - usage_percent) * elapsed
        self.tokens = max(min(self.tokens, self.capacity), -self.capacity)
        self.last_update = now
        return self.tokens > 0, self.tokens

    def update_if_changed(self, period_seconds: int, max_percent: int, now: float) -> None:
        if self.capacity != period_seconds * (max_percent - 100):
            self.init(period_seconds, max_percent, now)

    def expired(self, now: float) -> bool:
        return now - self.last_update > self.expire_seconds
