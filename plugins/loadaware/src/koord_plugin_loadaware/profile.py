"""Usage-threshold profiles: the args' thresholds, overridden per node by its ``usage-thresholds`` annotation.

A node annotated ``scheduling.koordinator.sh/usage-thresholds`` replaces whole parts of the profile: the
node thresholds, the prod thresholds and the aggregated (percentile) thresholds, each only when the
annotation gives a non-empty one. ``{"usageThresholds": {"memory": 60}}`` therefore disables the cpu check
on that node, exactly as in Koordinator (``generateUsageThresholdsFilterProfile``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord_framework.api.constants import ANNOTATION_CUSTOM_USAGE_THRESHOLDS
from koord_framework.config.common import DurationError, parse_duration_ns
from koord_plugin_loadaware.args import LoadAwareSchedulingArgs
from koord_plugin_loadaware.vectors import Vec, Vectorizer

__all__ = ["FilterProfile", "base_profile", "node_profile"]


@dataclass(frozen=True, slots=True)
class FilterProfile:
    """The thresholds a node's usage is filtered with, per class of pod."""

    usage: Vec
    """Thresholds (percent) for pods judged on the node's whole usage; all zero disables them."""
    prod: Vec
    """Thresholds for prod pods judged on prod usage; all zero means prod pods use ``usage``."""
    aggregated: Vec | None
    """Percentile thresholds replacing ``usage`` for non-prod pods; None when aggregated filtering is off."""
    agg_type: str = ""
    agg_window_ns: int = 0

    @property
    def prod_enabled(self) -> bool:
        return any(self.prod)


def base_profile(args: LoadAwareSchedulingArgs, vectorizer: Vectorizer) -> FilterProfile:
    agg = args.aggregated_filter()
    if agg is None:
        return FilterProfile(
            vectorizer.to_vec(args.usage_thresholds), vectorizer.to_vec(args.prod_usage_thresholds), None
        )
    thresholds, agg_type, window = agg
    return FilterProfile(
        vectorizer.to_vec(args.usage_thresholds),
        vectorizer.to_vec(args.prod_usage_thresholds),
        vectorizer.to_vec(thresholds),
        agg_type,
        round(window * 1e9),
    )


def node_profile(
    base: FilterProfile, annotations: Mapping[str, str], vectorizer: Vectorizer
) -> FilterProfile:
    """The profile for one node; ``base`` when the node has no (usable) annotation."""
    text = annotations.get(ANNOTATION_CUSTOM_USAGE_THRESHOLDS)
    if text is None:
        return base
    custom = _parse_custom(text)
    if custom is None:
        return base
    usage, prod, agg = custom
    if agg is not None and not (agg[0] and agg[1]):
        agg = None
    if not usage and not prod and agg is None:
        return base
    return FilterProfile(
        vectorizer.to_vec(usage) if usage else base.usage,
        vectorizer.to_vec(prod) if prod else base.prod,
        vectorizer.to_vec(agg[0]) if agg is not None else base.aggregated,
        agg[1] if agg is not None else base.agg_type,
        agg[2] if agg is not None else base.agg_window_ns,
    )


_Custom = tuple[dict[str, int], dict[str, int], tuple[dict[str, int], str, int] | None]


class _Invalid(ValueError):
    pass


def _parse_custom(text: str) -> _Custom | None:
    """The annotation as Go's ``json.Unmarshal`` into ``CustomUsageThresholds`` reads it; None on error.

    Go matches JSON keys to fields case-insensitively and ignores unknown keys; a later key wins.
    """
    try:
        data = json.loads(text, parse_float=_reject, parse_constant=_reject)
        if data is None:
            return ({}, {}, None)
        obj = _object(data)
        usage = _int_map(_field(obj, "usageThresholds"))
        prod = _int_map(_field(obj, "prodUsageThresholds"))
        agg_raw = _field(obj, "aggregatedUsage")
        agg = None
        if agg_raw is not None:
            agg_obj = _object(agg_raw)
            agg_type = _field(agg_obj, "usageAggregationType")
            if agg_type is not None and not isinstance(agg_type, str):
                raise _Invalid("usageAggregationType")
            window = _field(agg_obj, "usageAggregatedDuration")
            if window is not None and not isinstance(window, str):
                raise _Invalid("usageAggregatedDuration")
            agg = (
                _int_map(_field(agg_obj, "usageThresholds")),
                agg_type or "",
                parse_duration_ns(window) if window is not None else 0,
            )
    except (ValueError, DurationError):
        return None
    return usage, prod, agg


def _reject(text: str) -> Any:
    raise _Invalid(text)


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid("not an object")
    return value


def _field(obj: Mapping[str, Any], name: str) -> Any:
    found = None
    folded = name.lower()
    for key, value in obj.items():
        if key.lower() == folded:
            found = value
    return found


def _int_map(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    out: dict[str, int] = {}
    for key, item in _object(value).items():
        if item is None:
            out[key] = 0
        elif isinstance(item, int) and not isinstance(item, bool) and -(2**63) <= item < 2**63:
            out[key] = item
        else:
            raise _Invalid(key)
    return out
