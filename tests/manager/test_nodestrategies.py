"""NodeStrategies: Koordinator's per-node strategy lookup, shared by every slo-controller-config key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koord_framework.manager.colocation import colocation_strategies, merged
from koord_framework.manager.nodestrategies import NodeStrategies
from koord_framework.manager.sloconfig import SLOConfig


def _parse(data: dict[str, Any]) -> NodeStrategies[dict[str, Any]]:
    return NodeStrategies.parse(data, default={"a": 1, "m": {"x": 1}}, read=dict, merge=merged)


def test_cluster_over_default_node_over_cluster_first_match_wins() -> None:
    s = _parse(
        {
            "a": 2,
            "m": {"y": 2},
            "nodeConfigs": [
                {"name": "p", "nodeSelector": {"matchLabels": {"pool": "p"}}, "m": {"x": 3}},
                {"name": "q", "nodeSelector": {"matchLabels": {"pool": "p"}}, "a": 9},
            ],
        }
    )
    assert s.cluster == {"a": 2, "m": {"x": 1, "y": 2}}
    assert s.strategy_for({"pool": "p"}) == {"a": 2, "m": {"x": 3, "y": 2}}
    assert s.index_for({"pool": "p"}) == 0
    assert s.strategy_for({"pool": "other"}) is s.cluster
    assert s.index_for({}) == -1


def test_selector_semantics_are_label_selector_as_selector() -> None:
    s = _parse({"nodeConfigs": [{"name": "none", "a": 5}, {"name": "all", "nodeSelector": {}, "a": 7}]})
    assert s.strategy_for({"any": "node"})["a"] == 7  # missing: no node; empty: every node


def test_bad_entries_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"nodeConfigs\[0\].nodeSelector.matchExpressions\[0\].operator"):
        _parse({"nodeConfigs": [{"nodeSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}]})
    with pytest.raises(ValueError, match=r"nodeConfigs\[1\]: must be an object"):
        _parse({"nodeConfigs": [{}, "x"]})


def test_map_keeps_selectors_and_passes_the_index() -> None:
    s = _parse({"nodeConfigs": [{"nodeSelector": {"matchLabels": {"k": "v"}}, "a": 3}]})
    m = s.map(lambda strategy, i: (strategy["a"], i))
    assert m.cluster == (1, -1)
    assert m.strategy_for({"k": "v"}) == (3, 0)


def test_colocation_empty_selector_matches_every_node_as_koordinator() -> None:
    s = colocation_strategies({"enable": True, "nodeConfigs": [{"nodeSelector": {}, "enable": False}]})
    assert s.strategy_for({"x": "y"})["enable"] is False
    c = SLOConfig()
    c.update({"colocation-config": json.dumps({"enable": True, "nodeConfigs": [{"enable": False}]})})
    assert c.colocation({"x": "y"}).enable is True  # no selector: the entry applies to no node
