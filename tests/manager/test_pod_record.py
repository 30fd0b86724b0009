"""``PodRecord``: the calculators' lean pod record reads a pod exactly as ``PodInfo`` does."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from koord_framework.api.objects import PodInfo
from koord_framework.api.quantity import QuantityError
from koord_framework.manager.noderesource import PodRecord, ResourceMetrics
from koord_framework.testing import make_pod


def _with(pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["spec"].update(spec)
    return pod


def _cases() -> list[dict[str, Any]]:
    base = make_pod("a", cpu="1", memory="2Gi", node="n1", qos="LS")
    sidecar = {
        "name": "sidecar",
        "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "200m", "memory": "64Mi"}},
    }
    init = {"name": "init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}
    limits_only = {"name": "main", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}
    return [
        base,
        make_pod("be", cpu="500m", memory="1Gi", node="n1", qos="BE"),
        make_pod("lse", cpu="2", memory="1Gi", node="n1", qos="LSE"),
        make_pod("none", cpu="1", memory="1Gi", node="n1"),  # no label: the Kubernetes QoS decides
        make_pod("guaranteed", requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"}),
        make_pod("besteffort", node="n1"),
        make_pod("prio-batch", cpu="1", memory="1Gi", node="n1", priority=5500),
        make_pod("prio-mid", cpu="1", memory="1Gi", node="n1", priority=7100, qos="LS"),
        make_pod("prio-outside", cpu="1", memory="1Gi", node="n1", priority=2_000_000_000, qos="BE"),
        make_pod("label-pc", cpu="1", memory="1Gi", labels={"koordinator.sh/priority-class": "koord-free"}),
        make_pod("unknown-qos", cpu="1", memory="1Gi", labels={"koordinator.sh/qosClass": "XX"}),
        make_pod("done", cpu="1", memory="1Gi", node="n1", phase="Succeeded"),
        make_pod("gpu", requests={"cpu": "1", "nvidia.com/gpu": 2}, node="n1"),
        make_pod("intreq", requests={"cpu": 2, "memory": 1024}, node="n1"),
        _with(base, initContainers=[init]),
        _with(base, initContainers=[sidecar, init]),
        _with(base, overhead={"cpu": "100m", "memory": "32Mi"}),
        _with(base, containers=[limits_only, limits_only]),
        {**base, "status": {**base["status"], "qosClass": "BestEffort"}},
    ]


@pytest.mark.parametrize("pod", _cases(), ids=lambda p: p["metadata"]["name"])
def test_a_record_reads_what_pod_info_reads(pod: dict[str, Any]) -> None:
    for _ in range(2):  # the second time through the memos
        record, info = PodRecord.from_manifest(pod), PodInfo.from_manifest(pod)
        assert dict(record.requests) == info.requests
        assert (record.qos_class, record.priority_class) == (info.qos_class, info.priority_class)
        assert (record.namespace, record.name, record.key, record.uid) == (
            info.namespace,
            info.name,
            info.key,
            info.uid,
        )
        assert (record.phase, record.priority, record.node_name) == (
            info.phase,
            info.priority,
            info.node_name,
        )
        assert record.terminating == info.is_terminating
        assert dict(record.annotations) == dict(info.annotations)
        assert record.manifest is pod


def test_a_malformed_quantity_names_the_field() -> None:
    pod = make_pod("bad", requests={"cpu": "lots"}, node="n1")
    with pytest.raises(QuantityError, match=r"spec\.containers\[0\]\.resources\.requests\.cpu"):
        PodRecord.from_manifest(pod)


def test_a_boolean_request_is_refused_even_after_an_equal_int() -> None:
    PodRecord.from_manifest(make_pod("one", requests={"cpu": 1}))
    with pytest.raises(QuantityError):
        PodRecord.from_manifest(make_pod("true", requests={"cpu": True}))


def test_resource_metrics_records_parse_when_not_given() -> None:
    pods = [make_pod("a", cpu="1", memory="1Gi", node="n1"), make_pod("b", cpu="2", memory="1Gi", node="n1")]
    parsed = ResourceMetrics(None, 0.0).records(pods)
    assert [r.requests["cpu"] for r in parsed] == [1000, 2000]
    given = ResourceMetrics(None, 0.0, pod_records=parsed)
    assert given.records([]) is parsed
