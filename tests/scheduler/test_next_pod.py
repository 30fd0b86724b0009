"""``NextPodPlugin``: a plugin may name the next pod to schedule ahead of the queue (Koordinator's NextPod).

The named pod is taken out of the queue wherever it waits (its own PreEnqueue gate lifted); a pod held back
by another plugin's PreEnqueue, or one the queue does not hold, is reported to ``next_pod_skipped`` instead.
Plus the two other small scheduler behaviours gang scheduling relies on: a node added counts as progress for
the stall guard, and ``ReportingPlugin`` rows reach the simulation result.
"""

from __future__ import annotations

from typing import Any, ClassVar

from koord_framework.api.objects import PodInfo
from koord_framework.plugin import NoArgs, PluginArgs
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import (
    FilterPlugin,
    NextPodPlugin,
    PreEnqueuePlugin,
    ReportingPlugin,
    ReservePlugin,
    SchedulerPlugin,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Code, Status
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness


class Chooser(SchedulerPlugin, PreEnqueuePlugin, NextPodPlugin, ReportingPlugin):
    """Gates every pod labelled ``gated``; names the pods of ``queue`` (by name) in order."""

    name: ClassVar[str] = "Chooser"
    Args: ClassVar[type[PluginArgs]] = NoArgs
    report_columns: ClassVar[tuple[str, ...]] = ("pod",)
    order: ClassVar[list[str]] = []
    uids: ClassVar[dict[str, str]] = {}
    skipped: ClassVar[list[str]] = []
    picked: ClassVar[list[str]] = []

    def pre_enqueue(self, pod: PodInfo) -> Status:
        self.uids[pod.name] = pod.uid
        if pod.labels.get("gated") == "me":
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("gated by Chooser",))
        return Status()

    def next_pod(self) -> str | None:
        while self.order:
            name = self.order.pop(0)
            if name in self.uids:
                self.picked.append(name)
                return self.uids[name]
        return None

    def next_pod_skipped(self, uid: str) -> None:
        self.skipped.append(uid)

    def report(self, explain: bool) -> list[dict[str, Any]]:
        return [{"pod": name} for name in self.picked]


class Recorder(SchedulerPlugin, FilterPlugin, ReservePlugin):
    """Records the order pods are reserved in; a node passes when the pod's cpu fits what is free."""

    name: ClassVar[str] = "Recorder"
    Args: ClassVar[type[PluginArgs]] = NoArgs
    reserved: ClassVar[list[str]] = []

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        free = node.allocatable.get("cpu", 0) - node.requested.get("cpu", 0)
        if pod.requests.get("cpu", 0) > free:
            return Status(Code.UNSCHEDULABLE, ("Insufficient cpu",))
        return Status()

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        self.reserved.append(pod.name)
        return Status()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None


class Other(SchedulerPlugin, PreEnqueuePlugin):
    name: ClassVar[str] = "Other"
    Args: ClassVar[type[PluginArgs]] = NoArgs

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if pod.labels.get("gated") == "other":
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("gated by Other",))
        return Status()


def test_next_pod_takes_the_named_pod_past_its_own_gate_but_not_another_plugins() -> None:
    Chooser.order[:] = ["mine", "theirs", "plain"]
    Chooser.uids.clear()
    Chooser.skipped.clear()
    Chooser.picked.clear()
    Recorder.reserved.clear()
    h = SchedulerHarness([Chooser, Other, Recorder])
    h.add(
        make_node("n1"),
        make_pod("plain", cpu="100m"),
        make_pod("mine", cpu="100m", labels={"gated": "me"}),
        make_pod("theirs", cpu="100m", labels={"gated": "other"}),
    )
    h.run_until_idle()
    bound = {p["metadata"]["name"] for p in h.cluster.list("Pod")[0] if p["spec"].get("nodeName")}
    assert bound == {"mine", "plain"}
    assert Recorder.reserved == ["mine", "plain"], "named pods go first, the asking plugin's own gate lifted"
    assert Chooser.skipped == [Chooser.uids["theirs"]], "held back by Other: reported, not taken"


def test_reporting_plugins_rows_reach_the_simulation_result(tmp_path: Any) -> None:
    from koord_framework.registry import PluginRegistry
    from koord_framework.scheduler.simulate import simulate
    from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort

    Chooser.order[:] = ["a"]
    Chooser.uids.clear()
    Chooser.picked.clear()
    (tmp_path / "cluster.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus:\n"
        "  allocatable: {cpu: '4', memory: 8Gi, pods: '110'}\n"
        "  conditions: [{type: Ready, status: 'True'}]\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: default}\n"
        "spec:\n  containers: [{name: c}]\n"
    )
    (tmp_path / "profile.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "  - schedulerName: default-scheduler\n    plugins:\n"
        "      multiPoint: {enabled: [{name: Chooser}, {name: PrioritySort}, {name: DefaultBinder}]}\n"
    )
    registry = PluginRegistry.from_classes(
        "koord.scheduler.plugins", [Chooser, HarnessQueueSort, HarnessBinder]
    )
    result, _ = simulate([tmp_path / "cluster.yaml"], tmp_path / "profile.yaml", now=0.0, registry=registry)
    assert result.plugins == {"Chooser": [{"pod": "a"}]}
    assert result.to_dict()["plugins"] == {"Chooser": [{"pod": "a"}]}


def test_a_node_added_gives_stalled_pods_their_retries_back() -> None:
    h = SchedulerHarness([Recorder])
    h.add(make_node("small", cpu="1"), make_pod("big", cpu="2"))
    h.run_until_idle()
    assert h.result(make_pod("big")).outcome == "Unschedulable"
    h.add(make_node("large", cpu="4"))
    h.run_until_idle()
    assert h.result(make_pod("big")).node == "large"
