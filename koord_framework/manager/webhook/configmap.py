"""The ConfigMap validating webhook: ``slo-controller-config`` checked before it is stored (Koordinator's
``pkg/webhook/cm``, plugin ``SLOConfig``; gate ``ConfigMapValidatingWebhook``, alpha, off by default).

Koordinator has this webhook in its core (it validates the manager's own configuration), so it lives in the
framework beside the controller that reads the ConfigMap, and checks each key with that controller's parser
(``koord_framework.manager.sloconfig``): what the webhook admits, the controller takes.

For each of colocation-config, resource-threshold-config, resource-qos-config, system-config and
cpu-burst-config whose value is set and differs from the old object's (Koordinator's
``CreateCheckersChanged``), in that order:

1. the value parses, and each node strategy has a non-empty ``nodeSelector`` that parses;
2. the parameters are in range (the controller's parser: Koordinator's ``validate`` tags);
3. with ``nodeStrategyNameNeedCheck`` (Koordinator's ``--node-strategy-name-need-check``, off): names set
   and unique;
4. no two node strategies select the same "virtual node" built from one selector's labels and ``In`` values
   (``NodeSelectorOverlap``);

and then, when some key has two or more node strategies, no existing node is selected by two of them
(``ExistNodeConflict``). A refusal is HTTP 400 with Koordinator's JSON-in-underscores message
(``___{"reason":"...","message":...}___``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from koord_framework.api.selectors import LabelSelector, parse_label_selector
from koord_framework.manager.sloconfig import (
    COLOCATION,
    CONFIG_MAP_NAME,
    CPU_BURST,
    DEFAULT_CONFIG_NAMESPACE,
    RESOURCE_QOS,
    RESOURCE_THRESHOLD,
    SYSTEM,
    SLOConfig,
)
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.plugin import PluginArgs

__all__ = [
    "SLOConfigArgs",
    "SLOConfigValidation",
    "check_slo_controller_config",
    "existing_node_conflict",
]

CHECKED_KEYS = (COLOCATION, RESOURCE_THRESHOLD, RESOURCE_QOS, SYSTEM, CPU_BURST)
"""Koordinator's ``CreateCheckersAll`` order (host-application, cpu-normalization and
resource-amplification have no checker there)."""

REASON_OVERLAP = "NodeStrategiesOverlap"
REASON_EXIST_NODE_CONFLICT = "ExistNodeConfict"  # sic: Koordinator's spelling
REASON_PARSE_FAIL = "ParseConfigFail"
REASON_PARAM_INVALID = "ConfigParamInvalid"


def json_error(reason: str, message: Any) -> str:
    """Koordinator's ``JsonFormatError.Error()``: the JSON between ``___`` markers."""
    body = json.dumps({"reason": reason, "message": message}, separators=(",", ":"), ensure_ascii=False)
    return f"___{body}___"


class SLOConfigArgs(PluginArgs):
    """Args of the ``SLOConfig`` ConfigMap check."""

    config_namespace: str = DEFAULT_CONFIG_NAMESPACE
    """Namespace of ``slo-controller-config`` (Koordinator's ``sloconfig.ConfigNameSpace``)."""
    node_strategy_name_need_check: bool = False
    """Require node strategy names, unique per key (``--node-strategy-name-need-check``, default false)."""


@dataclass(frozen=True)
class _NodeStrategy:
    name: str
    raw_selector: Mapping[str, Any]
    selector: LabelSelector


@dataclass(frozen=True)
class _Checker:
    key: str
    strategies: Sequence[_NodeStrategy]

    def matching(self, labels: Mapping[str, str]) -> list[str]:
        return [s.name for s in self.strategies if s.selector.matches(labels)]


def _strategies(key: str, data: Any) -> list[_NodeStrategy]:
    """The key's node strategies (``nodeConfigs`` of colocation); ``Denied`` for an empty selector."""
    field = "nodeConfigs" if key == COLOCATION else "nodeStrategies"
    entries = data.get(field) if isinstance(data, Mapping) else None
    out = []
    for entry in entries if isinstance(entries, list) else []:
        entry = entry if isinstance(entry, Mapping) else {}
        name = str(entry.get("name") or "")
        raw = entry.get("nodeSelector")
        if not isinstance(raw, Mapping) or not (raw.get("matchLabels") or raw.get("matchExpressions")):
            raise Denied(
                json_error(
                    REASON_PARAM_INVALID,
                    "nodeConfigs NodeSelector must not empty error! "
                    f"configType: {key},nodeConfig name:{name}",
                ),
                400,
            )
        try:
            selector = parse_label_selector(raw, f"{field}.nodeSelector")
        except Exception as exc:  # the parser's error names the field
            raise Denied(
                json_error(
                    REASON_PARAM_INVALID,
                    f"failed to parse node selector {json.dumps(raw)},configType: {key},"
                    f"nodeConfig name:{name}, err: {exc}",
                ),
                400,
            ) from None
        out.append(_NodeStrategy(name, raw, selector))
    return out


def _virtual_nodes(selector: Mapping[str, Any]) -> list[dict[str, str]]:
    """``generateNodesByNodeSelector``: the label sets a selector's ``matchLabels`` and ``In``-style values
    describe (one node per combination index, values taken round-robin as Koordinator does)."""
    expressions = [e for e in selector.get("matchExpressions") or [] if isinstance(e, Mapping)]
    count = 1
    for e in expressions:
        if e.get("values"):
            count *= len(e["values"])
    nodes: list[dict[str, str]] = [dict(selector.get("matchLabels") or {}) for _ in range(count)]
    for e in expressions:
        values = e.get("values") or []
        for i, node in enumerate(nodes):
            if values:
                node[str(e.get("key"))] = str(values[i % len(values)])
    return nodes


def _check_key(key: str, text: str, args: SLOConfigArgs, cm: str) -> _Checker:
    try:
        data = json.loads(text)
    except ValueError as exc:
        label = key.removesuffix("-config").replace("-", " ")
        message = f"Failed to parse {label} config in configmap {cm}, err: {exc}"
        raise Denied(json_error(REASON_PARSE_FAIL, message), 400) from None
    checker = _Checker(key, _strategies(key, data))
    # Parameters: the controller's own parser, so that what is admitted is what the controller takes.
    problems = SLOConfig().update({key: text})
    if problems:
        p = problems[0]
        where = f"{p.field}: " if p.field else ""
        raise Denied(json_error(REASON_PARAM_INVALID, f"{key}: {where}{p.message}"), 400)
    if args.node_strategy_name_need_check:
        seen: set[str] = set()
        for s in checker.strategies:
            if not s.name:
                raise Denied(json_error(REASON_PARAM_INVALID, f"nodeConfig Name need! configType:{key}"), 400)
            if s.name in seen:
                raise Denied(
                    json_error(
                        REASON_PARAM_INVALID,
                        f"nodeConfig Name confilict, configType:{key},nodeConfig Name:{s.name}! ",
                    ),
                    400,
                )
            seen.add(s.name)
    for node in itertools.chain.from_iterable(_virtual_nodes(s.raw_selector) for s in checker.strategies):
        matched = checker.matching(node)
        if len(matched) > 1:
            raise Denied(json_error(REASON_OVERLAP, {"config": key, "strategies": matched}), 400)
    return checker


def check_slo_controller_config(
    old_data: Mapping[str, Any] | None,
    data: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    args: SLOConfigArgs | None = None,
    where: str = f"{DEFAULT_CONFIG_NAMESPACE}/{CONFIG_MAP_NAME}",
) -> None:
    """Raise ``Denied`` (400) when ``data`` (the ConfigMap's, ``old_data`` before an update, ``None`` on
    create) must not be stored; ``nodes`` are the cluster's nodes."""
    args = args or SLOConfigArgs()
    checkers = []
    for key in CHECKED_KEYS:
        text = data.get(key)
        if not text:
            continue
        if not isinstance(text, str):
            raise Denied(json_error(REASON_PARSE_FAIL, f"{key} in configmap {where} is not a string"), 400)
        if old_data is not None and old_data.get(key) == text:
            continue
        checkers.append(_check_key(key, text, args, where))
    multi = [c for c in checkers if len(c.strategies) > 1]
    if not multi:
        return
    for node in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name") or "")):
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        for checker in multi:
            matched = checker.matching(labels)
            if len(matched) > 1:
                raise Denied(
                    json_error(
                        REASON_EXIST_NODE_CONFLICT,
                        {"config": checker.key, "strategies": matched, "exampleNodes": [meta.get("name")]},
                    ),
                    400,
                )


def existing_node_conflict(data: Mapping[str, Any], node: Mapping[str, Any]) -> None:
    """Raise ``Denied`` (400) when two node strategies of one key of the stored ``slo-controller-config``
    select ``node`` (the node webhook's check, Koordinator's ``CreateCheckersAll(nil, cfg, true)`` then
    ``ExistNodeConflict``); keys that do not parse are left out, as Koordinator skips them."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    for key in CHECKED_KEYS:
        text = data.get(key)
        if not isinstance(text, str) or not text:
            continue
        try:
            checker = _Checker(key, _strategies(key, json.loads(text)))
        except (ValueError, Denied):
            continue
        if len(checker.strategies) < 2:
            continue
        matched = checker.matching(labels)
        if len(matched) > 1:
            raise Denied(
                json_error(
                    REASON_EXIST_NODE_CONFLICT,
                    {"config": key, "strategies": matched, "exampleNodes": [meta.get("name")]},
                ),
                400,
            )


class SLOConfigValidation(AdmissionHandler[SLOConfigArgs]):
    """Refuses a ``slo-controller-config`` the manager's controller could not take, or whose node
    strategies overlap."""

    name = "SLOConfig"
    Args = SLOConfigArgs
    path: ClassVar[str] = "/validate-configmap"
    mutating: ClassVar[bool] = False
    resources: ClassVar[tuple[str, ...]] = ("configmaps",)
    watches: ClassVar[tuple[str, ...]] = ("Node",)
    gate: ClassVar[str] = "ConfigMapValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation not in ("CREATE", "UPDATE"):
            return  # Koordinator logs who deleted it and allows
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or request.namespace)
        if namespace != self.args.config_namespace or meta.get("name", request.name) != CONFIG_MAP_NAME:
            return
        data = obj.get("data") or {}
        if not isinstance(data, Mapping):
            raise ValueError("data: must be an object of strings")
        old_data = None
        if request.operation == "UPDATE" and request.old_object is not None:
            old_data = request.old_object.get("data") or {}
        check_slo_controller_config(
            old_data, data, self.lister.list("Node"), self.args, f"{namespace}/{CONFIG_MAP_NAME}"
        )
