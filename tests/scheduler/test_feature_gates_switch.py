"""koord-scheduler's gates reach its frameworks (``--feature-gates`` -> ``Scheduler`` -> ``Framework``):
``SkipFilterWithNominatedPods`` runs the Filter with nominated pods in one pass, both ways."""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.api.objects import PodInfo
from koord_framework.featuregates import gates_for
from koord_framework.scheduler.status import Code, Status
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness


def _needs_nominee(p: Any, state: Any, pod: Any, node: Any) -> Status:
    """Fits only next to the nominated pod "nominee": the affinity-like case the second pass catches."""
    if any(other.name == "nominee" for other in node.pods.values()):
        return Status()
    return Status(Code.UNSCHEDULABLE, ("needs the nominee",))


@pytest.mark.parametrize(("gates", "fits"), [("", False), ("SkipFilterWithNominatedPods=true", True)])
def test_skip_filter_with_nominated_pods(fake_plugin: Any, gates: str, fits: bool) -> None:
    h = SchedulerHarness([fake_plugin("A", [], filter=_needs_nominee)])
    h.add(make_node("n1", cpu="8", memory="16Gi"))
    nominee = PodInfo.from_manifest(make_pod("nominee", priority=100))
    h.scheduler.queue.add_nominated(nominee, "n1")
    h.framework.feature_gates = gates_for("scheduler").parse(gates)
    pod = PodInfo.from_manifest(make_pod("p", priority=10))
    state, status, _ = h._pre_filter(pod)
    assert status.is_success
    got = h.framework.run_filter_with_nominated_pods(state, pod, h.node_info("n1"))
    assert got.is_success is fits


def test_scheduler_passes_its_gates_to_every_framework() -> None:
    from koord_framework.cluster.clock import VirtualClock
    from koord_framework.cluster.memory import MemoryCluster
    from koord_framework.scheduler.framework import PluginLayout
    from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler
    from koord_framework.testing.scheduler import HarnessBinder, HarnessQueueSort

    gates = gates_for("scheduler").parse("SkipFilterWithNominatedPods=true")
    spec = ProfileSpec("s", PluginLayout.every_point([HarnessQueueSort, HarnessBinder]), {})
    s = Scheduler(MemoryCluster(VirtualClock(0.0)), [spec], feature_gates=gates)
    assert s.frameworks["s"].feature_gates.enabled("SkipFilterWithNominatedPods")
    default = Scheduler(MemoryCluster(VirtualClock(0.0)), [spec])
    assert not default.frameworks["s"].feature_gates.enabled("SkipFilterWithNominatedPods")


def test_plugins_read_the_schedulers_gates_through_the_handle() -> None:
    """``Handle.feature_enabled``: the gates the plugins of every profile see, from their constructor on."""
    on = SchedulerHarness([], feature_gates="ElasticQuotaIgnorePodOverhead=true")
    assert on.scheduler.handles[on.profile_name].feature_enabled("ElasticQuotaIgnorePodOverhead")
    off = SchedulerHarness([])
    handle = off.scheduler.handles[off.profile_name]
    assert not handle.feature_enabled("ElasticQuotaIgnorePodOverhead")
    assert handle.feature_enabled("DynamicSchedulerCheck")  # Koordinator's default: on
    with pytest.raises(KeyError, match="NoSuchGate"):
        handle.feature_enabled("NoSuchGate")
