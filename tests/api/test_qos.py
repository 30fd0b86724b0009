"""Kubernetes QoS and Koordinator QoS/priority derivations (Koordinator apis/extension, Kubernetes GetPodQOS).

Cases marked with a Go test name come from that test in koordinator-sh/koordinator apis/extension.
"""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.api.qos import (
    KubeQoS,
    PriorityClass,
    QoSClass,
    compute_kube_qos,
    default_priority_value,
    kube_qos,
    kube_qos_by_cgroup_parent,
    priority_class_of_value,
    priority_class_raw,
    priority_class_with_default,
    priority_value_with_default,
    qos_class_raw,
    qos_class_with_default,
    translate_resource,
)
from koord_framework.api.quantity import QuantityError

QOS_LABEL = "koordinator.sh/qosClass"
PRIORITY_LABEL = "koordinator.sh/priority-class"


def pod(
    *containers: dict[str, Any],
    init: tuple[dict[str, Any], ...] = (),
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    qos_status: str | None = None,
) -> dict[str, Any]:
    """A pod manifest dict shaped like ``kubectl get pod -o json``."""
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    if priority is not None:
        spec["priority"] = priority
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    if labels is not None:
        obj["metadata"]["labels"] = labels
    if qos_status is not None:
        obj["status"] = {"qosClass": qos_status}
    return obj


def c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources}


GUARANTEED_1 = c({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
BURSTABLE_1 = c({"cpu": "100m"}, {"cpu": "200m"})
BEST_EFFORT_1 = c()

KUBE_QOS_CASES: list[tuple[str, Any, KubeQoS]] = [
    ("none pod", None, KubeQoS.BEST_EFFORT),
    ("empty manifest", {}, KubeQoS.BEST_EFFORT),
    ("null sections", {"metadata": None, "spec": None, "status": None}, KubeQoS.BEST_EFFORT),
    ("container without resources", pod({"name": "abc"}), KubeQoS.BEST_EFFORT),
    ("null resources", pod({"name": "a", "resources": None}), KubeQoS.BEST_EFFORT),
    ("null request value", pod(c({"cpu": None})), KubeQoS.BEST_EFFORT),
    ("status wins over spec", pod(BEST_EFFORT_1, qos_status="Guaranteed"), KubeQoS.GUARANTEED),
    ("empty status is computed", pod(GUARANTEED_1, qos_status=""), KubeQoS.GUARANTEED),
    ("unknown status is computed", pod(BURSTABLE_1, qos_status="Platinum"), KubeQoS.BURSTABLE),
    # Koordinator: requests {cpu: 400m, memory: 0} and no limits
    ("koordinator 400m + zero memory", pod(c({"cpu": "400m", "memory": "0"})), KubeQoS.BURSTABLE),
    ("requests equal limits", pod(GUARANTEED_1), KubeQoS.GUARANTEED),
    (
        "equal in different spellings",
        pod(c({"cpu": "1", "memory": "1024Mi"}, {"cpu": "1000m", "memory": "1Gi"})),
        KubeQoS.GUARANTEED,
    ),
    (
        "limits only: requests default to limits",
        pod(c(limits={"cpu": "2", "memory": "2Gi"})),
        KubeQoS.GUARANTEED,
    ),
    ("cpu limit only", pod(c(limits={"cpu": "2"})), KubeQoS.BURSTABLE),
    (
        "cpu request equals limit, no memory (Koordinator TestGetPodPriorityClassWithDefault)",
        pod(c({"cpu": "100"}, {"cpu": "100"})),
        KubeQoS.BURSTABLE,
    ),
    (
        "request below limit",
        pod(c({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"})),
        KubeQoS.BURSTABLE,
    ),
    (
        "explicit zero request with limits",
        pod(c({"cpu": "0"}, {"cpu": "1", "memory": "1Gi"})),
        KubeQoS.BURSTABLE,
    ),
    (
        "all-zero values count as absent",
        pod(c({"cpu": "0", "memory": "0"}, {"cpu": "0m"})),
        KubeQoS.BEST_EFFORT,
    ),
    (
        "only non-QoS resources",
        pod(c({"ephemeral-storage": "1Gi", "nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1})),
        KubeQoS.BEST_EFFORT,
    ),
    (
        "extra non-QoS resource does not break Guaranteed",
        pod(c({"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}, {"cpu": "1", "memory": "1Gi"})),
        KubeQoS.GUARANTEED,
    ),
    (
        "batch resources do not count",
        pod(c({"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"})),
        KubeQoS.BEST_EFFORT,
    ),
    ("two guaranteed containers", pod(GUARANTEED_1, GUARANTEED_1), KubeQoS.GUARANTEED),
    ("guaranteed + empty container", pod(GUARANTEED_1, BEST_EFFORT_1), KubeQoS.BURSTABLE),
    ("burstable init container", pod(GUARANTEED_1, init=(BURSTABLE_1,)), KubeQoS.BURSTABLE),
    ("guaranteed init container", pod(GUARANTEED_1, init=(GUARANTEED_1,)), KubeQoS.GUARANTEED),
    ("best-effort app with burstable init", pod(BEST_EFFORT_1, init=(BURSTABLE_1,)), KubeQoS.BURSTABLE),
    # Upstream compares per-resource sums across containers, so these two compensate each other.
    (
        "sums compared across containers",
        pod(
            c({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}),
            c({"cpu": "2", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
        ),
        KubeQoS.GUARANTEED,
    ),
]


@pytest.mark.parametrize(("case", "manifest", "expected"), KUBE_QOS_CASES, ids=[c[0] for c in KUBE_QOS_CASES])
def test_kube_qos(case: str, manifest: Any, expected: KubeQoS) -> None:
    assert kube_qos(manifest) is expected


def test_compute_kube_qos_ignores_status() -> None:
    assert compute_kube_qos(pod(BEST_EFFORT_1, qos_status="Guaranteed")) is KubeQoS.BEST_EFFORT


def test_kube_qos_invalid_quantity_raises() -> None:
    with pytest.raises(QuantityError, match="'1 Gi'"):
        kube_qos(pod(c({"memory": "1 Gi"})))


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (None, QoSClass.NONE),  # TestGetPodQoSClass: not specified
        ({}, QoSClass.NONE),  # TestGetPodQoSClass: not specified 1
        ({QOS_LABEL: "LS"}, QoSClass.LS),  # TestGetPodQoSClass
        ({QOS_LABEL: "BE"}, QoSClass.BE),  # TestGetPodQoSClass / TestGetQoSClassByAttrs
        ({QOS_LABEL: "LSE"}, QoSClass.LSE),
        ({QOS_LABEL: "LSR"}, QoSClass.LSR),
        ({QOS_LABEL: "SYSTEM"}, QoSClass.SYSTEM),
        ({QOS_LABEL: "lsr"}, QoSClass.NONE),  # names are case-sensitive
        ({QOS_LABEL: ""}, QoSClass.NONE),
        ({"app": "web"}, QoSClass.NONE),
    ],
)
def test_qos_class_raw(labels: dict[str, str] | None, expected: QoSClass) -> None:
    assert qos_class_raw(labels) is expected


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (pod(GUARANTEED_1), QoSClass.LSR),
        (pod(BURSTABLE_1), QoSClass.LS),
        (pod(BEST_EFFORT_1), QoSClass.BE),
        (pod(BEST_EFFORT_1, qos_status="Burstable"), QoSClass.LS),
        (pod(BEST_EFFORT_1, labels={QOS_LABEL: "LSE"}), QoSClass.LSE),
        (pod(GUARANTEED_1, labels={QOS_LABEL: "BE"}), QoSClass.BE),
        (pod(GUARANTEED_1, labels={QOS_LABEL: "bogus"}), QoSClass.LSR),
        (None, QoSClass.BE),
    ],
)
def test_qos_class_with_default(manifest: Any, expected: QoSClass) -> None:
    assert qos_class_with_default(manifest) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, PriorityClass.NONE),
        (0, PriorityClass.NONE),
        (-1, PriorityClass.NONE),
        (2999, PriorityClass.NONE),
        (3000, PriorityClass.FREE),
        (3999, PriorityClass.FREE),
        (4000, PriorityClass.NONE),
        (4999, PriorityClass.NONE),
        (5000, PriorityClass.BATCH),
        (5999, PriorityClass.BATCH),
        (6000, PriorityClass.NONE),
        (6999, PriorityClass.NONE),
        (7000, PriorityClass.MID),
        (7999, PriorityClass.MID),
        (8999, PriorityClass.NONE),
        (9000, PriorityClass.PROD),
        (9999, PriorityClass.PROD),
        (10000, PriorityClass.NONE),
        (2000000000, PriorityClass.NONE),  # system-cluster-critical
    ],
)
def test_priority_class_of_value(value: int | None, expected: PriorityClass) -> None:
    assert priority_class_of_value(value) is expected


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (None, PriorityClass.NONE),
        ({}, PriorityClass.NONE),
        (pod(priority=(9000 + 9999) // 2), PriorityClass.PROD),  # TestGetPriorityClass
        (pod(priority=(5000 + 5999) // 2), PriorityClass.BATCH),  # TestGetPriorityClass
        (
            pod(labels={PRIORITY_LABEL: "koord-prod"}, priority=5499),
            PriorityClass.PROD,
        ),  # TestGetPriorityClass
        (pod(labels={PRIORITY_LABEL: "unknown"}, priority=5499), PriorityClass.NONE),  # TestGetPriorityClass
        (pod(labels={PRIORITY_LABEL: "koord-mid"}), PriorityClass.MID),
        (pod(labels={PRIORITY_LABEL: "koord-free"}), PriorityClass.FREE),
        (pod(priority=2000000000), PriorityClass.NONE),
        (pod(GUARANTEED_1), PriorityClass.NONE),  # raw does not derive from QoS
    ],
)
def test_priority_class_raw(manifest: Any, expected: PriorityClass) -> None:
    assert priority_class_raw(manifest) is expected


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        # TestGetPodPriorityClassWithDefault
        (pod(priority=(9000 + 9999) // 2), PriorityClass.PROD),
        (pod(labels={PRIORITY_LABEL: "koord-prod"}, priority=5499), PriorityClass.PROD),
        (pod(labels={QOS_LABEL: "LSR"}, priority=5499), PriorityClass.BATCH),
        (pod(labels={QOS_LABEL: "LSR"}), PriorityClass.PROD),
        (pod(labels={QOS_LABEL: "BE"}), PriorityClass.BATCH),
        (pod(c({"cpu": "100"}, {"cpu": "200"})), PriorityClass.PROD),
        (pod(c({"cpu": "100"}, {"cpu": "100"})), PriorityClass.PROD),
        (pod({"name": "abc"}), PriorityClass.BATCH),
        # brief: unlabelled Burstable -> prod, BestEffort -> batch
        (pod(BURSTABLE_1), PriorityClass.PROD),
        (pod(BEST_EFFORT_1), PriorityClass.BATCH),
        (pod(GUARANTEED_1), PriorityClass.PROD),
        (pod(labels={QOS_LABEL: "SYSTEM"}), PriorityClass.PROD),
        (pod(labels={QOS_LABEL: "LSE"}), PriorityClass.PROD),
        (pod(labels={QOS_LABEL: "LS"}), PriorityClass.PROD),
        # priority outside every band falls back to the QoS-derived class
        (pod(BEST_EFFORT_1, priority=2000000000), PriorityClass.BATCH),
        (pod(GUARANTEED_1, priority=0), PriorityClass.PROD),
        # an invalid priority-class label is NONE and falls back as well
        (pod(BEST_EFFORT_1, labels={PRIORITY_LABEL: "gold"}, priority=9500), PriorityClass.BATCH),
        (pod(labels={PRIORITY_LABEL: "koord-free", QOS_LABEL: "LSR"}), PriorityClass.FREE),
    ],
)
def test_priority_class_with_default(manifest: Any, expected: PriorityClass) -> None:
    assert priority_class_with_default(manifest) is expected


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (None, 0),  # TestGetPodPriorityValueWithDefault: pod is nil
        (pod(priority=5999), 5999),  # TestGetPodPriorityValueWithDefault: non-default priority
        (pod(labels={QOS_LABEL: "LSR"}), 9500),  # TestGetPodPriorityValueWithDefault: by class
        (pod(BEST_EFFORT_1, priority=0), 5500),
        (pod(labels={PRIORITY_LABEL: "koord-mid"}), 7500),
        (pod(labels={PRIORITY_LABEL: "koord-free"}, priority=0), 3500),
        (pod(labels={PRIORITY_LABEL: "koord-prod"}, priority=0), 9500),
        (pod(priority=2000000000), 2000000000),
        (pod(priority=-5), -5),
    ],
)
def test_priority_value_with_default(manifest: Any, expected: int) -> None:
    assert priority_value_with_default(manifest) == expected


def test_default_priority_values() -> None:
    assert [default_priority_value(p) for p in PriorityClass] == [9500, 7500, 5500, 3500, 0]


def test_non_integer_priority_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"spec\.priority"):
        priority_class_raw({"spec": {"priority": "high"}})
    with pytest.raises(ValueError, match=r"spec\.priority"):
        priority_value_with_default({"spec": {"priority": True}})


@pytest.mark.parametrize(
    ("name", "klass", "expected"),
    [
        ("cpu", PriorityClass.PROD, "cpu"),
        ("memory", PriorityClass.PROD, "memory"),
        ("cpu", PriorityClass.NONE, "cpu"),
        ("pods", PriorityClass.PROD, "pods"),
        ("cpu", PriorityClass.BATCH, "kubernetes.io/batch-cpu"),
        ("memory", PriorityClass.BATCH, "kubernetes.io/batch-memory"),
        ("cpu", PriorityClass.MID, "kubernetes.io/mid-cpu"),
        ("memory", PriorityClass.MID, "kubernetes.io/mid-memory"),
        ("pods", PriorityClass.BATCH, ""),
        ("cpu", PriorityClass.FREE, ""),
        ("memory", PriorityClass.FREE, ""),
    ],
)
def test_translate_resource(name: str, klass: PriorityClass, expected: str) -> None:
    assert translate_resource(name, klass) == expected


@pytest.mark.parametrize(
    ("cgroup_dir", "expected"),
    [
        ("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1a2b.slice", KubeQoS.BEST_EFFORT),
        ("kubepods/besteffort/pod1a2b", KubeQoS.BEST_EFFORT),
        ("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1a2b.slice", KubeQoS.BURSTABLE),
        ("kubepods/burstable/pod1a2b", KubeQoS.BURSTABLE),
        ("kubepods.slice/kubepods-pod1a2b.slice", KubeQoS.GUARANTEED),
        ("kubepods/pod1a2b", KubeQoS.GUARANTEED),
        ("", KubeQoS.GUARANTEED),
    ],
)
def test_kube_qos_by_cgroup_parent(cgroup_dir: str, expected: KubeQoS) -> None:
    assert kube_qos_by_cgroup_parent(cgroup_dir) is expected


def test_enum_values_are_the_wire_strings() -> None:
    assert [q.value for q in KubeQoS] == ["Guaranteed", "Burstable", "BestEffort"]
    assert [q.value for q in QoSClass] == ["LSE", "LSR", "LS", "BE", "SYSTEM", ""]
    assert [p.value for p in PriorityClass] == ["koord-prod", "koord-mid", "koord-batch", "koord-free", ""]
    assert str(PriorityClass.BATCH) == "koord-batch"
    assert QoSClass("LSR") is QoSClass.LSR
