"""The assign cache: per node, the pods placed there, the latest NodeMetric, and running sums.

NodeMetric lags: a pod bound a few seconds ago is not in its node's reported usage yet. So the plugin keeps,
per node, every assigned pod (bound, or reserved by this scheduler) with its *estimated* usage, and adds to
the reported usage the part of each young or unreported pod's estimate that the report does not cover yet.
The sums are kept incrementally (Koordinator's ``podAssignCache``): adding or removing a pod touches only its
own vector; a NodeMetric update rebuilds that one node's sums.

Per node (``NodeLoad``), with ``u`` a pod's reported usage and ``e`` its estimate:

* ``node_delta``: sum of max(0, e - u) over pods that *should* still be estimated (unreported, scheduled
  within the last report interval before the update, or inside their forced-estimation window);
* ``node_estimated``: sum of full estimates of all pods (the fallback when no usage vector exists);
* ``prod_usage`` / ``prod_delta``: the same for prod pods that both the pod and koordlet call prod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koord_framework.api.constants import (
    ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED,
    ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_SCHEDULED,
)
from koord_framework.api.objects import PodInfo
from koord_framework.api.qos import PriorityClass
from koord_plugin_loadaware.args import LoadAwareSchedulingArgs
from koord_plugin_loadaware.estimator import Estimator, custom_estimated_seconds
from koord_plugin_loadaware.nodemetric import MetricReport
from koord_plugin_loadaware.vectors import Vec, Vectorizer, add_delta, add_into, sub_delta, sub_into

__all__ = ["AssignCache", "AssignedPod", "NodeLoad"]

log = logging.getLogger(__name__)

ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"
NEVER = float("-inf")
"""Go's zero ``time.Time``: before every real timestamp."""


@dataclass(slots=True)
class AssignedPod:
    """One pod counted on a node. Never modified once in the cache: a change replaces the entry. (Not a
    frozen dataclass because a frozen one costs four times as much to build, and one is built per
    placement and per binding.)"""

    uid: str
    key: str
    """``namespace/name``: NodeMetric reports pods by name, not uid."""
    prod: bool
    estimated: Vec | None
    """None when the estimator predicts nothing for any tracked resource."""
    timestamp: float
    """PodScheduled transition time, else when the scheduler assigned it."""
    deadline: float | None
    """End of the forced-estimation window, if one applies."""
    signature: tuple[Any, ...]
    """What decides the estimate and timestamps; an update that keeps it is ignored (as Koordinator does)."""
    after_scheduled: int
    """Forced-estimation seconds after PodScheduled (-1: none), resolved from annotations and args."""
    after_initialized: int
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    """The metadata the estimate was computed from (a bind that keeps it keeps the estimate)."""


def pod_signature(pod: PodInfo) -> tuple[Any, ...]:
    """The spec and conditions Koordinator compares before re-assigning an updated pod."""
    return (
        pod.node_name,
        pod.containers,
        pod.overhead,
        pod.priority,
        pod.scheduled_time,
        pod.initialized_time,
    )


class NodeLoad:
    """One node's assigned pods, latest NodeMetric and running sums."""

    __slots__ = (
        "metric",
        "name",
        "node_delta",
        "node_estimated",
        "pods",
        "prod_delta",
        "prod_usage",
        "report_interval",
        "update_time",
        "version",
    )

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.pods: dict[str, AssignedPod] = {}
        self.metric: MetricReport | None = None
        self.update_time = NEVER
        """The last non-null updateTime seen; kept when a later report lacks one (as Koordinator does)."""
        self.report_interval = 0.0
        self.node_delta: Vec = [0] * size
        self.prod_delta: Vec = [0] * size
        self.node_estimated: Vec = [0] * size
        self.prod_usage: Vec = [0] * size
        self.version = 0

    # --- pods -----------------------------------------------------------------------------------------
    def _should_estimate(self, pod: AssignedPod, usage: Vec | None) -> bool:
        return (
            usage is None
            or self.update_time - self.report_interval < pod.timestamp
            or (pod.deadline is not None and pod.deadline > self.update_time)
        )

    def _apply(self, pod: AssignedPod, sign: int) -> None:
        """Add (sign 1) or remove (sign -1) one pod's contribution; removal exactly reverses addition."""
        metric = self.metric
        if metric is None:
            return
        usage = metric.pod_usages.get(pod.key)
        active_prod = pod.prod and pod.key in metric.prod_pods
        if active_prod and usage is not None:
            (add_into if sign > 0 else sub_into)(self.prod_usage, usage)
        est = pod.estimated
        if est is None:
            return
        should = self._should_estimate(pod, usage)
        delta = add_delta if sign > 0 else sub_delta
        if should:
            delta(self.node_delta, est, usage)
        (add_into if sign > 0 else sub_into)(self.node_estimated, est)
        if not pod.prod:
            return
        if not active_prod and usage is not None:
            # Reported usage of a pod koordlet does not call prod is not in prod_usage: estimate it fully.
            usage, should = None, True
        if should:
            delta(self.prod_delta, est, usage)

    def put_pod(self, pod: AssignedPod) -> None:
        old = self.pods.get(pod.uid)
        if old is not None:
            self._apply(old, -1)
        self.pods[pod.uid] = pod
        self._apply(pod, 1)
        self.version += 1

    def retime_pod(self, pod: AssignedPod) -> bool:
        """Replace the entry of ``pod.uid`` by ``pod``, which differs from it only in its timestamps
        (``timestamp``, ``deadline``, ``signature``); True when the running sums changed.

        Timestamps only decide whether the pod is still estimated (``_should_estimate``); when that answer
        stays the same, removing and re-adding the pod would subtract and add back the very same amounts.
        """
        old = self.pods[pod.uid]
        self.pods[pod.uid] = pod
        self.version += 1
        metric = self.metric
        if metric is None or pod.estimated is None:
            return False  # no contribution depends on the timestamps
        usage = metric.pod_usages.get(pod.key)
        if self._should_estimate(old, usage) == self._should_estimate(pod, usage):
            return False
        self._apply(old, -1)
        self._apply(pod, 1)
        return True

    def remove_pod(self, uid: str) -> AssignedPod | None:
        old = self.pods.pop(uid, None)
        if old is not None:
            self._apply(old, -1)
            self.version += 1
        return old

    # --- metric ---------------------------------------------------------------------------------------
    def set_metric(self, metric: MetricReport | None, sys_in_prod: bool) -> None:
        self.metric = metric
        self.version += 1
        if metric is None:
            return
        size = len(self.node_delta)
        self.report_interval = metric.report_interval
        if metric.update_time is not None:
            self.update_time = metric.update_time
        self.prod_usage = (
            list(metric.system_usage) if sys_in_prod and metric.system_usage is not None else [0] * size
        )
        self.node_delta = [0] * size
        self.prod_delta = [0] * size
        self.node_estimated = [0] * size
        for pod in self.pods.values():
            self._apply(pod, 1)

    @property
    def empty(self) -> bool:
        return self.metric is None and not self.pods

    # --- reading --------------------------------------------------------------------------------------
    def existing_estimate(self, prod: bool, agg_type: str = "", agg_window_ns: int = 0) -> Vec | None:
        """Koordinator's ``GetNodeMetricAndEstimatedOfExisting``: usage of the pods already here, reported
        plus the not-yet-reported estimates. None when the node has no NodeMetric."""
        metric = self.metric
        if metric is None:
            return None
        if prod:
            return [a + b for a, b in zip(self.prod_usage, self.prod_delta)]
        base = metric.aggregated_usage(agg_type, agg_window_ns) if agg_type else metric.node_usage
        if base is None:
            return list(self.node_estimated)
        return [a + b for a, b in zip(base, self.node_delta)]


def _deadline(
    after_scheduled: int, after_initialized: int, initialized_time: float | None, timestamp: float
) -> float | None:
    """End of the forced-estimation window (Koordinator's ``shouldEstimatePodDeadline``)."""
    # Once initialized, the init-based window wins: a long after-scheduled window may exist only to cover
    # slow init containers.
    if after_initialized > 0 and initialized_time is not None:
        return initialized_time + after_initialized
    if after_scheduled > 0:
        return timestamp + after_scheduled
    return None


class AssignCache:
    """Every node's ``NodeLoad``, fed by pod and NodeMetric events and by Reserve/Unreserve.

    ``on_change(node_name)`` is called after every change to a node, so the plugin can refresh that node's
    row of its NumPy columns.
    """

    def __init__(
        self,
        args: LoadAwareSchedulingArgs,
        vectorizer: Vectorizer,
        estimator: Estimator,
        now: Callable[[], float],
        on_change: Callable[[str], None] = lambda _name: None,
    ) -> None:
        self.args = args
        self.vectorizer = vectorizer
        self.estimator = estimator
        self.now = now
        self.on_change = on_change
        self.nodes: dict[str, NodeLoad] = {}
        self._pod_node: dict[str, str] = {}
        """uid -> node the pod is cached on, so an update or delete finds it without a scan."""

    def __iter__(self) -> Iterator[NodeLoad]:
        return iter(self.nodes.values())

    def get(self, node_name: str) -> NodeLoad | None:
        return self.nodes.get(node_name)

    @property
    def pod_count(self) -> int:
        return len(self._pod_node)

    def _node(self, name: str) -> NodeLoad:
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = NodeLoad(name, len(self.vectorizer))
        return node

    def _cleanup(self, node: NodeLoad) -> None:
        if node.empty:
            self.nodes.pop(node.name, None)

    # --- pods -----------------------------------------------------------------------------------------
    def estimate(self, pod: PodInfo) -> Vec | None:
        vec = self.vectorizer.to_vec(self.estimator.estimate_pod(pod))
        return vec if any(vec) else None

    def assign(self, node_name: str, pod: PodInfo, estimated: Vec | None = None) -> None:
        """Count ``pod`` on ``node_name`` (replacing an earlier entry of the same uid there).

        ``estimated`` is the pod's estimate vector when the caller already has it (Reserve, from PreFilter).
        """
        if not node_name or pod.is_terminal or pod.annotations.get(ANNOTATION_RESERVE_POD) == "true":
            return
        previous = self._pod_node.get(pod.uid)
        if previous is not None and previous != node_name:
            self.unassign(previous, pod.uid)
        timestamp = pod.scheduled_time if pod.scheduled_time is not None else self.now()
        after_scheduled, after_initialized = self._estimation_seconds(pod)
        entry = AssignedPod(
            uid=pod.uid,
            key=pod.key,
            prod=pod.priority_class is PriorityClass.PROD,
            estimated=self.estimate(pod)
            if estimated is None
            else (list(estimated) if any(estimated) else None),
            timestamp=timestamp,
            deadline=_deadline(after_scheduled, after_initialized, pod.initialized_time, timestamp),
            signature=pod_signature(pod),
            after_scheduled=after_scheduled,
            after_initialized=after_initialized,
            labels=pod.labels,
            annotations=pod.annotations,
        )
        self._node(node_name).put_pod(entry)
        self._pod_node[pod.uid] = node_name
        self.on_change(node_name)

    def rebind(
        self,
        uid: str,
        node_name: str,
        scheduled_time: float | None,
        initialized_time: float | None,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
    ) -> bool:
        """A pod this scheduler reserved on ``node_name`` is now bound there with the same spec.

        Koordinator re-assigns it (spec.nodeName and the PodScheduled condition changed), which changes only
        its timestamps: the estimate depends on spec and metadata, both unchanged. Doing just that saves
        re-reading the whole pod on every binding. Returns False when the fast path does not apply.
        """
        node = self.nodes.get(node_name)
        entry = node.pods.get(uid) if node is not None else None
        if node is None or entry is None or entry.labels != labels or entry.annotations != annotations:
            return False
        timestamp = scheduled_time if scheduled_time is not None else self.now()
        signature = (node_name, *entry.signature[1:4], scheduled_time, initialized_time)
        if signature == entry.signature:
            return True
        deadline = _deadline(entry.after_scheduled, entry.after_initialized, initialized_time, timestamp)
        retimed = AssignedPod(
            uid=entry.uid,
            key=entry.key,
            prod=entry.prod,
            estimated=entry.estimated,
            timestamp=timestamp,
            deadline=deadline,
            signature=signature,
            after_scheduled=entry.after_scheduled,
            after_initialized=entry.after_initialized,
            labels=entry.labels,
            annotations=entry.annotations,
        )
        if node.retime_pod(retimed):
            self.on_change(node_name)
        return True

    def unassign(self, node_name: str, uid: str) -> None:
        if not node_name:
            return
        node = self.nodes.get(node_name)
        if node is None or node.remove_pod(uid) is None:
            return
        if self._pod_node.get(uid) == node_name:
            del self._pod_node[uid]
        self._cleanup(node)
        self.on_change(node_name)

    def _estimation_seconds(self, pod: PodInfo) -> tuple[int, int]:
        """(after PodScheduled, after Initialized) forced-estimation seconds; -1 when not set."""
        after_scheduled = after_initialized = -1
        if self.args.allow_customize_estimation:
            after_scheduled = custom_estimated_seconds(
                pod.annotations, ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_SCHEDULED
            )
            after_initialized = custom_estimated_seconds(
                pod.annotations, ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED
            )
        if after_scheduled < 0 and self.args.estimated_seconds_after_pod_scheduled is not None:
            after_scheduled = self.args.estimated_seconds_after_pod_scheduled
        if after_initialized < 0 and self.args.estimated_seconds_after_initialized is not None:
            after_initialized = self.args.estimated_seconds_after_initialized
        return after_scheduled, after_initialized

    def node_of(self, uid: str) -> str:
        """The node a pod is cached on ("" when it is not cached)."""
        return self._pod_node.get(uid, "")

    def cached(self, uid: str) -> AssignedPod | None:
        node_name = self._pod_node.get(uid)
        if node_name is None:
            return None
        node = self.nodes.get(node_name)
        return node.pods.get(uid) if node is not None else None

    def on_pod_add(self, pod: PodInfo) -> None:
        self.assign(pod.node_name, pod)

    def on_pod_update(self, old: PodInfo | None, pod: PodInfo) -> None:
        """Koordinator's ``OnUpdate``: move, drop when terminated, re-estimate on spec/condition changes."""
        if old is not None and old.node_name and old.node_name != pod.node_name:
            self.unassign(old.node_name, pod.uid)
        current = self.cached(pod.uid) if pod.node_name else None
        if current is not None and self._pod_node.get(pod.uid) != pod.node_name:
            current = None
        if current is None:
            self.assign(pod.node_name, pod)
        elif pod.is_terminal:
            self.unassign(pod.node_name, pod.uid)
        elif current.signature != pod_signature(pod):
            self.assign(pod.node_name, pod)

    def on_pod_delete(self, pod: PodInfo) -> None:
        node_name = pod.node_name or self._pod_node.get(pod.uid, "")
        self.unassign(node_name, pod.uid)

    # --- NodeMetric -----------------------------------------------------------------------------------
    def set_metric(self, name: str, metric: MetricReport | None) -> None:
        if metric is None:
            node = self.nodes.get(name)
            if node is None:
                return
            node.set_metric(None, self.args.prod_usage_include_sys)
            self._cleanup(node)
        else:
            self._node(name).set_metric(metric, self.args.prod_usage_include_sys)
        self.on_change(name)

    def assigned(self, node_name: str) -> Sequence[AssignedPod]:
        node = self.nodes.get(node_name)
        return list(node.pods.values()) if node is not None else []
