"""Estimators: how much a pod will use before koordlet reports it, and how much a node offers.

A pod that was just placed is invisible in its node's NodeMetric for up to a report interval; without an
estimate the scheduler would pile pods onto a node that merely *looks* idle. Koordinator's
``defaultEstimator`` (``pkg/scheduler/plugins/loadaware/estimator``) takes a percentage (the scaling factor)
of the larger of the pod's request and limit, in the resource the pod's priority class really consumes
(``kubernetes.io/batch-cpu`` for a batch pod), with 250m / 200Mi for a pod that asks for nothing.

Estimators are an extension point of this plugin: ``args.estimator`` names one, looked up among the entry
points of group ``koord.scheduler.loadaware.estimators``; "" and unknown names use ``defaultEstimator``, as
Koordinator does.
"""

from __future__ import annotations

import abc
import json
import logging
import math
from collections.abc import Hashable, Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar, Final

from koord_framework.api.constants import (
    ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS,
    ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED,
    ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_SCHEDULED,
    ANNOTATION_NODE_RAW_ALLOCATABLE,
)
from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.api.qos import translate_resource
from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, parse_resource_list
from koord_framework.api.strconv import parse_int
from koord_plugin_loadaware.args import LoadAwareSchedulingArgs

if TYPE_CHECKING:
    from koord_framework.scheduler.interface import Handle

__all__ = [
    "DEFAULT_ESTIMATOR",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "ESTIMATOR_GROUP",
    "DefaultEstimator",
    "Estimator",
    "custom_estimated_seconds",
    "custom_scaling_factors",
    "go_round",
    "load_estimator",
]

log = logging.getLogger(__name__)

ESTIMATOR_GROUP: Final = "koord.scheduler.loadaware.estimators"
DEFAULT_ESTIMATOR: Final = "defaultEstimator"
DEFAULT_MILLI_CPU_REQUEST: Final = 250
"""What a pod that requests no cpu is expected to use, in milli-cores."""
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
"""What a pod that requests no memory is expected to use, in bytes (200Mi)."""

_INT64_MAX: Final = 2**63 - 1


def go_round(x: float) -> int:
    """Go's ``math.Round``: half away from zero, exact (no ``x + 0.5`` precision loss)."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return int(t)


class Estimator(abc.ABC):
    """Predicts pod usage and node capacity for LoadAwareScheduling (Koordinator's ``estimator.Estimator``).

    Values are canonical integers: ``cpu`` in milli-cores, everything else by ``Value()``. ``estimate_pod``
    returns one entry per resource it estimates (keys as the args name them, e.g. ``cpu``, never the
    batch/mid names); resources the plugin does not track are ignored.
    """

    name: ClassVar[str] = ""

    def __init__(self, args: LoadAwareSchedulingArgs, handle: Handle | None = None) -> None:
        self.args = args
        self.handle = handle

    @abc.abstractmethod
    def estimate_pod(self, pod: PodInfo) -> dict[str, int]: ...

    @abc.abstractmethod
    def estimate_node(self, node: NodeRecord) -> dict[str, int]: ...

    def estimate_key(self, pod: PodInfo) -> Hashable | None:
        """A key such that pods with equal keys get equal ``estimate_pod`` results, or None (the default)
        when the estimator cannot say. The plugin then reuses one pod's estimate for the next pods of the
        same key instead of estimating every pod (replicas of a workload share their estimate)."""
        return None


class DefaultEstimator(Estimator):
    """Koordinator's ``defaultEstimator``: scaling factor x max(request, limit), clamped to the limit."""

    name: ClassVar[str] = DEFAULT_ESTIMATOR

    def __init__(self, args: LoadAwareSchedulingArgs, handle: Handle | None = None) -> None:
        super().__init__(args, handle)
        self._factors = dict(args.estimated_scaling_factors)

    def scaling_factors(self, pod: PodInfo) -> dict[str, int]:
        """The factors for this pod: its annotation's (when allowed) completed by the args' ones."""
        if self.args.allow_customize_estimation:
            custom = custom_scaling_factors(pod.annotations)
            if custom:
                return {**self._factors, **custom}
        return self._factors

    def estimate_key(self, pod: PodInfo) -> Hashable | None:
        """Everything ``estimate_pod`` reads: the priority class, requests, limits and, when allowed, the
        scaling-factor annotation. None for subclasses, which may read more (they can override this)."""
        if type(self) is not DefaultEstimator:
            return None
        custom = None
        if self.args.allow_customize_estimation:
            custom = pod.annotations.get(ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS)
        return (pod.priority_class, custom, tuple(pod.requests.items()), tuple(pod.limits.items()))

    def estimate_pod(self, pod: PodInfo) -> dict[str, int]:
        priority_class = pod.priority_class
        out: dict[str, int] = {}
        for name, factor in self.scaling_factors(pod).items():
            real = translate_resource(name, priority_class)
            out[name] = _estimate_resource(pod.requests, pod.limits, real, factor)
        return out

    def estimate_node(self, node: NodeRecord) -> dict[str, int]:
        """Allocatable, with ``node.koordinator.sh/raw-allocatable`` entries overriding amplified ones."""
        raw = _raw_allocatable(node.annotations)
        allocatable = node.allocatable
        if not raw or raw == allocatable:
            return dict(allocatable)
        return {**allocatable, **raw}


def _estimate_resource(requests: Mapping[str, int], limits: Mapping[str, int], real: str, factor: int) -> int:
    limit = limits.get(real, 0)
    request = requests.get(real, 0)
    quantity = limit if limit > request else request
    if quantity == 0:
        # An empty name (a free pod, or a resource its class has no mapping for) lands here too: 0.
        if real in (CPU, BATCH_CPU):
            return DEFAULT_MILLI_CPU_REQUEST
        if real in (MEMORY, BATCH_MEMORY):
            return DEFAULT_MEMORY_REQUEST
        return 0
    # cpu values are already milli-cores and the rest Value(), so one formula serves both branches of the Go
    # code; the float arithmetic is Go's (float64(q) * float64(factor) / 100, then math.Round).
    estimated = go_round(float(quantity) * float(factor) / 100)
    if limit > 0 and estimated > limit:
        estimated = limit
    return estimated


def _reject_non_integer(text: str) -> Any:
    raise ValueError(f"not an integer: {text}")


def _int64(text: str) -> int:
    value = int(text)
    if not -(2**63) <= value <= _INT64_MAX:
        raise ValueError(f"out of int64 range: {text}")
    return value


def custom_scaling_factors(annotations: Mapping[str, str]) -> dict[str, int] | None:
    """The pod's ``load-estimated-scaling-factors`` annotation as ``{resource: percent}``; None if absent or
    not a JSON object of integers (Go's ``json.Unmarshal`` into ``map[ResourceName]int64`` fails then)."""
    text = annotations.get(ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS, "")
    if not text:
        return None
    try:
        data = json.loads(
            text, parse_float=_reject_non_integer, parse_int=_int64, parse_constant=_reject_non_integer
        )
    except ValueError:
        return None
    if data is None:
        return {}
    if not isinstance(data, dict):
        return None
    out: dict[str, int] = {}
    for key, value in data.items():
        if value is None:
            out[key] = 0  # JSON null decodes to the zero value
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = value
        else:
            return None
    return out


def custom_estimated_seconds(annotations: Mapping[str, str], key: str) -> int:
    """An estimation-seconds annotation as Go's ``strconv.ParseInt`` reads it; -1 when absent or invalid."""
    value = parse_int(annotations.get(key, ""))
    return -1 if value is None else value


SECONDS_AFTER_SCHEDULED_ANNOTATION: Final = ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_SCHEDULED
SECONDS_AFTER_INITIALIZED_ANNOTATION: Final = ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED


def _raw_allocatable(annotations: Mapping[str, str]) -> dict[str, int] | None:
    """``node.koordinator.sh/raw-allocatable`` parsed, or None when absent or unreadable."""
    text = annotations.get(ANNOTATION_NODE_RAW_ALLOCATABLE)
    if text is None:
        return None
    try:
        # Numbers stay text so that 1.5 is parsed as the quantity "1.5", not through a float.
        data = json.loads(text, parse_float=str, parse_int=str)
        return parse_resource_list(data, path=ANNOTATION_NODE_RAW_ALLOCATABLE) if data is not None else None
    except (ValueError, QuantityError):
        return None


def load_estimator(args: LoadAwareSchedulingArgs, handle: Handle | None = None) -> Estimator:
    """The estimator ``args.estimator`` names (an entry point of ``koord.scheduler.loadaware.estimators``).

    "" and ``defaultEstimator`` need no lookup. An unknown name falls back to the default estimator, as
    Koordinator's ``NewEstimator`` does, with a warning so the typo is not silent.
    """
    name = args.estimator
    if name in ("", DEFAULT_ESTIMATOR):
        return DefaultEstimator(args, handle)
    for ep in metadata.entry_points(group=ESTIMATOR_GROUP):
        if ep.name == name:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, Estimator)):
                raise TypeError(f"estimator entry point {name!r} ({ep.value}) is not an Estimator subclass")
            return cls(args, handle)
    log.warning("LoadAwareScheduling: unknown estimator %r, using %s", name, DEFAULT_ESTIMATOR)
    return DefaultEstimator(args, handle)
