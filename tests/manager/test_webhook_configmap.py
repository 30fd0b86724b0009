"""The ConfigMap validating webhook (``SLOConfig``): Koordinator's unit cases of ``slo_config_plugin_test.go``
(``TestSLOControllerPlugin_Validate``, ``Test_parallelizeCheckNode``) and of its checkers, plus the kit's
conformance."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from koord_framework.manager.webhook.admission import (
    AdmissionRequest,
    Denied,
    GroupVersionKind,
    GroupVersionResource,
)
from koord_framework.manager.webhook.configmap import (
    SLOConfigArgs,
    SLOConfigValidation,
    check_slo_controller_config,
)
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance

NS, NAME = "koordinator-system", "slo-controller-config"
COLOCATION = (
    '{"enable":true,"metricAggregateDurationSeconds":60,"cpuReclaimThresholdPercent":70,'
    '"memoryReclaimThresholdPercent":80,"updateTimeThresholdSeconds":300,"degradeTimeMinutes":5,'
    '"resourceDiffThreshold":0.1'
)
VALID_OTHERS = {
    "resource-threshold-config": '{"clusterStrategy":{"enable":true,"cpuSuppressThresholdPercent":60}}',
    "resource-qos-config": '{"clusterStrategy":{"enable":true,"beClass":{"cpuQOS":{"groupIdentity":0}}}}',
    "cpu-burst-config": '{"clusterStrategy":{"cfsQuotaBurstPeriodSeconds":60}}',
    "system-config": '{"clusterStrategy":{"minFreeKbytesFactor":150}}',
}
NODES = [
    {"metadata": {"name": "test-node0", "labels": {"xxx": "xxx", "yyy": "yyy"}}},
    {"metadata": {"name": "test-node1", "labels": {"yyy": "yyy"}}},
]


def _node_configs(*selectors: dict[str, Any]) -> str:
    configs = [
        {"nodeSelector": {"matchLabels": s}, "enable": True, "name": f"test{i + 1}"}
        for i, s in enumerate(selectors)
    ]
    return COLOCATION + ',"nodeConfigs":' + json.dumps(configs) + "}"


def _review(
    data: dict[str, str], op: str = "CREATE", old: dict[str, str] | None = None, name: str = NAME
) -> AdmissionRequest:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}
    old_cm = {**cm, "data": old} if old is not None else None
    return AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "ConfigMap"),
        resource=GroupVersionResource("", "v1", "configmaps"),
        operation=op,  # type: ignore[arg-type]
        name=name,
        namespace=NS,
        object=cm if op != "DELETE" else None,
        old_object=old_cm if op != "CREATE" else None,
    )


class _Nodes:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.nodes = nodes

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        assert kind == "Node"
        return self.nodes


def _answer(request: AdmissionRequest, nodes: list[dict[str, Any]] = NODES) -> dict[str, Any]:
    handler = SLOConfigValidation()
    handler.bind(_Nodes(nodes))
    return Dispatcher.admit([handler], request)


# --- TestSLOControllerPlugin_Validate -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "request_", "allowed", "reason"),
    [
        ("delete slo-manager-config", _review({}, op="DELETE", old={"colocation-config": "x"}), True, ""),
        (
            "create and config invalid",
            _review({k: "invalid_content" for k in VALID_OTHERS}),
            False,
            "ParseConfigFail",
        ),
        ("create and colocation not config", _review(dict(VALID_OTHERS)), True, ""),
        (
            "create and colocation metricAggregateDurationSeconds invalid",
            _review({"colocation-config": COLOCATION.replace(":60,", ":-1,", 1) + "}", **VALID_OTHERS}),
            False,
            "ConfigParamInvalid",
        ),
        (
            "create and config only clusterStrategy valid",
            _review({"colocation-config": COLOCATION + "}", **VALID_OTHERS}),
            True,
            "",
        ),
        (
            "create and config colocation nodeStrategies overlap",
            _review(
                {
                    "colocation-config": _node_configs({"xxx": "xxx"}, {"xxx": "xxx", "yyy": "yyy"}),
                    **VALID_OTHERS,
                }
            ),
            False,
            "NodeStrategiesOverlap",
        ),
        (
            "create and config colocation nodeStrategies have node conflict",
            _review({"colocation-config": _node_configs({"xxx": "xxx"}, {"yyy": "yyy"}), **VALID_OTHERS}),
            False,
            "ExistNodeConfict",
        ),
        (
            "update and config not changed",
            _review(
                {"colocation-config": _node_configs({"xxx": "xxx"}, {"yyy": "yyy"})},
                op="UPDATE",
                old={"colocation-config": _node_configs({"xxx": "xxx"}, {"yyy": "yyy"})},
            ),
            True,
            "",
        ),
        (
            "another ConfigMap is not looked at",
            _review({"colocation-config": "invalid_content"}, name="other"),
            True,
            "",
        ),
    ],
)
def test_validate(case: str, request_: AdmissionRequest, allowed: bool, reason: str) -> None:
    response = _answer(request_)
    assert response["allowed"] is allowed, (case, response)
    if not allowed:
        message = response["status"]["message"]
        assert response["status"]["code"] == 400
        assert message.startswith("___") and message.endswith("___")
        assert json.loads(message[3:-3])["reason"] == reason


def test_node_conflict_names_the_strategies_and_an_example_node() -> None:
    response = _answer(
        _review({"colocation-config": _node_configs({"xxx": "xxx"}, {"yyy": "yyy"}), **VALID_OTHERS})
    )
    assert json.loads(response["status"]["message"][3:-3]) == {
        "reason": "ExistNodeConfict",
        "message": {
            "config": "colocation-config",
            "strategies": ["test1", "test2"],
            "exampleNodes": ["test-node0"],
        },
    }


# --- Test_parallelizeCheckNode ------------------------------------------------------------------------------


def _nodes(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": str(i), "labels": {str(i): str(i), "name": str(i)}}} for i in range(n)]


def _in(*values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": "name", "operator": "In", "values": list(values)}]}


@pytest.mark.parametrize(
    ("selectors", "nodes", "conflict"),
    [
        ([{"matchLabels": {"1": "1"}}, {"matchLabels": {"2": "2"}}], 5, False),
        ([{"matchLabels": {"1": "1"}}, {"matchLabels": {"2": "2"}}], 500, False),
        ([{"matchLabels": {"30": "30"}}, {"matchLabels": {"name": "30"}}], 500, True),
        ([_in("50", "51"), {"matchLabels": {"name": "50"}}], 500, True),
        ([_in("2", "50", "51", "100", "300", "400"), _in("2", "50", "51", "100", "300", "400")], 500, True),
    ],
)
def test_check_nodes(selectors: list[dict[str, Any]], nodes: int, conflict: bool) -> None:
    configs = [{"name": f"strategy{i + 1}", "nodeSelector": s} for i, s in enumerate(selectors)]
    data = {"colocation-config": json.dumps({"nodeConfigs": configs})}
    if conflict:
        with pytest.raises(Denied) as err:
            check_slo_controller_config(None, data, _nodes(nodes))
        # Overlapping selectors are caught before any node is looked at; otherwise a node shows it.
        assert json.loads(err.value.reason[3:-3])["reason"] in ("NodeStrategiesOverlap", "ExistNodeConfict")
    else:
        check_slo_controller_config(None, data, _nodes(nodes))


def test_overlap_of_in_values_needs_no_node() -> None:
    data = {
        "colocation-config": json.dumps(
            {
                "nodeConfigs": [
                    {"name": "a", "nodeSelector": _in("50", "51")},
                    {"name": "b", "nodeSelector": {"matchLabels": {"name": "50"}}},
                ]
            }
        )
    }
    with pytest.raises(Denied, match="NodeStrategiesOverlap"):
        check_slo_controller_config(None, data, [])


# --- the checkers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (
            "resource-threshold-config",
            '{"clusterStrategy":{"cpuSuppressThresholdPercent":101}}',
            "ConfigParamInvalid",
        ),
        ("cpu-burst-config", '{"clusterStrategy":{"cpuBurstPercent":0}}', "ConfigParamInvalid"),
        ("colocation-config", '{"resourceDiffThreshold":0}', "ConfigParamInvalid"),
        ("colocation-config", '{"resourceDiffThreshold":1.5}', "ConfigParamInvalid"),
        ("colocation-config", '{"degradeTimeMinutes":0}', "ConfigParamInvalid"),
        ("colocation-config", '{"midCPUThresholdPercent":101}', "ConfigParamInvalid"),
        (
            "resource-threshold-config",
            '{"nodeStrategies":[{"name":"a","nodeSelector":{}}]}',
            "ConfigParamInvalid",
        ),
        (
            "resource-threshold-config",
            '{"nodeStrategies":[{"name":"a","nodeSelector":{"matchExpressions":[{"key":"k","operator":"Bad"}]}}]}',
            "ConfigParamInvalid",
        ),
        ("system-config", "{", "ParseConfigFail"),
    ],
)
def test_checker_refusals(key: str, value: str, reason: str) -> None:
    with pytest.raises(Denied) as err:
        check_slo_controller_config(None, {key: value}, [])
    assert err.value.code == 400
    assert json.loads(err.value.reason[3:-3])["reason"] == reason


def test_names_are_checked_only_when_asked() -> None:
    data = {
        "resource-threshold-config": json.dumps(
            {
                "nodeStrategies": [
                    {"nodeSelector": {"matchLabels": {"a": "1"}}},
                    {"nodeSelector": {"matchLabels": {"b": "1"}}},
                ]
            }
        )
    }
    check_slo_controller_config(None, data, [])
    with pytest.raises(Denied, match="nodeConfig Name need"):
        check_slo_controller_config(None, data, [], SLOConfigArgs(node_strategy_name_need_check=True))
    named = {
        "resource-threshold-config": json.dumps(
            {
                "nodeStrategies": [
                    {"name": "x", "nodeSelector": {"matchLabels": {"a": "1"}}},
                    {"name": "x", "nodeSelector": {"matchLabels": {"b": "1"}}},
                ]
            }
        )
    }
    with pytest.raises(Denied, match="confilict"):
        check_slo_controller_config(None, named, [], SLOConfigArgs(node_strategy_name_need_check=True))


def test_what_the_webhook_admits_the_controller_takes() -> None:
    from koord_framework.manager.sloconfig import SLOConfig

    data = {"colocation-config": COLOCATION + "}", **VALID_OTHERS}
    check_slo_controller_config(None, data, NODES)
    assert SLOConfig().update(data) == []
    bad = {"colocation-config": '{"metricReportIntervalSeconds":0}'}
    with pytest.raises(Denied):
        check_slo_controller_config(None, bad, NODES)
    assert SLOConfig().update(bad) != []


def test_data_that_is_not_an_object_is_a_bad_request() -> None:
    request = _review({})
    request = AdmissionRequest(
        **{**request.__dict__, "object": {"metadata": {"name": NAME, "namespace": NS}, "data": "x"}}
    )
    response = _answer(request)
    assert response["allowed"] is False and response["status"]["code"] == 400
    assert "data" in response["status"]["message"]


class TestSLOConfigConformance(AdmissionHandlerConformance):
    plugin_class = SLOConfigValidation
    cluster_objects: ClassVar[dict[str, list[dict[str, Any]]]] = {"Node": NODES}
