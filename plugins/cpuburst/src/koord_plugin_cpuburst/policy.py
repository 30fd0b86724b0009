"""The pieces of CPU burst, exactly as Koordinator's ``cpuburst`` plugin computes them."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from enum import Enum
from typing import Final

from pydantic import ValidationError as PydanticValidationError

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


def cpu_burst_enabled(policy: CPUBurstPolicy | None) -> bool:
    return policy in (CPUBurstPolicy.AUTO, CPUBurstPolicy.CPU_BURST_ONLY)


def cfs_quota_burst_enabled(policy: CPUBurstPolicy | None) -> bool:
    return policy in (CPUBurstPolicy.AUTO, CPUBurstPolicy.CFS_QUOTA_BURST_ONLY)


def milli_cpu_to_quota(milli: int) -> int:
    """``MilliCPUToQuota``: limit-derived quota; unlimited (-1) for no limit, at least 1000 us."""
    quota = milli * CFS_BASE_PERIOD // 1000
    if quota <= 0:
        return -1
    return max(quota, CFS_QUOTA_MIN)


def static_burst_us(limit_milli: int, cfg: CPUBurstConfig) -> int:
    """``cpu.cfs_burst_us`` of a container: ``limit x cpuBurstPercent% x period``; 0 when the policy does not
    burst or the container has no CPU limit (``calcStaticCPUBurstVal``)."""
    if not cpu_burst_enabled(cfg.policy) or limit_milli <= 0:
        return 0
    cores = (limit_milli / 1000) * ((cfg.cpu_burst_percent or 0) / 100)
    return int(cores * CFS_BASE_PERIOD)


def pod_burst_config(annotations: Mapping[str, str], node_cfg: CPUBurstConfig) -> CPUBurstConfig:
    """The node's config with the fields the pod annotation ``koordinator.sh/cpuBurst`` sets overlaid
    (``genPodBurstConfig``); an unparsable annotation leaves the node's config."""
    raw = annotations.get(ANNOTATION_POD_CPU_BURST)
    if not raw:
        return node_cfg
    try:
        data = json.loads(raw)
        pod_cfg = CPUBurstConfig.model_validate(data)
    except (ValueError, PydanticValidationError):
        return node_cfg
    updates = {k: v for k, v in pod_cfg.model_dump().items() if v is not None}
    return CPUBurstConfig.model_validate({**node_cfg.model_dump(), **updates})


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
