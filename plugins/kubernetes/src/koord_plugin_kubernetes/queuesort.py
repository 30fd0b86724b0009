"""PrioritySort: the active queue in descending pod priority, then by queue arrival (kube-scheduler's)."""

from __future__ import annotations

from koord_framework.scheduler.interface import QueuedPodInfo, QueueSortPlugin, SchedulerPlugin


class PrioritySort(SchedulerPlugin, QueueSortPlugin):
    """Higher ``spec.priority`` first (a pod without one counts as 0); equal priorities in arrival order."""

    name = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        p1, p2 = a.pod.priority_value, b.pod.priority_value
        return p1 > p2 or (p1 == p2 and a.timestamp < b.timestamp)

    def sort_key(self, info: QueuedPodInfo) -> tuple[int, float]:
        """``less`` as a key (``less(a, b)`` iff ``sort_key(a) < sort_key(b)``): the queue's heap then
        compares tuples in C instead of calling ``less`` about log2(queue length) times per pop. Priority is
        immutable and the arrival time changes only while the pod is out of the heap, so a key never goes
        stale."""
        return (-info.pod.priority_value, info.timestamp)
