"""Node pools in Koordinator's internal form, and the threshold maps a pool works with.

The v1alpha2 args become a list of pools whose first one, ``__default_node_pool__``, carries the top-level
fields. Pools that left a threshold map unset share the top-level map *object* (Go copies the map
reference), and ``new_thresholds`` fills missing resources into those maps in place, so what one pool
fills, the pools sharing the map see — kept here because Koordinator behaves so.
"""

from __future__ import annotations

from dataclasses import dataclass

from koord_framework.api.selectors import LabelSelector as ParsedSelector
from koord_framework.descheduler.args import parse_selector_model
from koord_plugin_lownodeload.args import DEFAULT_POOL_NAME, LoadAnomalyCondition, LowNodeLoadArgs

MIN_PERCENTAGE = 0.0
MAX_PERCENTAGE = 100.0

Thresholds = dict[str, float]


@dataclass
class NodePool:
    name: str
    node_selector: ParsedSelector | None
    use_deviation_thresholds: bool
    low: Thresholds | None
    high: Thresholds | None
    prod_low: Thresholds | None
    prod_high: Thresholds | None
    resource_weights: dict[str, int]
    anomaly_condition: LoadAnomalyCondition | None


def pools_from_args(args: LowNodeLoadArgs) -> list[NodePool]:
    """The default pool (top-level fields) followed by ``nodePools``, sharing maps as Go does."""
    copies: dict[int, Thresholds] = {}

    def shared(d: dict[str, float] | None) -> Thresholds | None:
        if d is None:
            return None
        if id(d) not in copies:
            copies[id(d)] = dict(d)
        return copies[id(d)]

    weights = dict(args.resource_weights or {})
    out = [
        NodePool(
            name=DEFAULT_POOL_NAME,
            node_selector=parse_selector_model(args.node_selector),
            use_deviation_thresholds=args.use_deviation_thresholds,
            low=shared(args.low_thresholds),
            high=shared(args.high_thresholds),
            prod_low=shared(args.prod_low_thresholds),
            prod_high=shared(args.prod_high_thresholds),
            resource_weights=weights,
            anomaly_condition=args.anomaly_condition,
        )
    ]
    for pool in args.node_pools:
        out.append(
            NodePool(
                name=pool.name,
                node_selector=parse_selector_model(pool.node_selector),
                use_deviation_thresholds=pool.use_deviation_thresholds,
                low=shared(pool.low_thresholds),
                high=shared(pool.high_thresholds),
                prod_low=shared(pool.prod_low_thresholds),
                prod_high=shared(pool.prod_high_thresholds),
                resource_weights=dict(pool.resource_weights or {}),
                anomaly_condition=pool.anomaly_condition,
            )
        )
    return out


def new_thresholds(
    use_deviation: bool,
    low: Thresholds | None,
    high: Thresholds | None,
    prod_low: Thresholds | None,
    prod_high: Thresholds | None,
) -> tuple[Thresholds, Thresholds, Thresholds, Thresholds]:
    """``newThresholds``: every resource named in any map, plus memory, gets low and high thresholds.

    A resource missing from ``low`` gets 100% (0% with deviation thresholds, i.e. disabled) in *both* low
    and high, overwriting a high value; one present in ``low`` but missing from ``high`` stays missing
    there (a 0% high threshold). The same for the prod pair. Given maps are filled in place.
    """
    names: list[str] = []
    for m in (low, high, prod_low, prod_high):
        names.extend(m or ())
    names.append("memory")
    low = low if low is not None else {}
    high = high if high is not None else {}
    prod_low = prod_low if prod_low is not None else {}
    prod_high = prod_high if prod_high is not None else {}
    fill = MIN_PERCENTAGE if use_deviation else MAX_PERCENTAGE
    for name in names:
        if name not in low:
            low[name] = fill
            high[name] = fill
        if name not in prod_low:
            prod_low[name] = fill
            prod_high[name] = fill
    return low, high, prod_low, prod_high
