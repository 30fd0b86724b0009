"""DefaultPreBind (Koordinator): applies every PreBind plugin's pod changes as one merge patch.

Koordinator's PreBind plugins only mutate a copy of the pod; its DefaultPreBind then sends a single patch,
so a pod never carries half of its allocation annotations. Here the copy is ``state.pod_mutation``; this
plugin patches it onto the pod and clears it. Conflicts and throttling are retried a few times, as
Koordinator's ``RetryOnConflictOrTooManyRequests`` does; a pod that turns out to be terminating fails the
PreBind so its reservations are released.
"""

from __future__ import annotations

from koord_framework.api.objects import PodInfo
from koord_framework.errors import ClusterError, ConflictError, TooManyRequestsError
from koord_framework.scheduler.cycle_state import PodMutation
from koord_framework.scheduler.interface import CycleState, PreBindPlugin, SchedulerPlugin
from koord_framework.scheduler.status import Status

RETRIES = 5


class DefaultPreBind(SchedulerPlugin, PreBindPlugin):
    name = "DefaultPreBind"

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        mutation = state.pod_mutation
        if mutation.is_empty():
            return Status.success()
        patch = mutation.as_merge_patch()
        last: ClusterError | None = None
        for _ in range(RETRIES):
            try:
                patched = self.handle.cluster.patch("Pod", pod.name, pod.namespace, patch)
                break
            except (ConflictError, TooManyRequestsError) as err:
                last = err
            except ClusterError as err:
                return Status.as_error(err)
        else:
            assert last is not None
            return Status.as_error(last)
        if (patched.get("metadata") or {}).get("deletionTimestamp"):
            return Status.as_error(f"pod {pod.key} is being deleted")
        state.pod_mutation = PodMutation()
        return Status.success()
