"""Batch resources of a pod: the extended-resource-spec annotation and the cgroup conversions."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord_framework.api.constants import ANNOTATION_EXTENDED_RESOURCE_SPEC
from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.koordlet.runtimehooks import HookError

__all__ = [
    "BATCH_CPU",
    "BATCH_MEMORY",
    "ContainerBatch",
    "milli_cpu_to_quota",
    "milli_cpu_to_shares",
    "parse_extended_resource_spec",
    "scale_quota",
]

BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
SHARES_MIN, SHARES_MAX = 2, 262144
CFS_PERIOD = 100_000
QUOTA_MIN = 1000


@dataclass(frozen=True, slots=True)
class ContainerBatch:
    """One container's batch requests and limits; ``None`` for a list the spec does not give, -1 for a
    list without the resource (Koordinator's ``GetBatch*FromResourceList``)."""

    cpu_request: int | None
    cpu_limit: int | None
    memory_request: int | None
    memory_limit: int | None


def milli_cpu_to_shares(milli: int) -> int:
    """Kubernetes' ``MilliCPUToShares``: 2 for nothing, else milli x 1024 / 1000 within [2, 262144]."""
    if milli <= 0:
        return SHARES_MIN
    return min(max(milli * 1024 // 1000, SHARES_MIN), SHARES_MAX)


def milli_cpu_to_quota(milli: int) -> int:
    """Koordinator's ``MilliCPUToQuota``: -1 (unlimited) for nothing, at least 1000 us per 100 ms period."""
    if milli <= 0:
        return -1
    return max(milli * CFS_PERIOD // 1000, QUOTA_MIN)


def scale_quota(quota: int, ratio: float) -> int:
    """CPU normalization: a positive quota divided by a ratio > 1, rounded up (ratios in (0, 1] ignored)."""
    if quota > 0 and ratio > 1.0:
        return math.ceil(quota / ratio)
    return quota


def _value(resources: Any, name: str, where: str) -> int | None:
    if resources is None:
        return None
    if not isinstance(resources, Mapping):
        raise HookError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: {where} must be an object")
    if name not in resources:
        return -1
    try:
        return Quantity(str(resources[name])).value()
    except QuantityError as err:
        raise HookError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: {where}.{name}: {err}") from None


def parse_extended_resource_spec(annotations: Mapping[str, str]) -> dict[str, ContainerBatch] | None:
    """Container name -> its batch resources; None when the pod has no annotation (nothing to change)."""
    raw = annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if raw is None:
        return None
    try:
        spec = json.loads(raw)
    except (TypeError, ValueError) as err:
        raise HookError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC} is not JSON: {err}") from None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if containers is None:
        containers = {}
    if not isinstance(containers, dict):
        raise HookError(f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: containers must be an object")
    out: dict[str, ContainerBatch] = {}
    for name, c in containers.items():
        if not isinstance(c, dict):
            raise HookError(
                f"annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}: containers.{name} must be an object"
            )
        req, lim = c.get("requests"), c.get("limits")
        at = f"containers.{name}"
        out[str(name)] = ContainerBatch(
            _value(req, BATCH_CPU, f"{at}.requests"),
            _value(lim, BATCH_CPU, f"{at}.limits"),
            _value(req, BATCH_MEMORY, f"{at}.requests"),
            _value(lim, BATCH_MEMORY, f"{at}.limits"),
        )
    return out
