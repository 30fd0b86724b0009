"""Koordinator's ``cpunormalization`` plugin_test.go, configmap_event_handler_test.go and
noderesourcetopology_event_handler_test.go cases (a7a1b76b)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from koord_plugin_cpunormalizationratio import (
    CPUBasicInfo,
    CPUNormalization,
    CPUNormalizationConfig,
    CPUNormalizationStrategy,
    cpu_normalization_ratio,
    ratio_from_model,
)

from koord_framework.manager.noderesource import ColocationStrategy, ResourceMetrics

RATIO = "node.koordinator.sh/cpu-normalization-ratio"
ENABLED = "node.koordinator.sh/cpu-normalization-enabled"
BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
STRATEGY = ColocationStrategy.from_mapping({"enable": True})
XXX_RATIOS = {
    "baseRatio": 1.5,
    "turboEnabledRatio": 1.65,
    "hyperThreadEnabledRatio": 1.0,
    "hyperThreadTurboEnabledRatio": 1.1,
}


class Context:
    def __init__(self, config: dict[str, Any] | None, objects: list[dict[str, Any]] = ()) -> None:  # type: ignore[assignment]
        self.config = config or {}
        self.objects = {o["metadata"]["name"]: o for o in objects}

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return self.objects.get(name) if kind == "NodeResourceTopology" else None

    def slo_config(self, key: str) -> dict[str, Any]:
        return self.config if key == "cpu-normalization-config" else {}


def nrt(name: str = "test-node", info: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if info is not None:
        meta["annotations"] = {BASIC_INFO: info}
    return {"kind": "NodeResourceTopology", "metadata": meta}


HT_TURBO = '{"cpuModel": "XXX", "hyperThreadEnabled": true, "turboEnabled": true}'


def node(
    name: str = "test-node", labels: dict[str, str] | None = None, ratio: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    if ratio is not None:
        meta["annotations"] = {RATIO: ratio}
    return {"metadata": meta}


def plugin(config: dict[str, Any] | None, objects: list[dict[str, Any]] = ()) -> CPUNormalization:  # type: ignore[assignment]
    p = CPUNormalization()
    p.bind(Context(config, list(objects)))
    return p


def run(p: CPUNormalization, n: dict[str, Any]) -> list[dict[str, str]]:
    return [dict(i.annotations) for i in p.calculate(STRATEGY, n, [], ResourceMetrics(None, 0.0))]


def test_name_and_reset() -> None:
    assert CPUNormalization.name == "CPUNormalization"
    assert CPUNormalization().reset(node(), "") == []


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (node(ratio="[}"), node(ratio="1.10"), (True, "old ratio parsed error")),
        (node(ratio="1.10"), node(ratio="[}"), (False, "new ratio parsed error")),
        (node(), node(), (False, "ratios are nil")),
        (node(), node(ratio="1.10"), (True, "old ratio is nil")),
        (node(ratio="1.10"), node(), (True, "new ratio is nil")),
        (node(ratio="1.10"), node(ratio="1.10"), (False, "ratios are close")),
        (node(ratio="1.10"), node(ratio="1.099999999"), (False, "ratios are close")),
        (node(ratio="1.10"), node(ratio="1.20"), (True, "ratio is different")),
    ],
)
def test_need_sync_meta(old: dict[str, Any], new: dict[str, Any], want: tuple[bool, str]) -> None:
    assert CPUNormalization().need_sync_meta(STRATEGY, old, new) == want


@pytest.mark.parametrize(
    ("annotations", "merged", "want"),
    [
        (None, {}, {}),  # skip when no annotation to prepare
        (None, {RATIO: "1.10"}, {RATIO: "1.10"}),
        ({"xxx": "yyy"}, {RATIO: "1.20"}, {"xxx": "yyy", RATIO: "1.20"}),
    ],
)
def test_prepare(annotations: dict[str, str] | None, merged: dict[str, str], want: dict[str, str]) -> None:
    n: dict[str, Any] = {"metadata": {"name": "test-node", "annotations": dict(annotations or {})}}
    CPUNormalization().prepare_meta(STRATEGY, n, merged)
    assert n["metadata"]["annotations"] == want


def test_calculate_without_config_is_an_error() -> None:
    with pytest.raises(ValueError, match="config is not available"):
        CPUNormalization().calculate(STRATEGY, node(), [], ResourceMetrics(None, 0.0))


def test_calculate_bad_node_label_is_an_error() -> None:
    with pytest.raises(ValueError, match=f"test-node.*{ENABLED}"):
        run(plugin({}), node(labels={ENABLED: "{]"}))


def test_calculate_disabled_strategy_resets_ratio() -> None:
    assert run(plugin({"enable": False, "ratioModel": {}}), node()) == [{RATIO: "1.00"}]


@pytest.mark.parametrize(
    ("objects", "match"),
    [
        ([], "failed to get NodeResourceTopology"),
        ([nrt()], "info is missing"),
        ([nrt(info="{]")], "failed to parse CPUBasicInfo"),
    ],
    ids=["no NRT", "no CPUBasicInfo", "bad CPUBasicInfo"],
)
def test_calculate_missing_inputs_are_errors(objects: list[dict[str, Any]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        run(plugin({"enable": True, "ratioModel": {}}, objects), node())


def test_calculate_failed_to_get_ratio() -> None:
    p = plugin({"enable": True, "ratioModel": {"XXX": {"baseRatio": 1.0}}}, [nrt(info=HT_TURBO)])
    with pytest.raises(ValueError, match="missing HyperThreadTurboEnabledRatio for CPU XXX"):
        run(p, node())


def test_calculate_failed_to_validate_ratio() -> None:
    p = plugin(
        {"enable": True, "ratioModel": {"XXX": {"hyperThreadTurboEnabledRatio": 10}}}, [nrt(info=HT_TURBO)]
    )
    with pytest.raises(ValueError, match=r"too big, cur\[10.0\] > max\[5.0\]"):
        run(p, node())


def test_calculate_gets_ratio() -> None:
    p = plugin({"enable": True, "ratioModel": {"XXX": XXX_RATIOS}}, [nrt(info=HT_TURBO)])
    assert run(p, node()) == [{RATIO: "1.10"}]


def test_calculate_node_strategy_over_disabled_cluster() -> None:
    config = {
        "enable": False,
        "ratioModel": {"XXX": {k: 1.0 for k in XXX_RATIOS}},
        "nodeConfigs": [
            {
                "nodeSelector": {"matchLabels": {"xxx": "yyy"}},
                "enable": True,
                "ratioModel": {"XXX": XXX_RATIOS},
            }
        ],
    }
    p = plugin(config, [nrt("test-node-1", HT_TURBO)])
    assert run(p, node("test-node-1", labels={"xxx": "yyy"})) == [{RATIO: "1.10"}]


def test_calculate_node_label_enables_over_disabled_strategy() -> None:
    p = plugin({"enable": False, "ratioModel": {"XXX": XXX_RATIOS}}, [nrt(info=HT_TURBO)])
    assert run(p, node(labels={ENABLED: "true"})) == [{RATIO: "1.10"}]


def test_calculate_node_label_disables_over_enabled_strategy() -> None:
    p = plugin({"enable": True, "ratioModel": {"XXX": XXX_RATIOS}}, [nrt(info=HT_TURBO)])
    assert run(p, node(labels={ENABLED: "false"})) == [{RATIO: "1.00"}]


def _info(ht: bool = False, turbo: bool = False, model: str = "CPU XXX") -> CPUBasicInfo:
    return CPUBasicInfo(cpu_model=model, hyper_thread_enabled=ht, turbo_enabled=turbo)


def _strategy(
    models: dict[str, dict[str, float]] | None, default: float | None = None
) -> CPUNormalizationStrategy:
    return CPUNormalizationStrategy.model_validate(
        {"enable": True, "defaultRatio": default, "ratioModel": models}
    )


FULL = {"CPU XXX": XXX_RATIOS}


@pytest.mark.parametrize(
    ("info", "strategy", "want"),
    [
        (None, _strategy(None), None),  # nil model
        (_info(), _strategy({"CPU YYY": {"baseRatio": 1.0}}), None),  # no ratio for model
        (_info(True, True), _strategy({"CPU XXX": {"baseRatio": 1.5}}), None),  # missing HT+turbo ratio
        (_info(True, True), _strategy(FULL), 1.1),
        (_info(ht=True), _strategy(FULL), 1.0),
        (_info(turbo=True), _strategy(FULL), 1.65),
        (_info(), _strategy(FULL), 1.5),
        (_info(), _strategy({"CPU XXX": {}}), None),  # missing base ratio
    ],
)
def test_ratio_from_model(
    info: CPUBasicInfo | None, strategy: CPUNormalizationStrategy, want: float | None
) -> None:
    if want is None:
        with pytest.raises(ValueError):
            ratio_from_model(info, strategy)
    else:
        assert ratio_from_model(info, strategy) == want


@pytest.mark.parametrize(
    ("info", "strategy", "want"),
    [
        (None, _strategy(None), None),  # nil model and nil default ratio
        (None, _strategy(None, 2.5), 2.5),  # nil model and valid default ratio
        (_info(), _strategy({"CPU XXX": {**XXX_RATIOS, "baseRatio": 1.9}}, 3.5), 1.9),  # model first
        (_info(), _strategy({"CPU XXX": {}}, 2.2), 2.2),  # default ratio with an invalid model
    ],
)
def test_cpu_normalization_ratio(
    info: CPUBasicInfo | None, strategy: CPUNormalizationStrategy, want: float | None
) -> None:
    if want is None:
        with pytest.raises(ValueError):
            cpu_normalization_ratio(info, strategy)
    else:
        assert cpu_normalization_ratio(info, strategy) == want


# --- configmap_event_handler_test.go: the merge ------------------------------------------------------------
def test_config_defaults_when_key_absent() -> None:
    cfg = CPUNormalizationConfig.from_mapping({})
    assert cfg.cluster.enable is False and cfg.cluster.ratio_model == {}
    assert cfg.nodes == ()


def test_config_node_strategy_merged_over_cluster() -> None:
    cfg = CPUNormalizationConfig.from_mapping(
        {
            "enable": True,
            "ratioModel": {"XXX": {"baseRatio": 1.5, "turboEnabledRatio": 1.8}, "YYY": {"baseRatio": 1.2}},
            "nodeConfigs": [
                {
                    "name": "pool",
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "ratioModel": {"XXX": {"baseRatio": 2.0}},
                },
                {"name": "no selector", "enable": False},
            ],
        }
    )
    node_strategy = cfg.strategy_for({"pool": "a"})
    assert node_strategy.enable is True  # kept from the cluster strategy
    assert node_strategy.ratio_model is not None
    # each model's entry is replaced whole; other models kept
    assert node_strategy.ratio_model["XXX"].model_dump(exclude_none=True) == {"base_ratio": 2.0}
    assert node_strategy.ratio_model["YYY"].base_ratio == 1.2
    assert cfg.strategy_for({"pool": "b"}) == cfg.cluster  # a missing selector matches no node


def test_config_empty_selector_matches_every_node() -> None:
    cfg = CPUNormalizationConfig.from_mapping(
        {"enable": True, "nodeConfigs": [{"nodeSelector": {}, "enable": False}]}
    )
    assert cfg.strategy_for({"any": "node"}).enable is False


def test_bad_config_keeps_the_last_good_one() -> None:
    ctx = Context({"enable": True, "ratioModel": {"XXX": XXX_RATIOS}}, [nrt(info=HT_TURBO)])
    p = CPUNormalization()
    p.bind(ctx)
    assert run(p, node()) == [{RATIO: "1.10"}]
    ctx.config = {"enable": "not-a-bool", "ratioModel": []}
    assert run(p, node()) == [{RATIO: "1.10"}]


# --- noderesourcetopology_event_handler_test.go ---------------------------------------------------------
def _nrt(info: dict[str, Any] | str | None, version: str = "1") -> dict[str, Any]:
    obj = nrt(info=info if info is None or isinstance(info, str) else json.dumps(info))
    obj["metadata"]["resourceVersion"] = version
    return obj


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        (None, _nrt(None), False),  # created without basic info
        (None, _nrt("{]"), False),  # created with a bad one
        (None, _nrt({"cpuModel": "XXX"}), True),
        (_nrt({"cpuModel": "XXX"}), _nrt({"cpuModel": "XXX"}, "2"), False),  # unchanged
        (_nrt({"cpuModel": "XXX"}), _nrt({"cpuModel": "YYY"}, "2"), True),
        (_nrt({"cpuModel": "XXX"}), _nrt({"cpuModel": "XXX", "turboEnabled": True}, "2"), True),
        (_nrt({"cpuModel": "XXX"}), _nrt({"cpuModel": "XXX", "hyperThreadEnabled": True}, "2"), True),
        (_nrt({"cpuModel": "XXX"}), _nrt({"cpuModel": "YYY"}), False),  # same resourceVersion: a resync
        (_nrt("{]"), _nrt({"cpuModel": "XXX"}, "2"), True),  # old unreadable
        (_nrt({"cpuModel": "XXX"}), _nrt("{]", "2"), False),  # new unreadable
        (_nrt(None), _nrt({"cpuModel": "XXX"}, "2"), True),
        (_nrt({"cpuModel": "XXX"}), None, False),  # deleted
    ],
)
def test_nrt_events(old: dict[str, Any] | None, new: dict[str, Any] | None, want: bool) -> None:
    assert CPUNormalization().wants_event("NodeResourceTopology", old, new) is want
