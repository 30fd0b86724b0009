"""Helpers for testing and benchmarking gang scheduling: builders, stand-in plugins, the all-or-nothing check.

``pod_group``/``member`` build PodGroups and their pods; ``Fit`` stands in for NodeResourcesFit (a node passes
when the pod's cpu and memory requests fit in what its pods leave free) and ``Hold`` for a PreEnqueue plugin
that holds pods back, so that tests need no other plugin distribution. ``all_or_nothing_violations`` is the
invariant of Strict gangs: every gang has at least its minimum of members bound, or none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from koord_framework.api.objects import PodInfo
from koord_framework.api.strconv import parse_int
from koord_framework.plugin import NoArgs, PluginArgs
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import FilterPlugin, PreEnqueuePlugin, SchedulerPlugin
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Code, Status
from koord_framework.testing import make_pod
from koord_plugin_coscheduling.constants import (
    ANNOTATION_GANG_MIN_NUM,
    ANNOTATION_GANG_MODE,
    GANG_MODE_NON_STRICT,
    GANG_MODE_STRICT,
)
from koord_plugin_coscheduling.gang import gang_name_of

__all__ = ["Fit", "Hold", "all_or_nothing_violations", "member", "pod_group"]


class Fit(SchedulerPlugin, FilterPlugin):
    name: ClassVar[str] = "Fit"
    Args: ClassVar[type[PluginArgs]] = NoArgs

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        for resource in ("cpu", "memory"):
            want = pod.requests.get(resource, 0)
            free = node.allocatable.get(resource, 0) - node.requested.get(resource, 0)
            if want > free:
                return Status(Code.UNSCHEDULABLE, (f"Insufficient {resource}",))
        return Status()


class Hold(SchedulerPlugin, PreEnqueuePlugin):
    """Holds back pods labelled ``hold=true`` at PreEnqueue (as a quota or a scheduling gate would)."""

    name: ClassVar[str] = "Hold"
    Args: ClassVar[type[PluginArgs]] = NoArgs

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if pod.labels.get("hold") == "true":
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("held",))
        return Status()


def pod_group(
    name: str,
    min_member: int,
    namespace: str = "default",
    timeout: int | None = 10,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": spec,
    }


def member(
    name: str, group: str, cpu: str = "1", namespace: str = "default", **kwargs: Any
) -> dict[str, Any]:
    labels = {"pod-group.scheduling.sigs.k8s.io": group, **(kwargs.pop("labels", None) or {})}
    return make_pod(name, namespace, cpu=cpu, memory="1Gi", labels=labels, **kwargs)


def all_or_nothing_violations(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """Strict gangs (PodGroups and annotation gangs, Strict unless the mode says NonStrict) that have some but
    fewer than their minimum of members bound. ``objects`` are the cluster's Pods and PodGroups."""
    minimum: dict[str, int] = {}
    strict: dict[str, bool] = {}
    bound: dict[str, int] = {}
    for obj in objects:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        ann = meta.get("annotations") or {}
        if obj.get("kind") == "PodGroup":
            gid = f"{ns}/{meta.get('name')}"
            minimum[gid] = int((obj.get("spec") or {}).get("minMember") or 0)
            strict[gid] = ann.get(ANNOTATION_GANG_MODE, GANG_MODE_STRICT) != GANG_MODE_NON_STRICT
        elif obj.get("kind") == "Pod":
            name = gang_name_of(meta.get("labels") or {}, ann)
            if not name:
                continue
            gid = f"{ns}/{name}"
            if ANNOTATION_GANG_MIN_NUM in ann and gid not in minimum:
                value = parse_int(ann[ANNOTATION_GANG_MIN_NUM], 32)
                if value is not None:
                    minimum[gid] = value
                    strict[gid] = ann.get(ANNOTATION_GANG_MODE, GANG_MODE_STRICT) != GANG_MODE_NON_STRICT
            if (obj.get("spec") or {}).get("nodeName"):
                bound[gid] = bound.get(gid, 0) + 1
    return sorted(
        f"gang {gid}: {n} of minMember {minimum[gid]} bound"
        for gid, n in bound.items()
        if gid in minimum and strict.get(gid, True) and 0 < n < minimum[gid]
    )
