"""``ResourceAmplification``: the node annotation ``node.koordinator.sh/resource-amplification-ratio``
(Koordinator's ``noderesource/plugins/resourceamplification``).

    cpu ratio   = resourceAmplificationRatio["cpu"] (1 when unset) * cpu-normalization ratio (when set)
    other ratio = resourceAmplificationRatio[<resource>]

from the ``resource-amplification-config`` key of ``slo-controller-config`` (its ratios count only when the
node's strategy is enabled) and the node's ``node.koordinator.sh/cpu-normalization-ratio``. The cpu ratio
replaces the configured one only when it is above 1; every ratio written must be at least 1, and no ratio
removes the annotation. The scheduler's NodeResourcesFit / NodeNUMAResource and the node mutating webhook
(``NodeMutatingWebhook``, off by default) read it.

The key has the shape of the cpu-normalization one: the cluster strategy inline and ``nodeConfigs`` (name,
``nodeSelector``, strategy), each node strategy merged over the cluster strategy (fields left out kept, the
ratio map merged by resource); a node takes the first node config whose selector matches.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from koord_framework.api.constants import ANNOTATION_NODE_AMPLIFICATION_RATIO
from koord_framework.manager.noderesource import (
    ANNOTATION_CPU_NORMALIZATION_RATIO,
    ColocationStrategy,
    NodeResourcePlugin,
    ResourceItem,
    ResourceMetrics,
)
from koord_framework.manager.nodestrategies import NodeStrategies
from koord_framework.plugin import NoArgs

__all__ = [
    "CONFIG_KEY",
    "ResourceAmplification",
    "ResourceAmplificationArgs",
    "ResourceAmplificationConfig",
    "ResourceAmplificationStrategy",
    "format_ratios",
]

log = logging.getLogger("koord.manager.resourceamplification")

CONFIG_KEY: Final = "resource-amplification-config"
_GO_FLOAT = re.compile(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|[iI]nf(inity)?|NaN)")


class ResourceAmplificationArgs(NoArgs):
    """ResourceAmplification takes no args: its settings are ``slo-controller-config``'s
    ``resource-amplification-config`` key."""


class ResourceAmplificationStrategy(BaseModel):
    """``configuration.ResourceAmplificationStrategy``."""

    model_config = ConfigDict(frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True)

    enable: bool | None = None
    """Whether the configured ratios apply to the node (the cpu-normalization ratio applies regardless)."""
    resource_amplification_ratio: dict[str, float] | None = None
    """Resource name -> amplification ratio (at least 1)."""


DEFAULT_STRATEGY = ResourceAmplificationStrategy(enable=False)
"""``DefaultResourceAmplificationCfg``: off."""


def merge(
    base: ResourceAmplificationStrategy, over: ResourceAmplificationStrategy
) -> ResourceAmplificationStrategy:
    """``util.MergeCfg(base, over)``: fields ``over`` sets replace; the ratio map merges by resource."""
    fields = over.model_dump(exclude_none=True)
    merged = base.model_dump()
    if "resource_amplification_ratio" in fields:
        merged["resource_amplification_ratio"] = {
            **(merged.get("resource_amplification_ratio") or {}),
            **fields.pop("resource_amplification_ratio"),
        }
    merged.update(fields)
    return ResourceAmplificationStrategy.model_validate(merged)


@dataclass(frozen=True)
class ResourceAmplificationConfig(NodeStrategies[ResourceAmplificationStrategy]):
    """The parsed key: the cluster strategy (over the default) and the node strategies (over it);
    ``strategy_for(labels)`` is ``GetStrategyCopy``."""

    cluster: ResourceAmplificationStrategy = DEFAULT_STRATEGY

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ResourceAmplificationConfig:
        """Raises ``ValueError`` (pydantic's ``ValidationError`` or a selector error) naming the field."""
        return cls.parse_models(data, default=DEFAULT_STRATEGY, merge=merge)


def format_ratios(ratios: Mapping[str, float]) -> str:
    """The annotation's JSON: keys sorted, each ratio with two decimals (``extension.Ratio``)."""
    return "{" + ",".join(f"{json.dumps(k)}:{ratios[k]:.2f}" for k in sorted(ratios)) + "}"


def _cpu_normalization_ratio(node: Mapping[str, Any]) -> float:
    """``extension.GetCPUNormalizationRatio``: -1 when absent; ``ValueError`` when not a positive number."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if text is None:
        return -1.0
    if not _GO_FLOAT.fullmatch(text):
        raise ValueError(f"parse cpu normalization ratio failed, err: invalid syntax {text!r}")
    value = float(text)
    if value <= 0:
        raise ValueError(f"illegal cpu normalization ratio: {text}")
    return value


class ResourceAmplification(NodeResourcePlugin[ResourceAmplificationArgs]):
    """The node's resource amplification ratios from ``resource-amplification-config`` and its
    cpu-normalization ratio."""

    name = "ResourceAmplification"
    Args = ResourceAmplificationArgs
    resource_names: ClassVar[Sequence[str]] = ()
    annotation_names: ClassVar[Sequence[str]] = (ANNOTATION_NODE_AMPLIFICATION_RATIO,)

    def __init__(self, args: ResourceAmplificationArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self._raw: Mapping[str, Any] | None = None
        self._config = ResourceAmplificationConfig()

    def config(self) -> ResourceAmplificationConfig:
        """The parsed key; a key that does not parse keeps the last good config (logged with the field)."""
        if self.context is None:
            raise ValueError("cfgHandler is not available")
        raw = self.context.slo_config(CONFIG_KEY)
        if raw != self._raw:
            try:
                self._config = ResourceAmplificationConfig.from_mapping(raw)
            except ValueError as exc:
                log.warning("slo-controller-config %s: %s; keeping the last good config", CONFIG_KEY, exc)
            self._raw = raw
        return self._config

    def reset(self, node: Mapping[str, Any], message: str) -> list[ResourceItem]:
        """Nothing to reset: with colocation off no item carries the ratio, so ``prepare_meta`` removes it."""
        return []

    def ratios(self, node: Mapping[str, Any]) -> dict[str, float]:
        """The node's final ratios (``Calculate`` before formatting); ``ValueError`` naming the node."""
        name = str((node.get("metadata") or {}).get("name") or "")
        labels = (node.get("metadata") or {}).get("labels") or {}
        strategy = self.config().strategy_for(labels)
        ratios: dict[str, float] = {}
        if strategy.enable:
            ratios.update(strategy.resource_amplification_ratio or {})
        configured = ratios.get("cpu", 0.0)
        cpu = configured if configured > 0 else 1.0
        try:
            normalization = _cpu_normalization_ratio(node)
        except ValueError as exc:
            raise ValueError(
                f"calculate failed for node {name}, calculateCPUAmplificationRatio failed: failed to get cpu "
                f"normalization ratio, error: {exc}"
            ) from exc
        if normalization > 0:
            cpu *= normalization
        if cpu > 1:
            ratios["cpu"] = cpu
        for resource, ratio in sorted(ratios.items()):
            if ratio < 1:
                raise ValueError(
                    f"calculate failed for node {name}, amplification ratio is invalid: ratio with resource "
                    f"type {resource} and value {ratio} is invalid"
                )
        return ratios

    def calculate(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> list[ResourceItem]:
        ratios = self.ratios(node)
        if not ratios:
            return [ResourceItem(self.name)]  # no annotation: prepare_meta removes the node's
        return [
            ResourceItem(self.name, annotations={ANNOTATION_NODE_AMPLIFICATION_RATIO: format_ratios(ratios)})
        ]

    def prepare_meta(
        self, strategy: ColocationStrategy, node: dict[str, Any], annotations: Mapping[str, str]
    ) -> None:
        """Set the calculated ratios, or remove the node's when none was calculated."""
        ratio = annotations.get(ANNOTATION_NODE_AMPLIFICATION_RATIO)
        if ratio is None:
            node["metadata"]["annotations"].pop(ANNOTATION_NODE_AMPLIFICATION_RATIO, None)
        else:
            node["metadata"]["annotations"][ANNOTATION_NODE_AMPLIFICATION_RATIO] = ratio

    def need_sync_meta(
        self, strategy: ColocationStrategy, old_node: Mapping[str, Any], new_node: Mapping[str, Any]
    ) -> tuple[bool, str]:
        """``NeedSyncMeta``: write when the annotation text appears, disappears or changes."""
        old = ((old_node.get("metadata") or {}).get("annotations") or {}).get(
            ANNOTATION_NODE_AMPLIFICATION_RATIO, ""
        )
        new = ((new_node.get("metadata") or {}).get("annotations") or {}).get(
            ANNOTATION_NODE_AMPLIFICATION_RATIO, ""
        )
        if old == "" and new == "":
            return False, "ratio remains empty"
        if old == "":
            return True, "old ratio is empty"
        if new == "":
            return True, "new ratio is empty"
        if old == new:
            return False, "ratio remains unchanged"
        return True, "ratio changed"
