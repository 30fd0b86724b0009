"""The CPUNormalization hook: on a node whose CPUs are faster than the reference (the node annotation
``node.koordinator.sh/cpu-normalization-ratio`` > 1), the cfs quota of CPU-share pods (LS, or no QoS and no
bound cpuset) is divided by the ratio, so that a pod's limit means the same work on every node.

Only requests that carry the current resources are adjusted (the reconciler's, or a runtime request with
container resources); a request without them is left alone, as in Koordinator.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import ClassVar

from koord_framework.api.constants import ANNOTATION_RESOURCE_STATUS
from koord_framework.api.qos import QoSClass, qos_class_raw
from koord_framework.koordlet.runtimehooks import (
    ContainerRequest,
    ContainerResources,
    ContainerResponse,
    HookError,
    PodSandboxRequest,
    PodSandboxResponse,
    RuntimeHook,
    RuntimeHookArgs,
    hookimpl,
)
from koord_framework.koordlet.states import NodeState

__all__ = [
    "ANNOTATION_CPU_NORMALIZATION_RATIO",
    "CPUNormalization",
    "CPUNormalizationArgs",
    "is_cpu_share_pod",
]

ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
RATIO_EPSILON = 1e-4


class CPUNormalizationArgs(RuntimeHookArgs):
    """CPUNormalization's args: the switch and the failure policy (the ratio comes from the Node)."""


def is_cpu_share_pod(labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None) -> bool:
    """LS pods and pods without a Koordinator QoS that the scheduler did not bind to a cpuset."""
    if not labels:
        return True
    qos = qos_class_raw(labels)
    # Koordinator ignores an unreadable resource-status here (the pod is then treated as CPU share).
    if qos is QoSClass.NONE and annotations and _has_cpuset(annotations):
        return False
    return qos in (QoSClass.LS, QoSClass.NONE)


def _has_cpuset(annotations: Mapping[str, str]) -> bool:
    if ANNOTATION_RESOURCE_STATUS not in annotations:
        return False
    try:
        data = json.loads(annotations[ANNOTATION_RESOURCE_STATUS])
    except ValueError:
        return False
    return isinstance(data, dict) and bool(data.get("cpuset"))


class CPUNormalization(RuntimeHook[CPUNormalizationArgs]):
    name: ClassVar[str] = "CPUNormalization"
    Args = CPUNormalizationArgs
    feature_gate: ClassVar[str] = "CPUNormalization"

    enable: bool = False
    ratio: float = -1.0

    @hookimpl
    def update_rule(self, state: NodeState) -> bool:
        if state.node_manifest is None:
            return False
        annotations = (state.node_manifest.get("metadata") or {}).get("annotations") or {}
        raw = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
        ratio = -1.0
        if raw is not None:
            try:
                ratio = float(raw)
            except ValueError:
                raise HookError(
                    f"annotation {ANNOTATION_CPU_NORMALIZATION_RATIO}: not a number: {raw!r}"
                ) from None
            if not math.isfinite(ratio) or ratio <= 0:
                raise HookError(f"annotation {ANNOTATION_CPU_NORMALIZATION_RATIO}: illegal ratio {raw!r}")
        enable = ratio != -1
        if enable == self.enable and abs(self.ratio - ratio) < RATIO_EPSILON:
            return False
        self.enable, self.ratio = enable, ratio
        return True

    def _scaled(self, current: ContainerResources | None) -> int | None:
        if not self.enable or current is None or current.cpu_quota is None or current.cpu_quota <= 0:
            return None
        if self.ratio > 1.0:
            return math.ceil(current.cpu_quota / self.ratio)
        return current.cpu_quota

    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        if not is_cpu_share_pod(request.labels, request.annotations):
            return
        quota = self._scaled(request.resources)
        if quota is not None:
            response.resources.cpu_quota = quota

    @hookimpl
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        self._container(request, response)

    @hookimpl
    def pre_update_container_resources(self, request: ContainerRequest, response: ContainerResponse) -> None:
        self._container(request, response)

    def _container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        if not is_cpu_share_pod(request.pod_labels, request.pod_annotations):
            return
        quota = self._scaled(request.resources)
        if quota is not None:
            response.resources.cpu_quota = quota
