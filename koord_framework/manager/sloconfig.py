"""``slo-controller-config``: its keys parsed one by one, the last good value of each kept.

Koordinator's ``sloconfig`` handlers parse each key of the ConfigMap on its own; a key that does not parse
is reported and the previous value of *that key* stays in use (the others move on). ``SLOConfig.update``
does the same and returns the problems, each naming the key and the field, for the controller to log and
record as an Event on the ConfigMap.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from koord_framework.api.selectors import parse_label_selector
from koord_framework.koordlet.nodeslo import (
    CPUBurstStrategy,
    HostApplicationSpec,
    ResourceThresholdStrategy,
    default_node_slo_spec,
)
from koord_framework.manager.colocation import ColocationStrategy, colocation_strategies, merged
from koord_framework.manager.nodestrategies import NodeStrategies

__all__ = [
    "CONFIG_MAP_NAME",
    "DEFAULT_CONFIG_NAMESPACE",
    "KEYS",
    "NODE_SLO_SECTIONS",
    "ConfigProblem",
    "SLOConfig",
]

CONFIG_MAP_NAME: Final = "slo-controller-config"
DEFAULT_CONFIG_NAMESPACE: Final = "koordinator-system"

COLOCATION: Final = "colocation-config"
RESOURCE_THRESHOLD: Final = "resource-threshold-config"
RESOURCE_QOS: Final = "resource-qos-config"
CPU_BURST: Final = "cpu-burst-config"
SYSTEM: Final = "system-config"
HOST_APPLICATION: Final = "host-application-config"
CPU_NORMALIZATION: Final = "cpu-normalization-config"
RESOURCE_AMPLIFICATION: Final = "resource-amplification-config"
KEYS: Final = (
    COLOCATION,
    RESOURCE_THRESHOLD,
    RESOURCE_QOS,
    CPU_BURST,
    SYSTEM,
    HOST_APPLICATION,
    CPU_NORMALIZATION,
    RESOURCE_AMPLIFICATION,
)

NODE_SLO_SECTIONS: Final = {
    RESOURCE_THRESHOLD: "resourceUsedThresholdWithBE",
    RESOURCE_QOS: "resourceQOSStrategy",
    CPU_BURST: "cpuBurstStrategy",
    SYSTEM: "systemStrategy",
}
"""Keys whose merged strategy is a section of the NodeSLO spec."""


@dataclass(frozen=True)
class ConfigProblem:
    """A key of the ConfigMap that did not parse; its previous value stays in use."""

    key: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.key}: {self.field}" if self.field else self.key
        return f"{CONFIG_MAP_NAME} {where}: {self.message}; keeping the last good value"


def _typed(model: type[BaseModel]) -> Callable[[Mapping[str, Any]], None]:
    def check(data: Mapping[str, Any]) -> None:
        model.model_validate(data)

    return check


def _no_check(_data: Mapping[str, Any]) -> None:
    return None


def _host_apps(data: Mapping[str, Any]) -> None:
    for app in data.get("applications") or ():
        HostApplicationSpec.model_validate(app)


_STRATEGY_CHECKS: Final[Mapping[str, Callable[[Mapping[str, Any]], None]]] = {
    RESOURCE_THRESHOLD: _typed(ResourceThresholdStrategy),
    RESOURCE_QOS: _no_check,
    CPU_BURST: _typed(CPUBurstStrategy),
    SYSTEM: _no_check,
    HOST_APPLICATION: _host_apps,
    CPU_NORMALIZATION: _no_check,
    RESOURCE_AMPLIFICATION: _no_check,
}


class _Bad(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _pydantic_problem(prefix: str, err: PydanticValidationError) -> _Bad:
    first = err.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first["loc"])
    return _Bad(".".join(p for p in (prefix, loc) if p), str(first["msg"]))


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _Bad(where, f"must be an object, not {type(value).__name__}")
    return value


def _check_selector(selector: Any, where: str) -> None:
    if selector is None:
        return
    try:
        parse_label_selector(_object(selector, where), where)
    except _Bad:
        raise
    except Exception as exc:  # the selector parser's own error names the field
        raise _Bad(where, str(exc)) from exc


def _parse_strategy_key(key: str, text: str) -> dict[str, Any]:
    data = dict(_object(_json(text), ""))
    check = _STRATEGY_CHECKS[key]
    if "clusterStrategy" in data and data["clusterStrategy"] is not None:
        cluster = _object(data["clusterStrategy"], "clusterStrategy")
        try:
            check(cluster)
        except PydanticValidationError as exc:
            raise _pydantic_problem("clusterStrategy", exc) from exc
    nodes = data.get("nodeStrategies") or []
    if not isinstance(nodes, list):
        raise _Bad("nodeStrategies", "must be a list")
    for i, node in enumerate(nodes):
        where = f"nodeStrategies[{i}]"
        node = _object(node, where)
        _check_selector(node.get("nodeSelector"), f"{where}.nodeSelector")
        try:
            check({k: v for k, v in node.items() if k not in ("name", "nodeSelector")})
        except PydanticValidationError as exc:
            raise _pydantic_problem(where, exc) from exc
    return data


def _parse_colocation(text: str) -> dict[str, Any]:
    data = dict(_object(_json(text), ""))
    try:
        ColocationStrategy.from_mapping({k: v for k, v in data.items() if k != "nodeConfigs"})
    except PydanticValidationError as exc:
        raise _pydantic_problem("", exc) from exc
    nodes = data.get("nodeConfigs") or []
    if not isinstance(nodes, list):
        raise _Bad("nodeConfigs", "must be a list")
    for i, node in enumerate(nodes):
        where = f"nodeConfigs[{i}]"
        node = _object(node, where)
        _check_selector(node.get("nodeSelector"), f"{where}.nodeSelector")
        try:
            ColocationStrategy.from_mapping(
                {k: v for k, v in node.items() if k not in ("name", "nodeSelector")}
            )
        except PydanticValidationError as exc:
            raise _pydantic_problem(where, exc) from exc
    return data


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Bad("", f"not JSON: {exc}") from exc


@dataclass
class SLOConfig:
    """The parsed keys of ``slo-controller-config`` (each its last good value; absent keys: defaults)."""

    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    _parsed: dict[str, NodeStrategies[Any]] = field(default_factory=dict, repr=False)
    """Each key's merged strategies (nodes of a pool share them); cleared whenever a key changes."""

    def _strategies(self, key: str) -> NodeStrategies[Any]:
        if key not in self._parsed:
            self._parsed[key] = self._parse(key)
        return self._parsed[key]

    def _parse(self, key: str) -> NodeStrategies[Any]:
        data = self.values.get(key, {})
        if key == COLOCATION:
            return colocation_strategies(data).map(lambda s, _i: ColocationStrategy.model_validate(s))
        section = NODE_SLO_SECTIONS.get(key)
        default: dict[str, Any] = default_node_slo_spec()[section] if section else {}
        return NodeStrategies.parse(
            data,
            default=default,
            read=dict,
            merge=merged,
            nodes_key="nodeStrategies",
            cluster_key="clusterStrategy",
        )

    def update(self, data: Mapping[str, Any] | None) -> list[ConfigProblem]:
        """Take the ConfigMap's ``data``: keys that parse replace their value, keys removed go back to
        the defaults, keys that do not parse keep their last good value and are returned as problems."""
        data = dict(data or {})
        problems: list[ConfigProblem] = []
        for key in KEYS:
            text = data.get(key)
            if text is None or text == "":
                self.values.pop(key, None)
                self.raw.pop(key, None)
                continue
            if self.raw.get(key) == text:
                continue
            try:
                if not isinstance(text, str):
                    raise _Bad("", f"must be a string holding JSON, not {type(text).__name__}")
                parsed = _parse_colocation(text) if key == COLOCATION else _parse_strategy_key(key, text)
            except _Bad as exc:
                problems.append(ConfigProblem(key, exc.field, str(exc)))
                continue
            self.values[key] = parsed
            self.raw[key] = text
        self._parsed.clear()
        return problems

    # --- per node ----------------------------------------------------------------------------------------
    def colocation(self, labels: Mapping[str, str]) -> ColocationStrategy:
        """The node's colocation strategy: defaults, cluster, first matching ``nodeConfigs`` entry."""
        strategy: ColocationStrategy = self._strategies(COLOCATION).strategy_for(labels)
        return strategy

    def strategy(self, key: str, labels: Mapping[str, str]) -> dict[str, Any]:
        """The key's strategy for a node: the first matching node strategy merged over the cluster
        strategy, merged over the defaults of the NodeSLO section (empty for keys without a section).
        Read-only: nodes matching the same node strategy share it."""
        merged_strategy: dict[str, Any] = self._strategies(key).strategy_for(labels)
        return merged_strategy

    def node_slo_spec(self, labels: Mapping[str, str]) -> dict[str, Any]:
        """The NodeSLO spec a node with these labels gets (``getNodeSLOSpec``). Read-only: nodes matching
        the same node strategies share it (the cluster port copies what it stores)."""
        spec: dict[str, Any] = {
            section: self.strategy(key, labels) for key, section in NODE_SLO_SECTIONS.items()
        }
        apps = self.strategy(HOST_APPLICATION, labels).get("applications")
        if apps:
            spec["hostApplications"] = apps
        spec["extensions"] = {}
        return spec

    def metric_collect_policy(self, labels: Mapping[str, str]) -> dict[str, Any]:
        """``NodeMetric.spec.metricCollectPolicy`` from the node's colocation strategy."""
        s = self.colocation(labels)
        policy: dict[str, Any] = {
            "aggregateDurationSeconds": s.metric_aggregate_duration_seconds,
            "reportIntervalSeconds": s.metric_report_interval_seconds,
            "nodeMemoryCollectPolicy": s.metric_memory_collect_policy,
        }
        if s.metric_aggregate_policy:
            policy["nodeAggregatePolicy"] = copy.deepcopy(s.metric_aggregate_policy)
        return policy
