"""``/validate-pod``'s quota evaluation (``EvaluateQuota``): Koordinator's ``TestEvaluateQuota``
(pkg/webhook/pod/validating/evaluate_quota_test.go at a7a1b76b), then the write path (conflicts, a stale
informer), bad input and the answer's code through the dispatcher."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_elasticquota.quota_evaluation import pod_requests, pretty
from koord_plugin_elasticquota.webhook import EvaluateQuota

from koord_framework.api.quantity import Quantity
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import ConflictError
from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    Denied,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.manager.webhook.runtime import ClusterWriter
from koord_framework.testing.conformance import AdmissionHandlerConformance

NAME = "quota.scheduling.koordinator.sh/name"
CHILD = "quota.scheduling.koordinator.sh/child-request"
ADMISSION = "quota.scheduling.koordinator.sh/admission"
ON = "EnableQuotaAdmission=true"


class TestEvaluateQuotaConformance(AdmissionHandlerConformance):
    plugin_class = EvaluateQuota


def make_pod(
    quota: str, requests: dict[str, str], namespace: str = "ns1", **annotations: str
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pod1",
            "namespace": namespace,
            "labels": {NAME: quota},
            "annotations": annotations,
        },
        "spec": {"containers": [{"name": "con0", "image": "image", "resources": {"requests": requests}}]},
    }


def make_quota(
    name: str,
    max_: dict[str, str],
    child: dict[str, str] | None = None,
    admission: dict[str, str] | None = None,
) -> dict[str, Any]:
    annotations = {}
    if child is not None:
        annotations[CHILD] = json.dumps(child)
    if admission is not None:
        annotations[ADMISSION] = json.dumps(admission)
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "kube-system", "labels": {}, "annotations": annotations},
        "spec": {"max": max_},
    }


class ClusterLister:
    """The handler's lister read straight from the cluster (or a frozen snapshot: a stale informer)."""

    def __init__(self, cluster: MemoryCluster, frozen: list[dict[str, Any]] | None = None) -> None:
        self.cluster = cluster
        self.frozen = frozen

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.cluster.try_get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        if self.frozen is not None and kind == "ElasticQuota":
            return self.frozen
        return self.cluster.list(kind, namespace)[0]


def setup(quota: dict[str, Any] | None, gates: str = ON) -> tuple[EvaluateQuota, MemoryCluster]:
    cluster = MemoryCluster()
    if quota is not None:
        cluster.create(quota)
    handler = EvaluateQuota()
    handler.bind(
        ClusterLister(cluster), gates_for("manager").parse(gates), ClusterWriter(cluster, ["ElasticQuota"])
    )
    return handler, cluster


def request(
    new: dict[str, Any], old: dict[str, Any] | None = None, dry_run: bool = False
) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Pod"),
        resource=GroupVersionResource("", "v1", "pods"),
        operation="UPDATE" if old is not None else "CREATE",
        name="pod1",
        namespace="ns1",
        object=new,
        old_object=old,
        dry_run=dry_run,
    )


def child_request(cluster: MemoryCluster, name: str) -> dict[str, Quantity]:
    quota = cluster.get("ElasticQuota", name, "kube-system")
    raw = json.loads(quota["metadata"].get("annotations", {}).get(CHILD) or "{}")
    return {k: Quantity.parse(v) for k, v in raw.items()}


def q(**values: str) -> dict[str, Quantity]:
    return {k.replace("__", "/").replace("_", "-"): Quantity.parse(v) for k, v in values.items()}


CPU4_MEM8 = {"cpu": "4", "memory": "8Gi"}
POD = {"cpu": "2", "memory": "4Gi"}
BATCH = {"kubernetes.io/batch-cpu": "4", "kubernetes.io/batch-memory": "8Gi"}

CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, dict[str, str] | None]] = [
    # name, pod, quota, wanted reason ("" allowed), wanted child-request after (None: not checked)
    ("normal case 1", make_pod("quota1", POD), make_quota("quota1", CPU4_MEM8), "", POD),
    (
        "normal case 2",
        make_pod("quota1", POD),
        make_quota("quota1", CPU4_MEM8, child={"cpu": "2", "memory": "2Gi"}),
        "",
        {"cpu": "4", "memory": "6Gi"},
    ),
    (
        "cpu exceeded max",
        make_pod("quota1", POD),
        make_quota("quota1", CPU4_MEM8, child={"cpu": "4", "memory": "2Gi"}),
        "exceeded quota: kube-system/quota1, requested: cpu=2, used: cpu=4, limited: cpu=4",
        None,
    ),
    (
        "cpu and memory exceeded max",
        make_pod("quota1", POD),
        make_quota("quota1", CPU4_MEM8, child=CPU4_MEM8),
        "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: cpu=4,memory=8Gi, "
        "limited: cpu=4,memory=8Gi",
        None,
    ),
    (
        "cpu exceeded max, but not admission",
        make_pod("quota1", POD),
        make_quota(
            "quota1", CPU4_MEM8, child={"cpu": "4", "memory": "2Gi"}, admission={"cpu": "8", "memory": "16Gi"}
        ),
        "",
        {"cpu": "6", "memory": "6Gi"},
    ),
    (
        "cpu and memory exceeded max, but not admission",
        make_pod("quota1", POD),
        make_quota("quota1", CPU4_MEM8, child=CPU4_MEM8, admission={"cpu": "8", "memory": "16Gi"}),
        "",
        {"cpu": "6", "memory": "12Gi"},
    ),
    (
        "quota not found",
        make_pod("quota2", POD),
        make_quota("quota1", CPU4_MEM8, child={"cpu": "2", "memory": "2Gi"}),
        "elastic quota quota2 not found",
        None,
    ),
    (
        "quota has batch cpu, pod not",
        make_pod("quota1", POD),
        make_quota("quota1", BATCH, child=BATCH),
        "",
        BATCH,
    ),
    (
        "quota has batch cpu, pod has and exceeded",
        make_pod("quota1", {"kubernetes.io/batch-cpu": "1", "kubernetes.io/batch-memory": "2Gi"}),
        make_quota("quota1", BATCH, child=BATCH),
        "exceeded quota: kube-system/quota1, "
        "requested: kubernetes.io/batch-cpu=1,kubernetes.io/batch-memory=2Gi, "
        "used: kubernetes.io/batch-cpu=4,kubernetes.io/batch-memory=8Gi, "
        "limited: kubernetes.io/batch-cpu=4,kubernetes.io/batch-memory=8Gi",
        None,
    ),
    (
        "admission not set, use max by default",
        make_pod("quota1", POD),
        make_quota("quota1", {"cpu": "1", "memory": "2Gi"}),
        "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: , limited: cpu=1,memory=2Gi",
        None,
    ),
    (
        "admission set empty, use max by default",
        make_pod("quota1", POD),
        make_quota("quota1", {"cpu": "1", "memory": "2Gi"}, admission={}),
        "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: , limited: cpu=1,memory=2Gi",
        None,
    ),
    (
        "admission set zero explicitly",
        make_pod("quota1", POD),
        make_quota("quota1", CPU4_MEM8, admission={"cpu": "0", "memory": "0Gi"}),
        "exceeded quota: kube-system/quota1, requested: cpu=2,memory=4Gi, used: , limited: cpu=0,memory=0",
        None,
    ),
    (
        "admission set zero for non-related resource",
        make_pod("quota1", POD),
        make_quota("quota1", CPU4_MEM8, admission={"kubernetes.io/batch-cpu": "0"}),
        "",
        POD,
    ),
]


@pytest.mark.parametrize(
    ("pod", "quota", "reason", "used"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_evaluate_quota_on_create(
    pod: dict[str, Any], quota: dict[str, Any], reason: str, used: dict[str, str] | None
) -> None:
    handler, cluster = setup(quota)
    if reason:
        with pytest.raises(Denied) as denied:
            handler.admit(request(pod), pod)
        assert denied.value.reason == reason and denied.value.code == 400
    else:
        handler.admit(request(pod), pod)
    if used is not None:
        assert child_request(cluster, quota["metadata"]["name"]) == {
            k: Quantity.parse(v) for k, v in used.items()
        }


def test_update_with_the_gate_off_is_skipped() -> None:
    handler, cluster = setup(make_quota("quota1", CPU4_MEM8))
    handler.admit(request(make_pod("quota2", POD), make_pod("quota1", POD)), make_pod("quota2", POD))
    assert child_request(cluster, "quota1") == {}


UPDATE = f"{ON},EnableQuotaAdmissionOnUpdate=true"


def test_update_with_the_quota_label_unchanged_is_skipped() -> None:
    handler, cluster = setup(make_quota("quota1", CPU4_MEM8), UPDATE)
    handler.admit(request(make_pod("quota1", POD), make_pod("quota1", POD)), make_pod("quota1", POD))
    assert child_request(cluster, "quota1") == {}


def test_update_into_a_quota_with_capacity_is_allowed() -> None:
    handler, cluster = setup(make_quota("quota2", CPU4_MEM8), UPDATE)
    handler.admit(request(make_pod("quota2", POD), make_pod("quota1", POD)), make_pod("quota2", POD))
    assert child_request(cluster, "quota2") == q(cpu="2", memory="4Gi")


def test_update_into_a_full_quota_is_denied() -> None:
    handler, _ = setup(make_quota("quota2", CPU4_MEM8, child=CPU4_MEM8), UPDATE)
    with pytest.raises(Denied) as denied:
        handler.admit(request(make_pod("quota2", POD), make_pod("quota1", POD)), make_pod("quota2", POD))
    assert denied.value.reason == (
        "exceeded quota: kube-system/quota2, requested: cpu=2,memory=4Gi, used: cpu=4,memory=8Gi, "
        "limited: cpu=4,memory=8Gi"
    )


def test_replace_resources_annotation_replaces_or_erases_before_evaluation() -> None:
    pod = make_pod(
        "quota1",
        {"cpu": "2", "memory": "4Gi", "example.io/gpu": "1"},
        **{"pod.koordinator.sh/replace-resources": "cpu:example.io/cpu,memory:"},
    )
    quota = make_quota("quota1", {"memory": "0Gi", "example.io/cpu": "4k", "example.io/gpu": "3"})
    handler, cluster = setup(
        quota, f"{ON},ElasticQuotaEvaluationTransformPod=true,ReplaceResourcesTransformer=true"
    )
    handler.admit(request(pod), pod)
    assert child_request(cluster, "quota1") == {
        "example.io/cpu": Quantity("2k"),
        "example.io/gpu": Quantity("1"),
    }
    assert json.loads(
        cluster.get("ElasticQuota", "quota1", "kube-system")["metadata"]["annotations"][CHILD]
    ) == {
        "example.io/cpu": "2k",
        "example.io/gpu": "1",
    }
    assert (
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"
    )  # the request's object untouched


def test_the_gate_off_admits_everything() -> None:
    handler, cluster = setup(make_quota("quota1", {"cpu": "1"}), gates="")
    pod = make_pod("quota1", POD)
    handler.admit(request(pod), pod)
    assert child_request(cluster, "quota1") == {}


def test_system_and_default_quotas_are_not_evaluated() -> None:
    handler, _ = setup(None)
    for name in ("koordinator-default-quota", "koordinator-system-quota", "koordinator-root-quota"):
        pod = make_pod(name, POD)
        handler.admit(request(pod), pod)


def test_admissions_accumulate_through_a_stale_informer() -> None:
    # The informer still shows the quota as created; the handler's own write is newer and counts.
    quota = make_quota("quota1", {"cpu": "4"})
    cluster = MemoryCluster()
    snapshot = [cluster.create(quota)]
    handler = EvaluateQuota()
    handler.bind(
        ClusterLister(cluster, frozen=snapshot),
        gates_for("manager").parse(ON),
        ClusterWriter(cluster, ["ElasticQuota"]),
    )
    pod = make_pod("quota1", {"cpu": "2"})
    handler.admit(request(pod), pod)
    handler.admit(request(pod), pod)
    assert child_request(cluster, "quota1") == q(cpu="4")
    with pytest.raises(Denied, match=r"requested: cpu=2, used: cpu=4, limited: cpu=4"):
        handler.admit(request(pod), pod)


def test_a_conflict_is_retried_on_a_fresh_read() -> None:
    # Another replica admitted 1 cpu since the informer's copy: the write conflicts, the handler reads the
    # quota again and adds to what is there.
    cluster = MemoryCluster()
    stale = cluster.create(make_quota("quota1", {"cpu": "4"}))
    current = cluster.get("ElasticQuota", "quota1", "kube-system")
    current["metadata"]["annotations"][CHILD] = '{"cpu":"1"}'
    cluster.update(current)
    handler = EvaluateQuota()
    handler.bind(
        ClusterLister(cluster, frozen=[stale]),
        gates_for("manager").parse(ON),
        ClusterWriter(cluster, ["ElasticQuota"]),
    )
    pod = make_pod("quota1", {"cpu": "2"})
    handler.admit(request(pod), pod)
    assert child_request(cluster, "quota1") == q(cpu="3")
    with pytest.raises(Denied, match="exceeded quota"):
        handler.admit(request(pod), pod)


class AlwaysConflicting(ClusterWriter):
    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.calls = getattr(self, "calls", 0) + 1
        raise ConflictError(f"the object has been modified (attempt {self.calls})")


def test_conflicts_past_the_retries_deny_with_the_error() -> None:
    cluster = MemoryCluster()
    cluster.create(make_quota("quota1", {"cpu": "4"}))
    handler = EvaluateQuota()
    writer = AlwaysConflicting(cluster, ["ElasticQuota"])
    handler.bind(ClusterLister(cluster), gates_for("manager").parse(ON), writer)
    pod = make_pod("quota1", {"cpu": "2"})
    with pytest.raises(
        Denied, match=r"elastic quota kube-system/quota1: the object has been modified \(attempt 4\)"
    ):
        handler.admit(request(pod), pod)
    assert writer.calls == 4


def test_a_dry_run_is_checked_but_writes_nothing() -> None:
    handler, cluster = setup(make_quota("quota1", {"cpu": "4"}))
    pod = make_pod("quota1", {"cpu": "2"})
    handler.admit(request(pod, dry_run=True), pod)
    assert child_request(cluster, "quota1") == {}
    with pytest.raises(Denied):
        big = make_pod("quota1", {"cpu": "5"})
        handler.admit(request(big, dry_run=True), big)


def test_more_than_one_quota_of_the_name_is_denied() -> None:
    handler, cluster = setup(make_quota("quota1", {"cpu": "4"}))
    other = make_quota("quota1", {"cpu": "4"})
    other["metadata"]["namespace"] = "other"
    cluster.create(other)
    pod = make_pod("quota1", {"cpu": "2"})
    with pytest.raises(Denied, match=r"^more than one elastic quota quota1 found$"):
        handler.admit(request(pod), pod)


def answer(handler: EvaluateQuota, pod: dict[str, Any]) -> dict[str, Any]:
    return Dispatcher.admit([handler], request(pod))


def test_through_the_dispatcher_a_denial_is_400_with_the_message() -> None:
    handler, _ = setup(make_quota("quota1", {"cpu": "1"}))
    response = answer(handler, make_pod("quota1", {"cpu": "2"}))
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert response["status"]["message"].startswith("exceeded quota: kube-system/quota1")
    response = answer(handler, make_pod("missing", {"cpu": "2"}))
    assert response["status"] == {
        "code": 400,
        "message": "elastic quota missing not found",
        "reason": "BadRequest",
    }


def test_an_unreadable_pod_quantity_is_a_400_naming_the_field() -> None:
    handler, _ = setup(make_quota("quota1", {"cpu": "1"}))
    response = answer(handler, make_pod("quota1", {"cpu": "lots"}))
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "spec.containers[0].resources.requests[cpu]" in response["status"]["message"]


def test_a_malformed_child_request_is_a_400_naming_quota_and_annotation() -> None:
    quota = make_quota("quota1", {"cpu": "4"})
    quota["metadata"]["annotations"][CHILD] = "{not json"
    handler, _ = setup(quota)
    response = answer(handler, make_pod("quota1", {"cpu": "1"}))
    assert response["status"]["code"] == 400
    assert response["status"]["message"].startswith(f"elastic quota kube-system/quota1: annotation {CHILD}:")


def test_pod_requests_count_init_containers_sidecars_and_overhead() -> None:
    pod = {
        "spec": {
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
            ],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
            "overhead": {"cpu": "100m"},
        }
    }
    # containers + sidecar = 1500m; init 3 + sidecar 500m = 3500m is the larger; plus overhead.
    assert pretty(pod_requests(pod)) == "cpu=3600m,memory=2Gi"
    pod["spec"]["resources"] = {"requests": {"cpu": "8"}}
    assert pretty(pod_requests(pod)) == "cpu=8100m,memory=2Gi"


def test_finished_pods_use_nothing() -> None:
    from koord_plugin_elasticquota.quota_evaluation import pod_usage

    pod = make_pod("quota1", POD)
    pod["status"] = {"phase": "Succeeded"}
    assert pod_usage(pod) == {}
