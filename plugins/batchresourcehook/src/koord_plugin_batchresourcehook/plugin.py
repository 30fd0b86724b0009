"""The BatchResource hook: cpu shares, cfs quota and memory limit of best-effort (``koordinator.sh/qosClass:
BE``) pods and containers from the batch resources in their ``extended-resource-spec`` annotation."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

from koord_framework.api.qos import QoSClass, qos_class_raw
from koord_framework.koordlet.nodeslo import CPUSuppressPolicy
from koord_framework.koordlet.runtimehooks import (
    ContainerRequest,
    ContainerResponse,
    HookError,
    PodSandboxRequest,
    PodSandboxResponse,
    RuntimeHook,
    RuntimeHookArgs,
    hookimpl,
)
from koord_framework.koordlet.states import NodeState
from koord_plugin_batchresourcehook.resources import (
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    parse_extended_resource_spec,
    scale_quota,
)

__all__ = ["ANNOTATION_CPU_NORMALIZATION_RATIO", "BatchResource", "BatchResourceArgs"]

ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
RATIO_EPSILON = 1e-4


class BatchResourceArgs(RuntimeHookArgs):
    """BatchResource's args: the switch and the failure policy (the rule comes from NodeSLO and Node)."""


def cpu_normalization_ratio(annotations: Mapping[str, str]) -> float:
    """The node's ratio (-1 when absent); a bad value is an error naming the annotation."""
    raw = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if raw is None:
        return -1.0
    try:
        value = float(raw)
    except ValueError:
        raise HookError(f"annotation {ANNOTATION_CPU_NORMALIZATION_RATIO}: not a number: {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise HookError(f"annotation {ANNOTATION_CPU_NORMALIZATION_RATIO}: illegal ratio {raw!r}")
    return value


def _sum_or_unlimited(values: list[int | None]) -> int:
    """The sum, or -1 as soon as one value is missing or not positive."""
    total = 0
    for v in values:
        if v is None or v <= 0:
            return -1
        total += v
    return total


class BatchResource(RuntimeHook[BatchResourceArgs]):
    name: ClassVar[str] = "BatchResource"
    Args = BatchResourceArgs
    feature_gate: ClassVar[str] = "BatchResource"

    enable_cfs_quota: bool | None = None
    """False while the NodeSLO suppresses BE with the cfs quota policy (BECPUSuppress owns the quota)."""
    ratio: float | None = None

    def cfs_quota_scale(self) -> tuple[bool, float]:
        """(cfs quota enabled, ratio): Koordinator's ``GetCFSQuotaScaleRatio``."""
        enabled = True if self.enable_cfs_quota is None else self.enable_cfs_quota
        if not enabled:
            return False, -1.0
        return True, -1.0 if self.ratio is None else self.ratio

    @hookimpl
    def update_rule(self, state: NodeState) -> bool:
        changed = False
        if state.node_slo is not None:
            t = state.node_slo.threshold
            enabled = not (t.enable and t.cpu_suppress_policy is CPUSuppressPolicy.CFS_QUOTA)
            changed |= enabled != self.enable_cfs_quota
            self.enable_cfs_quota = enabled
        if state.node_manifest is not None:
            meta = state.node_manifest.get("metadata") or {}
            ratio = cpu_normalization_ratio(meta.get("annotations") or {})
            if self.ratio is None or abs(self.ratio - ratio) >= RATIO_EPSILON:
                changed = True
                self.ratio = ratio
        return changed

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        if qos_class_raw(request.labels) is not QoSClass.BE:
            return
        spec = parse_extended_resource_spec(request.annotations)
        if not spec:  # no annotation, or one naming no container: nothing to change
            return
        res = response.resources
        res.cpu_shares = milli_cpu_to_shares(
            sum(c.cpu_request for c in spec.values() if c.cpu_request is not None and c.cpu_request > 0)
        )
        enabled, ratio = self.cfs_quota_scale()
        if not enabled:
            res.cpu_quota = -1
        else:
            # One unlimited container makes the pod unlimited.
            milli = _sum_or_unlimited([c.cpu_limit for c in spec.values()])
            res.cpu_quota = scale_quota(milli_cpu_to_quota(milli), ratio)
        total = _sum_or_unlimited([c.memory_limit for c in spec.values()])
        res.memory_limit_in_bytes = total if total > 0 else -1

    @hookimpl
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        self._container(request, response)

    @hookimpl
    def pre_update_container_resources(self, request: ContainerRequest, response: ContainerResponse) -> None:
        self._container(request, response)

    def _container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        if qos_class_raw(request.pod_labels) is not QoSClass.BE:
            return
        spec = parse_extended_resource_spec(request.pod_annotations)
        if not spec or request.container_meta.name not in spec:
            return
        c = spec[request.container_meta.name]
        res = response.resources
        res.cpu_shares = milli_cpu_to_shares(c.cpu_request or 0)
        enabled, ratio = self.cfs_quota_scale()
        res.cpu_quota = scale_quota(milli_cpu_to_quota(c.cpu_limit or 0), ratio) if enabled else -1
        res.memory_limit_in_bytes = (
            c.memory_limit if c.memory_limit is not None and c.memory_limit > 0 else -1
        )
