"""DefaultBinder: binds the pod through the cluster's ``pods/binding`` (kube-scheduler's default binder)."""

from __future__ import annotations

from koord_framework.api.objects import PodInfo
from koord_framework.errors import ClusterError
from koord_framework.scheduler.interface import BindPlugin, CycleState, SchedulerPlugin
from koord_framework.scheduler.status import Status


class DefaultBinder(SchedulerPlugin, BindPlugin):
    """A pod already bound elsewhere (``ConflictError``) or gone (``NotFoundError``) fails with Error: the
    framework then unreserves it and the queue retries it, as kube-scheduler does with a failed binding."""

    name = "DefaultBinder"

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        try:
            self.handle.cluster.bind(pod.namespace, pod.name, node_name, uid=pod.uid or None)
        except ClusterError as err:
            return Status.as_error(err)
        return Status.success()
