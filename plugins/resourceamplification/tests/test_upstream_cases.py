"""Koordinator's ``resourceamplification`` plugin_test.go and configmap_event_handler_test.go cases
(a7a1b76b): NeedSyncMeta, Prepare, Calculate with and without cpu normalization, and the config merge."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_resourceamplification import ResourceAmplification, ResourceAmplificationConfig

from koord_framework.manager.noderesource import ColocationStrategy, ResourceMetrics

RATIO = "node.koordinator.sh/resource-amplification-ratio"
NORMALIZATION = "node.koordinator.sh/cpu-normalization-ratio"
STRATEGY = ColocationStrategy.from_mapping({"enable": True})


class Context:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return None

    def slo_config(self, key: str) -> dict[str, Any]:
        return self.config if key == "resource-amplification-config" else {}


def node(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "test-node"}
    if annotations is not None:
        meta["annotations"] = annotations
    if labels is not None:
        meta["labels"] = labels
    return {"metadata": meta}


def plugin(config: dict[str, Any]) -> ResourceAmplification:
    p = ResourceAmplification()
    p.bind(Context(config))
    return p


def run(config: dict[str, Any], n: dict[str, Any]) -> list[dict[str, str]]:
    return [
        dict(i.annotations) for i in plugin(config).calculate(STRATEGY, n, [], ResourceMetrics(None, 0.0))
    ]


WITH = node({RATIO: '{"cpu":1.12}'})


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (node(), node(), (False, "ratio remains empty")),
        (node(), WITH, (True, "old ratio is empty")),
        (WITH, node(), (True, "new ratio is empty")),
        (WITH, WITH, (False, "ratio remains unchanged")),
        (WITH, node({RATIO: '{"cpu":1.23}'}), (True, "ratio changed")),
    ],
)
def test_need_sync_meta(old: dict[str, Any], new: dict[str, Any], want: tuple[bool, str]) -> None:
    assert ResourceAmplification().need_sync_meta(STRATEGY, old, new) == want


@pytest.mark.parametrize(
    ("before", "merged", "after"),
    [
        ({}, {}, {}),  # no annotation to prepare
        ({RATIO: '{"cpu":1.22}'}, {}, {}),  # remove the old annotation when none is prepared
        ({}, {RATIO: '{"cpu":1.22}'}, {RATIO: '{"cpu":1.22}'}),
        ({"xxx": "yyy"}, {RATIO: '{"cpu":1.22}'}, {"xxx": "yyy", RATIO: '{"cpu":1.22}'}),
    ],
)
def test_prepare(before: dict[str, str], merged: dict[str, str], after: dict[str, str]) -> None:
    n: dict[str, Any] = {"metadata": {"name": "test-node", "annotations": dict(before)}}
    ResourceAmplification().prepare_meta(STRATEGY, n, merged)
    assert n["metadata"]["annotations"] == after


def test_unbound_plugin_has_no_config() -> None:
    with pytest.raises(ValueError, match="not available"):
        ResourceAmplification().calculate(STRATEGY, node(), [], ResourceMetrics(None, 0.0))


def test_reset_is_empty() -> None:
    assert ResourceAmplification().reset(node(), "why") == []


def test_bad_cpu_normalization_ratio_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"test-node.*cpu normalization ratio"):
        run({}, node({NORMALIZATION: "invalid"}))


def _enabled(ratios: dict[str, float]) -> dict[str, Any]:
    return {"enable": True, "resourceAmplificationRatio": ratios}


@pytest.mark.parametrize(
    ("config", "annotations", "want"),
    [
        ({}, {NORMALIZATION: "1.22"}, '{"cpu":1.22}'),  # with cpu normalization
        ({}, {}, None),  # without cpu normalization
        (_enabled({"cpu": 1.1, "memory": 2.1}), {}, '{"cpu":1.10,"memory":2.10}'),
        (_enabled({"cpu": 1.5, "memory": 2.5}), {NORMALIZATION: "1.20"}, '{"cpu":1.80,"memory":2.50}'),
        (_enabled({"memory": 3.5}), {NORMALIZATION: "1.50"}, '{"cpu":1.50,"memory":3.50}'),
        (
            _enabled({"memory": 3.5, "storage": 1.8}),
            {NORMALIZATION: "1.50"},
            '{"cpu":1.50,"memory":3.50,"storage":1.80}',
        ),
        (  # the final cpu ratio above 1 replaces a configured one below 1
            _enabled({"cpu": 0.8, "memory": 3.5, "storage": 1.8}),
            {NORMALIZATION: "1.50"},
            '{"cpu":1.20,"memory":3.50,"storage":1.80}',
        ),
        ({"enable": False, "resourceAmplificationRatio": {"memory": 2.0}}, {}, None),  # disabled: not applied
    ],
)
def test_calculate(config: dict[str, Any], annotations: dict[str, str], want: str | None) -> None:
    assert run(config, node(annotations)) == [{RATIO: want} if want is not None else {}]


@pytest.mark.parametrize(
    "ratios",
    [
        {"cpu": 0.5, "memory": 3.5, "storage": 1.8},  # final cpu ratio 0.75 < 1
        {"memory": 3.5, "storage": 0.5},  # one resource's ratio invalid
    ],
)
def test_calculate_invalid_ratio(ratios: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="amplification ratio is invalid"):
        run(_enabled(ratios), node({NORMALIZATION: "1.50"}))


# --- configmap_event_handler_test.go: the merge ------------------------------------------------------------
def test_config_default_is_off() -> None:
    cfg = ResourceAmplificationConfig.from_mapping({})
    assert cfg.cluster.enable is False and cfg.nodes == ()


def test_config_node_strategy_merged_over_cluster() -> None:
    cfg = ResourceAmplificationConfig.from_mapping(
        {
            "enable": True,
            "resourceAmplificationRatio": {"cpu": 1.5, "memory": 1.2},
            "nodeConfigs": [
                {
                    "name": "a",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "resourceAmplificationRatio": {"cpu": 2},
                },
                {"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}, "enable": False},
            ],
        }
    )
    assert cfg.strategy_for({"pool": "a"}).resource_amplification_ratio == {"cpu": 2.0, "memory": 1.2}
    assert cfg.strategy_for({"pool": "a"}).enable is True
    assert cfg.strategy_for({"pool": "b"}).enable is False
    assert cfg.strategy_for({}) == cfg.cluster
    assert run(
        {
            "enable": True,
            "nodeConfigs": [
                {"nodeSelector": {"matchLabels": {"pool": "a"}}, "resourceAmplificationRatio": {"cpu": 2}}
            ],
        },
        node(labels={"pool": "a"}),
    ) == [{RATIO: '{"cpu":2.00}'}]


def test_bad_config_keeps_the_last_good_one() -> None:
    ctx = Context(_enabled({"memory": 2.0}))
    p = ResourceAmplification()
    p.bind(ctx)
    assert p.ratios(node()) == {"memory": 2.0}
    ctx.config = {"enable": True, "resourceAmplificationRatio": {"memory": "x"}}
    assert p.ratios(node()) == {"memory": 2.0}
