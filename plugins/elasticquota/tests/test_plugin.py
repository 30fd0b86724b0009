"""The plugin through a scheduler harness: admission up to the runtime, lending, waiting and release,
quota-local preemption, non-preemptible pods, parent checks, the pod -> quota mapping and its fallbacks,
restart, and the simulate report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_elasticquota.plugin import ElasticQuota, print_resource_list
from koord_plugin_elasticquota.quota_object import DEFAULT_QUOTA_NAME

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.status import Code
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.scheduler import SchedulerHarness

LABEL = "quota.scheduling.koordinator.sh/name"


def eq(
    name: str,
    max_cpu: str,
    min_cpu: str,
    *,
    parent: str | None = None,
    is_parent: bool = False,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {"quota.scheduling.koordinator.sh/is-parent": "true" if is_parent else "false"}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations or {},
        },
        "spec": {"max": {"cpu": max_cpu, "memory": "1Ti"}, "min": {"cpu": min_cpu, "memory": "0"}},
    }


def qpod(name: str, quota: str | None, cpu: str, *, priority: int = 0, **kw: Any) -> dict[str, Any]:
    labels = dict(kw.pop("labels", {}) or {})
    if quota:
        labels[LABEL] = quota
    return make_pod(name, cpu=cpu, memory="1Gi", priority=priority, labels=labels, **kw)


def harness(args: dict[str, Any] | None = None, cores: str = "8") -> SchedulerHarness:
    h = SchedulerHarness([(ElasticQuota, args or {})])
    h.add(make_node("n1", cpu=cores, memory="64Gi"))
    return h


def plugin_of(h: SchedulerHarness) -> ElasticQuota:
    p = h.plugin("ElasticQuota")
    assert isinstance(p, ElasticQuota)
    return p


def test_print_resource_list() -> None:
    assert print_resource_list({}) == "<empty>"
    assert print_resource_list({"memory": 2 * 1024**3, "cpu": 1500}) == "cpu:1500m,memory:2Gi"


def test_builtin_quota_objects_are_created_in_the_quota_namespace() -> None:
    h = harness()
    for name in ("koordinator-root-quota", "koordinator-system-quota", "koordinator-default-quota"):
        assert h.cluster.try_get("ElasticQuota", name, "koordinator-system") is not None


def test_admits_up_to_runtime_then_waits_then_a_freed_pod_lets_the_next_in() -> None:
    h = harness()
    # a alone asks: it borrows b's idle min (runtime up to 8 cores).
    h.add(eq("a", "8", "4"), eq("b", "8", "4"))
    for i in range(3):
        assert h.schedule_one(qpod(f"a{i}", "a", "2")).scheduled
    # b asks for its min: b's runtime is 4 cores again, a's falls back to 4 (below its 6 used).
    assert h.schedule_one(qpod("b0", "b", "4")).scheduled
    r = h.schedule_one(qpod("a3", "a", "2"))
    assert not r.scheduled and r.status.code is Code.UNSCHEDULABLE
    assert "Insufficient quotas, quotaName: a, runtime: cpu:4,memory:4Gi, used: cpu:6,memory:3Gi" in r.message
    assert "pod's request: cpu:2,memory:1Gi, exceedDimensions: [cpu]" in r.message
    # b's pod goes away: a may borrow again, and the waiting pod gets in.
    h.cluster.delete("Pod", "b0", "default")
    h.run_until_idle()
    assert h.cluster.get("Pod", "a3", "default")["spec"].get("nodeName") == "n1"


def test_unknown_quota_label_falls_back_to_the_default_quota() -> None:
    h = harness()
    p = plugin_of(h)
    pod = PodInfo.from_manifest(qpod("x", "no-such-quota", "1"))
    assert p.quota_of(pod) == (DEFAULT_QUOTA_NAME, "")
    assert h.schedule_one(qpod("x", "no-such-quota", "1")).scheduled
    default = p.quotas.default.get_quota_info(DEFAULT_QUOTA_NAME)
    assert default is not None and default.calc.used["cpu"] == 1000


def test_namespace_named_quota_and_namespaces_annotation_map_pods() -> None:
    h = harness()
    h.add(eq("team-a", "8", "0", namespace="team-a"))
    h.add(
        eq("shared", "8", "0", annotations={"quota.scheduling.koordinator.sh/namespaces": '["ns1", "ns2"]'})
    )
    p = plugin_of(h)
    assert p.quota_of(PodInfo.from_manifest(make_pod("x", namespace="team-a")))[0] == "team-a"
    assert p.quota_of(PodInfo.from_manifest(make_pod("x", namespace="ns2")))[0] == "shared"
    assert p.quota_of(PodInfo.from_manifest(make_pod("x", namespace="other")))[0] == DEFAULT_QUOTA_NAME


def test_non_preemptible_pod_must_fit_min() -> None:
    h = harness()
    h.add(eq("a", "8", "2"))
    r = h.schedule_one(qpod("np", "a", "3", labels={"quota.scheduling.koordinator.sh/preemptible": "false"}))
    assert not r.scheduled
    assert "Insufficient non-preemptible quotas, quotaName: a, min: cpu:2,memory:0" in r.message


def test_parent_check_refuses_what_an_ancestor_cannot_hold() -> None:
    h = harness({"enableCheckParentQuota": True}, cores="16")
    h.add(eq("p", "4", "0", is_parent=True), eq("c", "8", "0", parent="p"))
    assert h.schedule_one(qpod("c1", "c", "3")).scheduled
    r = h.schedule_one(qpod("c2", "c", "3"))
    assert not r.scheduled
    assert "quotaName: c, runtime: cpu:4" in r.message  # the child's runtime is capped by the parent's max


def test_detached_quota_is_refused_with_a_clear_reason() -> None:
    h = harness()
    h.add(eq("orphan", "8", "0", parent="missing"))
    r = h.schedule_one(qpod("o", "orphan", "1"))
    assert not r.scheduled
    assert (
        "ElasticQuota orphan is not attached to the quota tree: parent quota 'missing' does not exist"
        in r.message
    )


def test_preemption_stays_inside_the_quota() -> None:
    h = harness(cores="8")
    h.add(eq("a", "4", "4"), eq("b", "4", "4"))
    # a's low-priority pods fill its quota; b holds the other half.
    assert h.schedule_one(qpod("a-low", "a", "4", priority=1)).scheduled
    assert h.schedule_one(qpod("b-low", "b", "4", priority=1)).scheduled
    r = h.schedule_one(qpod("a-high", "a", "4", priority=100))
    assert not r.scheduled
    # preemption removed a's own pod, never b's
    assert h.cluster.try_get("Pod", "a-low", "default") is None
    assert h.cluster.try_get("Pod", "b-low", "default") is not None
    assert h.cluster.get("Pod", "a-high", "default")["status"].get("nominatedNodeName") == "n1"


def test_no_preemption_of_other_quotas_or_equal_priority() -> None:
    h = harness(cores="8")
    h.add(eq("a", "4", "4"), eq("b", "4", "4"))
    assert h.schedule_one(qpod("a1", "a", "4", priority=10)).scheduled
    r = h.schedule_one(qpod("a2", "a", "4", priority=10))
    assert not r.scheduled and "preemption:" in r.message
    assert h.cluster.try_get("Pod", "a1", "default") is not None


def test_add_and_remove_pod_extensions_adjust_the_snapshot() -> None:
    h = harness()
    h.add(eq("a", "8", "0"), qpod("run", "a", "2", node="n1"))
    p = plugin_of(h)
    pod = PodInfo.from_manifest(qpod("new", "a", "1"))
    p.quotas.on_pod_add(pod)
    state = CycleState()
    p.pre_filter(state, pod, [])
    running = PodInfo.from_manifest(h.cluster.get("Pod", "run", "default"))
    node = h.node_info("n1")
    assert p.remove_pod(state, pod, running, node).is_success
    assert state.read("PostFilterElasticQuota").used["cpu"] == 0
    assert p.add_pod(state, pod, running, node).is_success
    assert state.read("PostFilterElasticQuota").used["cpu"] == 2000
    stranger = PodInfo.from_manifest(qpod("other", None, "1", node="n1"))
    p.add_pod(state, pod, stranger, node)
    assert state.read("PostFilterElasticQuota").used["cpu"] == 2000


def test_pod_without_quota_is_skipped_when_default_quota_is_disabled_by_empty_name() -> None:
    h = harness()
    p = plugin_of(h)
    state = CycleState()
    _, status = p.pre_filter(state, PodInfo.from_manifest(make_pod("x", cpu="1")), [])
    assert status.is_success  # charged to the default quota, whose runtime is its max


def test_state_is_rebuilt_from_objects_on_restart() -> None:
    h = harness()
    h.add(eq("a", "8", "2"), qpod("a1", "a", "3", node="n1"), qpod("a2", "a", "1"))
    # a new scheduler over the same cluster: quota objects and pods are read back
    again = SchedulerHarness([ElasticQuota], cluster=h.cluster)
    p = plugin_of(again)
    info = p.quotas.default.get_quota_info("a")
    assert info is not None
    assert info.calc.used == {"cpu": 3000, "memory": 1024**3}
    assert info.calc.request == {"cpu": 4000, "memory": 2 * 1024**3}


def test_quota_deleted_moves_its_pods_to_the_default_quota() -> None:
    h = harness()
    h.add(eq("a", "8", "2"), qpod("a1", "a", "3", node="n1"))
    h.cluster.delete("ElasticQuota", "a", "default")
    p = plugin_of(h)
    default = p.quotas.default.get_quota_info(DEFAULT_QUOTA_NAME)
    assert default is not None and default.calc.used["cpu"] == 3000


def test_pods_created_before_their_quota_move_to_it() -> None:
    h = harness()
    h.add(qpod("early", "late", "2", node="n1"))
    p = plugin_of(h)
    default = p.quotas.default.get_quota_info(DEFAULT_QUOTA_NAME)
    assert default is not None and default.calc.used["cpu"] == 2000
    h.add(eq("late", "8", "0"))
    info = p.quotas.default.get_quota_info("late")
    assert info is not None and info.calc.used["cpu"] == 2000
    assert default.calc.used["cpu"] == 0


def test_simulation_report_lists_every_quota() -> None:
    h = harness()
    h.add(eq("a", "8", "2"), qpod("a1", "a", "3", node="n1"))
    report = plugin_of(h).report(explain=False)
    quotas = {q["name"]: q for q in report}
    assert quotas["a"]["used"] == {"cpu": "3", "memory": "1Gi"}
    assert quotas["a"]["runtime"]["cpu"] == "3"
    assert DEFAULT_QUOTA_NAME in quotas
    json.dumps(report)


@pytest.mark.parametrize(
    "bad",
    [
        {"delayEvictTime": "-1s"},
        {"revokePodInterval": "soon"},
        {"defaultQuotaGroupMax": {"cpu": "-1"}},
        {"systemQuotaGroupMax": {"cpu": "lots"}},
        {"hookPlugins": [{"key": "k", "factoryKey": "f"}]},
        {"unknownField": 1},
    ],
)
def test_bad_args_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ElasticQuota.parse_args(bad)


def test_defaults_match_koordinator() -> None:
    args = ElasticQuota.parse_args({})
    dumped = args.model_dump(by_alias=True)
    assert dumped["delayEvictTime"] == 120
    assert dumped["revokePodInterval"] == 1
    assert dumped["quotaGroupNamespace"] == "koordinator-system"
    assert dumped["defaultQuotaGroupMax"] == {"cpu": "1844674407370955161", "memory": "1844674407370955161"}
    assert dumped["enableRuntimeQuota"] is True
    assert dumped["enableMinQuotaScale"] is True
    assert dumped["disableDefaultQuotaPreemption"] is True
    assert dumped["monitorAllQuotas"] is False
    assert dumped["enableCheckParentQuota"] is False
    assert dumped["quotaSnapshotUpdateInterval"] == 120


# --- Koordinator's TestPlugin_PreFilter cases the vectors lack (the default quota, runtime injected) -------
@pytest.mark.parametrize(
    ("runtime", "memory", "disable_runtime", "expected"),
    [
        ({"cpu": "10", "memory": "20"}, "2", False, "Success"),  # used dimension > runtime, value enough
        ({"cpu": "1", "memory": "2"}, "3", True, "Success"),  # runtime not enough, but runtime quota off
        ({"cpu": "1", "memory": "2"}, "3", False, "Unschedulable"),
    ],
)
def test_pre_filter_on_the_default_quota(
    runtime: dict[str, str], memory: str, disable_runtime: bool, expected: str
) -> None:
    from koord_framework.api.resources import parse_resource_list

    h = SchedulerHarness([(ElasticQuota, {"enableRuntimeQuota": not disable_runtime})])
    p = plugin_of(h)
    info = p.quotas.default.get_quota_info(DEFAULT_QUOTA_NAME)
    assert info is not None
    info.calc.runtime = parse_resource_list(runtime)
    pod = PodInfo.from_manifest(
        make_pod("pod1", namespace="t1-ns1", requests={"cpu": "1", "memory": memory, "nvidia.com/gpu": "1"})
    )
    _, status = p.pre_filter(CycleState(), pod, [])
    assert status.code.label == expected


# --- Koordinator's TestPlugin_canPreempt cases the vectors lack ----------------------------------------
@pytest.mark.parametrize(
    ("pod_prio", "victim_prio", "pod_quota", "victim_quota", "want"),
    [
        (10, 5, None, None, False),  # both in the default quota: protected by disableDefaultQuotaPreemption
        (5, 10, "q1", "q1", False),  # victim priority higher
        (10, 5, "q1", "q1", True),  # all conditions met
    ],
)
def test_can_preempt_more_cases(
    pod_prio: int, victim_prio: int, pod_quota: str | None, victim_quota: str | None, want: bool
) -> None:
    h = harness()
    h.add(eq("q1", "10", "0"))
    p = plugin_of(h)
    pod = PodInfo.from_manifest(qpod("preemptor", pod_quota, "1", priority=pod_prio))
    victim = PodInfo.from_manifest(qpod("victim", victim_quota, "1", priority=victim_prio, node="n1"))
    assert p.can_preempt(pod, victim) is want


def test_default_quota_victims_with_preemption_allowed() -> None:
    h = SchedulerHarness([(ElasticQuota, {"disableDefaultQuotaPreemption": False})])
    p = plugin_of(h)
    pod = PodInfo.from_manifest(qpod("preemptor", None, "1", priority=10))
    victim = PodInfo.from_manifest(qpod("victim", None, "1", priority=5, node="n1"))
    assert p.can_preempt(pod, victim)


def test_tree_id_quotas_get_their_own_manager_sized_by_their_root() -> None:
    h = harness(cores="16")
    tree_labels = {"quota.scheduling.koordinator.sh/tree-id": "t1"}
    root = eq("t1-root", "6", "0", is_parent=True)
    root["metadata"]["labels"].update({**tree_labels, "quota.scheduling.koordinator.sh/is-root": "true"})
    root["metadata"]["annotations"]["quota.scheduling.koordinator.sh/total-resource"] = (
        '{"cpu": "6", "memory": "16Gi"}'
    )
    child = eq("t1-team", "6", "0", parent="t1-root")
    child["metadata"]["labels"].update(tree_labels)
    h.add(root, child)
    p = plugin_of(h)
    assert p.quota_of(PodInfo.from_manifest(qpod("x", "t1-team", "1"))) == ("t1-team", "t1")
    tree = p.quotas.manager_for_tree("t1")
    assert tree is not None and tree.total == {"cpu": 6000, "memory": 16 * 1024**3}
    # the default tree gave those 6 cores up
    assert p.quotas.default.total["cpu"] == 10_000
    for i in range(3):
        assert h.schedule_one(qpod(f"t{i}", "t1-team", "2")).scheduled
    r = h.schedule_one(qpod("t3", "t1-team", "2"))
    assert not r.scheduled and "quotaName: t1-team, runtime: cpu:6" in r.message


def test_quota_max_change_is_applied() -> None:
    h = harness()
    h.add(eq("a", "2", "0"))
    assert h.schedule_one(qpod("a0", "a", "2")).scheduled
    assert not h.schedule_one(qpod("a1", "a", "2")).scheduled
    obj = h.cluster.get("ElasticQuota", "a", "default")
    obj["spec"]["max"]["cpu"] = "4"
    h.cluster.update(obj)
    h.run_until_idle()
    assert h.cluster.get("Pod", "a1", "default")["spec"].get("nodeName") == "n1"


def test_pod_relabelled_to_another_quota_moves_its_charge() -> None:
    h = harness()
    h.add(eq("a", "8", "0"), eq("b", "8", "0"), qpod("x", "a", "2", node="n1"))
    p = plugin_of(h)
    a, b = p.quotas.default.get_quota_info("a"), p.quotas.default.get_quota_info("b")
    assert a is not None and b is not None and a.calc.used["cpu"] == 2000
    obj = h.cluster.get("Pod", "x", "default")
    obj["metadata"]["labels"][LABEL] = "b"
    h.cluster.update(obj)
    assert a.calc.used["cpu"] == 0 and a.calc.request["cpu"] == 0
    assert b.calc.used["cpu"] == 2000 and b.calc.request["cpu"] == 2000
    h.cluster.delete("Pod", "x", "default")
    assert b.calc.used["cpu"] == 0 and b.calc.request["cpu"] == 0


def test_restart_reads_the_scheduler_s_pod_records(monkeypatch: pytest.MonkeyPatch) -> None:
    h = harness()
    h.add(eq("a", "8", "2"), qpod("a1", "a", "3", node="n1"), qpod("a2", "a", "1"))
    parsed: list[str] = []
    real = PodInfo.from_manifest.__func__  # type: ignore[attr-defined]

    def counting(cls: type[PodInfo], obj: Any, *args: Any, **kwargs: Any) -> PodInfo:
        parsed.append(obj["metadata"]["name"])
        return real(cls, obj, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(PodInfo, "from_manifest", classmethod(counting))
    again = SchedulerHarness([ElasticQuota], cluster=h.cluster)
    assert sorted(parsed) == ["a1", "a2"], "each pod parsed once, by the scheduler's pod cache"
    info = plugin_of(again).quotas.default.get_quota_info("a")
    assert info is not None
    assert set(info.pods) == {"default/a1", "default/a2"}
    assert info.pods["default/a1"].pod is again.scheduler.pod_cache.get("default", "a1"), "the shared record"
    assert info.calc.used == {"cpu": 3000, "memory": 1024**3}
