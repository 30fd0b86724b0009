"""``CPUNormalization``: the node annotation ``node.koordinator.sh/cpu-normalization-ratio`` (Koordinator's
``noderesource/plugins/cpunormalization``).

The ratio says how much faster one CPU of this node is than the reference CPU. It is looked up in the
``cpu-normalization-config`` ratio model by the CPU model, hyper-threading and turbo status the koordlet
reports on the node's NodeResourceTopology (``node.koordinator.sh/cpu-basic-info``), falling back to the
strategy's ``defaultRatio``, and must lie in [1.0, 5.0]. When normalization is off for the node (the
strategy's ``enable``, overridden by the node label ``node.koordinator.sh/cpu-normalization-enabled``) the
ratio is reset to ``1.00``. koord-manager's node-resource controller then amplifies the node's
``kubernetes.io/batch-cpu`` by a ratio above 1, and the ResourceAmplification calculator folds it into the
cpu amplification ratio.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from koord_framework.manager.noderesource import (
    ANNOTATION_CPU_NORMALIZATION_RATIO,
    ColocationStrategy,
    NodeResourcePlugin,
    ResourceItem,
    ResourceMetrics,
)
from koord_framework.plugin import NoArgs
from koord_plugin_cpunormalizationratio.config import (
    LABEL_CPU_NORMALIZATION_ENABLED,
    CPUBasicInfo,
    CPUNormalizationConfig,
    CPUNormalizationStrategy,
)

__all__ = [
    "CONFIG_KEY",
    "CPUNormalization",
    "CPUNormalizationArgs",
    "cpu_normalization_ratio",
    "parse_ratio",
    "ratio_from_model",
]

log = logging.getLogger("koord.manager.cpunormalization")

CONFIG_KEY: Final = "cpu-normalization-config"
NRT_KIND: Final = "NodeResourceTopology"
DEFAULT_RATIO_STR: Final = "1.00"
MIN_RATIO: Final = 1.0
"""Ratios below 1 are not supported (no resource shrinking)."""
MAX_RATIO: Final = 5.0
"""A guard against an unexpectedly large amplification."""
RATIO_DIFF_EPSILON: Final = 0.01
"""Two ratios closer than this are the same (``NormalizationRatioDiffEpsilon``)."""
_GO_FLOAT = re.compile(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|[iI]nf(inity)?|NaN)")


class CPUNormalizationArgs(NoArgs):
    """CPUNormalization takes no args: its settings are ``slo-controller-config``'s
    ``cpu-normalization-config`` key."""


def parse_ratio(node: Mapping[str, Any]) -> float:
    """``extension.GetCPUNormalizationRatio``: the node's ratio, -1 when it has none; raises ``ValueError``
    when the annotation is not a positive number."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if text is None:
        return -1.0
    if not _GO_FLOAT.fullmatch(text):  # strconv.ParseFloat's syntax, stricter than Python's float()
        raise ValueError(f"parse cpu normalization ratio failed, err: invalid syntax {text!r}")
    value = float(text)
    if value <= 0:
        raise ValueError(f"illegal cpu normalization ratio: {text}")
    return value


def _node_enabled(node: Mapping[str, Any]) -> bool | None:
    """``GetCPUNormalizationEnabled``: the node label as a bool, ``None`` when absent."""
    text = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_CPU_NORMALIZATION_ENABLED)
    if text is None:
        return None
    if text in ("1", "t", "T", "true", "TRUE", "True"):  # strconv.ParseBool
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(f"parse cpu normalization enabled failed, err: invalid syntax {text!r}")


def ratio_from_model(info: CPUBasicInfo | None, strategy: CPUNormalizationStrategy) -> float:
    """``getCPUNormalizationRatioFromModel``: the model's ratio for the CPU's hyper-threading and turbo
    status; raises ``ValueError`` when the model or that ratio is missing."""
    if strategy.ratio_model is None:
        raise ValueError("ratio model is nil")
    model = info.cpu_model if info is not None else ""
    cfg = strategy.ratio_model.get(model)
    if cfg is None or info is None:
        raise ValueError(f"no ratio for CPU {model}")
    if info.hyper_thread_enabled and info.turbo_enabled:
        value, field = cfg.hyper_thread_turbo_enabled_ratio, "HyperThreadTurboEnabledRatio"
    elif info.hyper_thread_enabled:
        value, field = cfg.hyper_thread_enabled_ratio, "HyperThreadEnabledRatio"
    elif info.turbo_enabled:
        value, field = cfg.turbo_enabled_ratio, "TurboEnabledRatio"
    else:
        value, field = cfg.base_ratio, "BaseRatio"
    if value is None:
        raise ValueError(f"missing {field} for CPU {model}")
    return value


def cpu_normalization_ratio(info: CPUBasicInfo | None, strategy: CPUNormalizationStrategy) -> float:
    """``getCPUNormalizationRatio``: the model's ratio, else the strategy's ``defaultRatio``."""
    try:
        return ratio_from_model(info, strategy)
    except ValueError as exc:
        if strategy.default_ratio is not None:
            return strategy.default_ratio
        raise ValueError(f"failed to get cpu normalization ratio from model, err: {exc}") from exc


def _valid(ratio: float) -> None:
    if math.isnan(ratio) or ratio < MIN_RATIO:
        raise ValueError(f"the ratio is too small, cur[{ratio}] < min[{MIN_RATIO}]")
    if ratio > MAX_RATIO:
        raise ValueError(f"the ratio is too big, cur[{ratio}] > max[{MAX_RATIO}]")


def _changed(old: CPUBasicInfo | None, new: CPUBasicInfo | None) -> bool:
    """``isCPUBasicInfoChanged``."""
    if old is None or new is None:
        return (old is None) != (new is None)
    return (old.cpu_model, old.hyper_thread_enabled, old.turbo_enabled) != (
        new.cpu_model,
        new.hyper_thread_enabled,
        new.turbo_enabled,
    )


def _info(obj: Mapping[str, Any] | None) -> CPUBasicInfo | None:
    return CPUBasicInfo.from_annotations(((obj or {}).get("metadata") or {}).get("annotations"))


class CPUNormalization(NodeResourcePlugin[CPUNormalizationArgs]):
    """The node's cpu-normalization ratio from its CPU model and ``cpu-normalization-config``."""

    name = "CPUNormalization"
    Args = CPUNormalizationArgs
    resource_names: ClassVar[Sequence[str]] = ()
    annotation_names: ClassVar[Sequence[str]] = (ANNOTATION_CPU_NORMALIZATION_RATIO,)
    watches: ClassVar[Sequence[str]] = (NRT_KIND,)

    def __init__(self, args: CPUNormalizationArgs | Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self._raw: Mapping[str, Any] | None = None
        self._config = CPUNormalizationConfig()

    def config(self) -> CPUNormalizationConfig:
        """The parsed key; a key that does not parse keeps the last good config (as Koordinator's handler
        does) and is logged with the field."""
        if self.context is None:
            raise ValueError(
                "failed to get config in cpu normalization calculation, err: config is not available"
            )
        raw = self.context.slo_config(CONFIG_KEY)
        if raw != self._raw:
            try:
                self._config = CPUNormalizationConfig.from_mapping(raw)
            except ValueError as exc:
                log.warning("slo-controller-config %s: %s; keeping the last good config", CONFIG_KEY, exc)
            self._raw = raw
        return self._config

    def wants_event(self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
        """Only a NodeResourceTopology whose CPU basic info appeared or changed (``nrtHandler``)."""
        if kind != NRT_KIND or new is None:
            return False
        try:
            info_new = _info(new)
        except ValueError:
            return False
        if old is None:
            return info_new is not None
        old_version = (old.get("metadata") or {}).get("resourceVersion")
        if old_version is not None and old_version == (new.get("metadata") or {}).get("resourceVersion"):
            return False  # a resync, not a change
        try:
            info_old = _info(old)
        except ValueError:
            return True
        return _changed(info_old, info_new)

    def reset(self, node: Mapping[str, Any], message: str) -> list[ResourceItem]:
        """Nothing: the ratio annotation stays when colocation is turned off (as in Koordinator)."""
        return []

    def calculate(
        self,
        strategy: ColocationStrategy,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        metrics: ResourceMetrics,
    ) -> list[ResourceItem]:
        config = self.config()
        name = str((node.get("metadata") or {}).get("name") or "")
        labels = (node.get("metadata") or {}).get("labels") or {}
        node_strategy = config.strategy_for(labels)
        try:
            node_enabled = _node_enabled(node)
        except ValueError as exc:
            raise ValueError(
                f"node {name}: label {LABEL_CPU_NORMALIZATION_ENABLED}: failed to get node label in cpu "
                f"normalization calculation, err: {exc}"
            ) from exc
        # The node label takes precedence over the strategy.
        enabled = node_enabled if node_enabled is not None else bool(node_strategy.enable)
        if not enabled:
            return [self._item(DEFAULT_RATIO_STR)]
        assert self.context is not None  # config() checked it
        nrt = self.context.get(NRT_KIND, name)
        if nrt is None:
            raise ValueError(
                f"node {name}: failed to get NodeResourceTopology in cpu normalization calculation"
            )
        try:
            info = _info(nrt)
        except ValueError as exc:
            raise ValueError(
                f"NodeResourceTopology {name}: failed to parse CPUBasicInfo in cpu normalization "
                "calculation, "
                f"err: {exc}"
            ) from exc
        if info is None:
            raise ValueError(
                f"NodeResourceTopology {name}: failed to get CPUBasicInfo in cpu normalization calculation, "
                "err: info is missing"
            )
        try:
            ratio = cpu_normalization_ratio(info, node_strategy)
        except ValueError as exc:
            raise ValueError(
                f"node {name}: failed to get ratio in cpu normalization calculation, err: {exc}"
            ) from exc
        try:
            _valid(ratio)
        except ValueError as exc:
            raise ValueError(
                f"node {name}: failed to validate ratio in cpu normalization calculation, ratio {ratio}, "
                f"err: {exc}"
            ) from exc
        return [self._item(f"{ratio:.2f}")]

    def _item(self, ratio: str) -> ResourceItem:
        return ResourceItem(self.name, annotations={ANNOTATION_CPU_NORMALIZATION_RATIO: ratio})

    def prepare_meta(
        self, strategy: ColocationStrategy, node: dict[str, Any], annotations: Mapping[str, str]
    ) -> None:
        """Set the ratio when one was calculated; otherwise leave the node's as it is."""
        ratio = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
        if ratio is not None:
            node["metadata"]["annotations"][ANNOTATION_CPU_NORMALIZATION_RATIO] = ratio

    def need_sync_meta(
        self, strategy: ColocationStrategy, old_node: Mapping[str, Any], new_node: Mapping[str, Any]
    ) -> tuple[bool, str]:
        """``NeedSyncMeta``: write when the ratio appears, disappears or moves by more than 0.01."""
        try:
            old = parse_ratio(old_node)
        except ValueError:
            return True, "old ratio parsed error"
        try:
            new = parse_ratio(new_node)
        except ValueError:
            return False, "new ratio parsed error"
        if new == -1 and old == -1:
            return False, "ratios are nil"
        if old == -1:
            return True, "old ratio is nil"
        if new == -1:
            return True, "new ratio is nil"
        if not (old > new + RATIO_DIFF_EPSILON or old < new - RATIO_DIFF_EPSILON):
            return False, "ratios are close"
        return True, "ratio is different"
