"""Every ElasticQuota vector of the spec (``data/vectors.json``), through the plugin's extension points or its
documented quota-manager API (``GroupQuotaManager``, ``QuotaTree``, ``revoke_list``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_elasticquota.calculator import QuotaTree
from koord_plugin_elasticquota.controllers import revoke_list
from koord_plugin_elasticquota.manager import GroupQuotaManager
from koord_plugin_elasticquota.plugin import ElasticQuota
from koord_plugin_elasticquota.quota_object import DEFAULT_QUOTA_NAME
from koord_plugin_elasticquota.steps import StepFailure, run_steps

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.testing.scheduler import SchedulerHarness

VECTORS: list[dict[str, Any]] = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())


def _by(function: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"] == function]


def _plugin(args: dict[str, Any] | None = None) -> ElasticQuota:
    harness = SchedulerHarness([(ElasticQuota, args or {})])
    plugin = harness.plugin("ElasticQuota")
    assert isinstance(plugin, ElasticQuota)
    return plugin


def _status(status: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"code": status.code.label}
    if not status.is_success:
        out["reasons"] = list(status.reasons)
    return out


def test_every_vector_is_exercised() -> None:
    known = {
        "quotaTree.redistribution",
        "GroupQuotaManager",
        "PreFilter",
        "checkQuotaRecursive",
        "getToRevokePodList",
        "canPreempt",
    }
    assert {v["function"] for v in VECTORS} <= known
    assert len(VECTORS) == 16


@pytest.mark.parametrize("vector", _by("quotaTree.redistribution"))
def test_redistribution(vector: dict[str, Any]) -> None:
    tree = QuotaTree()
    for n in vector["inputs"]["quotaNodes"]:
        tree.insert(
            n["name"], n["sharedWeight"], n["request"], n["min"], n["guarantee"], n["allowLentResource"]
        )
    tree.redistribution(vector["inputs"]["totalResource"])
    assert {name: node.runtime for name, node in tree.nodes.items()} == vector["expected"]["runtime"]


@pytest.mark.parametrize("vector", _by("GroupQuotaManager"))
def test_group_quota_manager(vector: dict[str, Any]) -> None:
    mgr = GroupQuotaManager(scale_min_enabled=vector["inputs"]["scaleMinQuotaEnabled"])
    run_steps(mgr, vector["inputs"]["steps"])


def test_step_runner_reports_the_first_mismatch() -> None:
    mgr = GroupQuotaManager()
    steps = [
        {"op": "UpdateClusterTotalResource", "delta": {"cpu": "10"}},
        {
            "op": "AddQuota",
            "quota": {"metadata": {"name": "q"}, "spec": {"max": {"cpu": "10"}, "min": {"cpu": "2"}}},
        },
        {"op": "UpdateGroupDeltaRequest", "quota": "q", "delta": {"cpu": "4"}},
        {"op": "ExpectRequest", "quota": "q", "expect": {"cpu": "4"}},
        {"op": "RefreshRuntime", "quota": "q", "expect": {"cpu": "5"}},
    ]
    with pytest.raises(StepFailure, match="step 4 RefreshRuntime"):
        run_steps(mgr, steps)


def _quota_plugin_with_state(inputs: dict[str, Any]) -> ElasticQuota:
    plugin = _plugin(inputs["args"])
    quotas = plugin.quotas
    if "clusterTotalResource" in inputs:
        quotas.default.update_cluster_total_resource(parse_resource_list(inputs["clusterTotalResource"]))
    for quota in inputs.get("quotas", ()):
        quotas.on_quota_add(quota)
    for pod in inputs.get("existingPods", ()):
        quotas.on_pod_add(pod)
    return plugin


@pytest.mark.parametrize("vector", _by("PreFilter"))
def test_pre_filter(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    plugin = _quota_plugin_with_state(inputs)
    pod_obj = json.loads(json.dumps(inputs["pod"]))
    pod_obj["spec"].pop("nodeName", None)
    pod = PodInfo.from_manifest(pod_obj)
    plugin.quotas.on_pod_add(pod)
    quota = inputs.get("quota")
    if quota is not None and "runtimeOverride" in quota:
        # The Go test writes Runtime straight into the quota info (the default quota's runtime is never
        # recomputed: RefreshRuntime returns its max and leaves Runtime alone).
        info = plugin.quotas.default.get_quota_info(quota["name"])
        assert info is not None and quota["name"] == DEFAULT_QUOTA_NAME
        info.calc.runtime = parse_resource_list(quota["runtimeOverride"])
    _, status = plugin.pre_filter(CycleState(), pod, [])
    assert _status(status) == vector["expected"]["status"]


@pytest.mark.parametrize("vector", _by("checkQuotaRecursive"))
def test_check_quota_recursive(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    plugin = _quota_plugin_with_state(inputs)
    mgr = plugin.quotas.default
    for name, runtime in inputs["runtimeOverride"].items():
        info = mgr.get_quota_info(name)
        assert info is not None
        info.calc.runtime = parse_resource_list(runtime)
    pod = PodInfo.from_manifest(inputs["pod"])
    info = mgr.get_quota_info("test-child")
    assert info is not None
    request = {k: v for k, v in pod.requests.items() if k in info.calc.max}
    status = plugin.check_quota_recursive(mgr, "test-child", ["test-child"], request)
    assert _status(status) == vector["expected"]["status"]


@pytest.mark.parametrize("vector", _by("getToRevokePodList"))
def test_revoke_list(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    mgr = GroupQuotaManager()
    mgr.update_quota(
        {
            "metadata": {"name": inputs["quota"]["name"]},
            "spec": {"max": {"cpu": "1000", "memory": "1000"}, "min": {"cpu": "0", "memory": "0"}},
        }
    )
    for pod in inputs["assignedPods"]:
        mgr.on_pod_add(inputs["quota"]["name"], PodInfo.from_manifest(pod))
    info = mgr.get_quota_info(inputs["quota"]["name"])
    assert info is not None
    runtime = parse_resource_list(inputs["quota"]["runtime"])
    revoked = revoke_list(runtime, info.calc.used, info.assigned_pods())
    assert [p.name for p in revoked] == vector["expected"]["revokedPodsInOrder"]


@pytest.mark.parametrize("vector", _by("canPreempt"))
def test_can_preempt(vector: dict[str, Any]) -> None:
    inputs = vector["inputs"]
    plugin = _plugin(inputs["args"])
    for name in inputs["knownQuotas"]:
        plugin.quotas.on_quota_add(
            {"metadata": {"name": name}, "spec": {"max": {"cpu": "10", "memory": "10"}}}
        )
    preemptor = PodInfo.from_manifest(inputs["preemptor"])
    victim = PodInfo.from_manifest(inputs["victim"])
    assert plugin.can_preempt(preemptor, victim) is vector["expected"]["canPreempt"]
