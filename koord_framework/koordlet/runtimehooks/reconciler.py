"""The reconciler mode: the same hooks applied to what already runs, every interval and on rule changes.

Koordinator's reconciler re-applies the hooks' values to running pods and containers so that a value the
runtime lost (a restart, a rule change, a container created while the koordlet was down) converges. Here
the levels are

* **kubeQOS**: the three QoS dirs, through ``reconcile_kube_qos``;
* **pod**: every active pod's cgroup dir, through the ``PreRunPodSandbox`` hooks;
* **container**: every container with a cgroup dir, through the ``PreUpdateContainerResources`` hooks, with
  ``request.resources`` from the container's spec as the kubelet set it (CPU normalization scales it).

The responses become ``CgroupUpdate``s written through the koordlet's ``ResourceExecutor`` (cacheable: an
unchanged value is not rewritten within the executor's force-update window); a pod and its containers are
one leveled update, so a pod never ends up tighter than its containers. ``tick(now)`` does one round when
due; nothing runs in a thread of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from koord_framework.api.qos import KubeQoS
from koord_framework.koordlet.cgroups import (
    CPU_BVT_WARP_NS,
    CPU_CFS_PERIOD,
    CPU_CFS_QUOTA,
    CPU_IDLE,
    CPU_SHARES,
    CPUSET_CPUS,
    MEMORY_LIMIT,
)
from koord_framework.koordlet.executor import CgroupUpdate, ResourceExecutor, WriteResult
from koord_framework.koordlet.runtimehooks.manager import HookFailed, HookFailure, HookManager
from koord_framework.koordlet.runtimehooks.protocol import (
    ContainerMeta,
    ContainerRequest,
    ContainerResources,
    KubeQOSRequest,
    PodSandboxMeta,
    PodSandboxRequest,
    Stage,
)
from koord_framework.koordlet.states import ContainerMeta as StateContainer
from koord_framework.koordlet.states import NodeState, PodMeta

log = logging.getLogger(__name__)

__all__ = [
    "ReconcileReport",
    "Reconciler",
    "container_request",
    "pod_request",
    "resource_updates",
    "spec_resources",
]

OWNER = "RuntimeHooksReconciler"


def resource_updates(parent_dir: str, res: ContainerResources, reason: str) -> list[CgroupUpdate]:
    """The cgroup writes a response's resources ask for on ``parent_dir`` (None fields write nothing; an
    empty cpuset means "do not pin" and writes nothing either)."""
    pairs: list[tuple[str, object]] = [
        (CPUSET_CPUS, res.cpuset_cpus or None),
        (CPU_SHARES, res.cpu_shares),
        (CPU_CFS_PERIOD, res.cpu_period),
        (CPU_CFS_QUOTA, res.cpu_quota),
        (MEMORY_LIMIT, res.memory_limit_in_bytes),
        (CPU_BVT_WARP_NS, res.cpu_bvt),
        (CPU_IDLE, res.cpu_idle),
    ]
    return [
        CgroupUpdate(name, parent_dir, str(value), reason=reason, owner=OWNER)
        for name, value in pairs
        if value is not None
    ]


def pod_request(pod: PodMeta) -> PodSandboxRequest:
    """The ``PreRunPodSandbox`` request of a running pod."""
    info = pod.pod
    return PodSandboxRequest(
        pod_meta=PodSandboxMeta(info.name, info.uid, info.namespace),
        labels=dict(info.labels),
        annotations=dict(info.annotations),
        cgroup_parent=pod.cgroup_dir,
        resources=spec_resources(info.requests, info.limits),
    )


def milli_cpu_to_shares(milli: int) -> int:
    """Kubernetes' ``MilliCPUToShares``: 2 for nothing, else milli x 1024 / 1000 within [2, 262144]."""
    return 2 if milli <= 0 else min(max(milli * 1024 // 1000, 2), 262144)


def milli_cpu_to_quota(milli: int) -> int:
    """Koordinator's ``MilliCPUToQuota``: -1 for nothing, else at least 1000 us per 100 ms period."""
    return -1 if milli <= 0 else max(milli * 100, 1000)


def spec_resources(requests: Mapping[str, int], limits: Mapping[str, int] | None) -> ContainerResources:
    """What the kubelet gave the cgroup from the spec (Koordinator's ``Resources.FromPod`` /
    ``FromContainer``): the reconciler's ``request.resources``. Read from the spec, not from the cgroup, so
    that a hook scaling a value (CPU normalization) never scales its own earlier result."""
    res = ContainerResources(cpu_shares=milli_cpu_to_shares(int(requests.get("cpu", 0))))
    if limits is not None:
        res.cpu_quota = milli_cpu_to_quota(int(limits.get("cpu", 0)))
        memory = int(limits.get("memory", 0))
        res.memory_limit_in_bytes = memory if memory > 0 else -1
    return res


def container_request(pod: PodMeta, container: StateContainer) -> ContainerRequest:
    """The ``PreUpdateContainerResources`` request of a running container."""
    info = pod.pod
    spec = container.info
    return ContainerRequest(
        pod_meta=PodSandboxMeta(info.name, info.uid, info.namespace),
        container_meta=ContainerMeta(container.name, container.container_id),
        pod_labels=dict(info.labels),
        pod_annotations=dict(info.annotations),
        cgroup_parent=pod.cgroup_dir,
        container_cgroup=container.cgroup_dir,
        resources=spec_resources(spec.requests, spec.limits or None) if spec is not None else None,
    )


@dataclass(slots=True)
class ReconcileReport:
    """What one reconcile round did."""

    time: float
    reason: str
    writes: list[WriteResult] = field(default_factory=list)
    failures: list[HookFailure] = field(default_factory=list)


class Reconciler:
    """Applies the hooks to running pods and containers every ``interval_seconds`` (default 10 s, as
    Koordinator's ``--runtime-hooks-reconcile-interval``) and at once when a hook's rule changed."""

    def __init__(
        self,
        manager: HookManager,
        executor: ResourceExecutor,
        state_provider: Callable[[], NodeState],
        *,
        interval_seconds: float = 10.0,
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be > 0, got {interval_seconds}")
        self.manager = manager
        self.executor = executor
        self.state_provider = state_provider
        self.interval_seconds = interval_seconds
        self._last: float | None = None
        self._dirty: set[str] = set()

    def pod_event(self, uid: str) -> None:
        """A pod was added or updated: reconcile it at the next tick, whatever the interval says."""
        self._dirty.add(uid)

    def tick(self, now: float) -> ReconcileReport | None:
        """Re-evaluate the rules; reconcile everything when due or a rule changed, else only dirty pods."""
        state = self.state_provider()
        changed = self.manager.update_rules(state)
        due = self._last is None or now - self._last >= self.interval_seconds
        if changed or due:
            self._last = now
            self._dirty.clear()
            reason = f"rule changed: {', '.join(changed)}" if changed else "interval"
            return self.reconcile(state, now, reason=reason)
        if self._dirty:
            uids, self._dirty = self._dirty, set()
            return self.reconcile(state, now, reason="pod event", only=uids)
        return None

    def reconcile(
        self, state: NodeState, now: float, *, reason: str, only: set[str] | None = None
    ) -> ReconcileReport:
        report = ReconcileReport(now, reason)
        if only is None:
            self._kube_qos(report)
        for pod in state.pods:
            if not pod.is_active or not pod.cgroup_dir or (only is not None and pod.uid not in only):
                continue
            self._pod(pod, report)
        return report

    def _kube_qos(self, report: ReconcileReport) -> None:
        layout = self.executor.layout
        updates: list[CgroupUpdate] = []
        for qos in (KubeQoS.GUARANTEED, KubeQoS.BURSTABLE, KubeQoS.BEST_EFFORT):
            qos_dir = layout.qos_dir(qos)
            try:
                result = self.manager.run_kube_qos(KubeQOSRequest(qos.value, qos_dir))
            except HookFailed as failed:
                report.failures.append(failed.failure)
                continue
            report.failures.extend(result.failures)
            updates += resource_updates(qos_dir, result.response.resources, f"kubeQOS {qos.value}")
        report.writes += self.executor.update_batch(updates, cacheable=True)

    def _pod(self, pod: PodMeta, report: ReconcileReport) -> None:
        try:
            pod_result = self.manager.run_pod(Stage.PRE_RUN_POD_SANDBOX, pod_request(pod))
        except HookFailed as failed:
            report.failures.append(failed.failure)
            return
        report.failures.extend(pod_result.failures)
        pod_updates = resource_updates(pod.cgroup_dir, pod_result.response.resources, f"pod {pod.key}")
        container_updates: list[CgroupUpdate] = []
        for c in pod.containers:
            if not c.cgroup_dir:
                continue
            try:
                result = self.manager.run_container(
                    Stage.PRE_UPDATE_CONTAINER_RESOURCES, container_request(pod, c)
                )
            except HookFailed as failed:
                report.failures.append(failed.failure)
                continue
            report.failures.extend(result.failures)
            container_updates += resource_updates(
                c.cgroup_dir, result.response.resources, f"container {pod.key}/{c.name}"
            )
        if pod_updates or container_updates:
            report.writes += self.executor.leveled_update([pod_updates, container_updates], cacheable=True)
