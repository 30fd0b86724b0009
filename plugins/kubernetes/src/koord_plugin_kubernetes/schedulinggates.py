"""SchedulingGates: a pod with ``spec.schedulingGates`` stays out of the active queue until they are removed."""  # noqa: E501

from __future__ import annotations

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.interface import (
    ClusterEvent,
    EnqueueExtensions,
    PreEnqueuePlugin,
    SchedulerPlugin,
)
from koord_framework.scheduler.status import Status


class SchedulingGates(SchedulerPlugin, PreEnqueuePlugin, EnqueueExtensions):
    """Part of kube-scheduler's default profile; rejects gated pods at PreEnqueue."""

    name = "SchedulingGates"

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.scheduling_gates:
            return Status.success()
        return Status.unresolvable(f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]")

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Update")]
