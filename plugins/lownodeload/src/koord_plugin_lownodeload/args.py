"""``LowNodeLoadArgs`` (``descheduler/v1alpha2``), with Koordinator's defaulting and validation.

Defaulting (``SetDefaults_LowNodeLoadArgs``):

* ``nodeFit`` true, ``nodeMetricExpirationSeconds`` 180, ``detectorCacheTimeout`` 5m;
* ``anomalyCondition`` unset → ``{timeout: 1m, consecutiveAbnormalities: 5, consecutiveNormalities: 3}``;
  given with ``consecutiveAbnormalities: 0`` → only that becomes 5 — the ``consecutiveNormalities``
  default sits in an ``else if``, so a condition with both counts 0 keeps ``consecutiveNormalities: 0``
  and then fails validation, exactly as in Koordinator;
* ``resourceWeights``: cpu 1, memory 1 and 1 for every resource named in low/high thresholds; a given map
  keeps its entries but any of those default resources with a weight <= 0 gets 1;
* each node pool inherits, where it leaves them unset, the top-level thresholds, weights and anomaly
  condition (and a pool's zero anomaly counts take the top-level ones).

Validation runs on the internal form, where the top-level fields become a first pool named
``__default_node_pool__``; problems are reported at the v1alpha2 paths a user wrote.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from koord_framework.config.common import ConfigModel, Duration, LabelSelector
from koord_framework.descheduler.args import Namespaces, fail, selector_problems
from koord_framework.plugin import PluginArgs

ResourceThresholds = dict[str, float]
"""Resource name -> percentage of the node's (raw) allocatable."""

DEFAULT_NODE_METRIC_EXPIRATION_SECONDS = 180
DEFAULT_DETECTOR_CACHE_TIMEOUT = Duration(300)
DEFAULT_ANOMALY_TIMEOUT = Duration(60)
DEFAULT_CONSECUTIVE_ABNORMALITIES = 5
DEFAULT_CONSECUTIVE_NORMALITIES = 3
DEFAULT_POOL_NAME = "__default_node_pool__"

UInt32 = Field(default=0, ge=0, le=2**32 - 1)


class LoadAnomalyCondition(ConfigModel):
    """How many consecutive over-threshold observations make a node count as overloaded."""

    timeout: Duration | None = None
    """How long an anomaly lasts unless confirmed again (default 1m; unset or 0 means 60s)."""
    consecutive_abnormalities: int = UInt32
    """A node is overloaded after more than this many consecutive observations over the high thresholds
    (1 means at once). Default 5."""
    consecutive_normalities: int = UInt32
    """An overloaded node is normal again after more than this many normal observations. Default 3."""


class LowNodeLoadPodSelector(ConfigModel):
    name: str = ""
    selector: LabelSelector | None = None
    """Pods matching this selector are candidates; with several selectors any one may match."""


class LowNodeLoadNodePool(ConfigModel):
    """Nodes balanced among themselves with their own thresholds."""

    name: str = ""
    node_selector: LabelSelector | None = None
    """Nodes of the pool; unset: every node (even those an earlier pool already handled)."""
    use_deviation_thresholds: bool = False
    """Thresholds are deviations (percentage points) around the pool's mean usage instead of absolute."""
    high_thresholds: ResourceThresholds | None = None
    """Usage percentage above which a node is overloaded (per resource)."""
    low_thresholds: ResourceThresholds | None = None
    """Usage percentage at or below which a node is underloaded (per resource, all must hold)."""
    prod_high_thresholds: ResourceThresholds | None = None
    """Like highThresholds, for the usage of prod pods only."""
    prod_low_thresholds: ResourceThresholds | None = None
    """Like lowThresholds, for the usage of prod pods only."""
    resource_weights: dict[str, int] | None = None
    """Weights of resources when ranking nodes and pods by usage."""
    anomaly_condition: LoadAnomalyCondition | None = None


class LowNodeLoadArgs(PluginArgs):
    """Evict pods from nodes whose measured load (NodeMetric) is over the high thresholds, as long as
    underloaded nodes can take them."""

    model_config = ConfigDict(strict=True)

    paused: bool = False
    """Do nothing while true."""
    dry_run: bool = False
    """Run the whole algorithm but evict nothing (the plugin logs what it would evict)."""
    number_of_nodes: int = Field(default=0, ge=-(2**31), le=2**31 - 1)
    """Act only when more nodes than this are underloaded (low, prod-low and both-low together)."""
    node_metric_expiration_seconds: int = DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
    """Seconds after which a NodeMetric is stale; nodes with stale or missing metrics are left alone."""
    evictable_namespaces: Namespaces | None = None
    """Namespaces whose pods may be evicted (include) or may not (exclude); only one of the two."""
    node_selector: LabelSelector | None = None
    """Nodes of the default pool; unset: every node."""
    pod_selectors: list[LowNodeLoadPodSelector] = []
    """Only pods matching one of these may be evicted; empty: any pod."""
    node_fit: bool = True
    """A pod is evicted only if it fits an underloaded node (selectors, taints, requests) without pushing
    that node over its high thresholds."""
    use_deviation_thresholds: bool = False
    """Thresholds are deviations around the mean usage of the pool's nodes instead of absolute values."""
    high_thresholds: ResourceThresholds | None = None
    """Per resource, the usage percentage above which a node is overloaded (e.g. cpu: 75, memory: 80)."""
    low_thresholds: ResourceThresholds | None = None
    """Per resource, the usage percentage at or below which a node is underloaded (e.g. cpu: 45)."""
    prod_high_thresholds: ResourceThresholds | None = None
    """Like highThresholds for the usage of prod pods; must not exceed highThresholds."""
    prod_low_thresholds: ResourceThresholds | None = None
    """Like lowThresholds for the usage of prod pods; must not exceed prodHighThresholds."""
    resource_weights: dict[str, int] | None = None
    """Weights when ranking nodes and pods by usage (default cpu 1, memory 1, 1 for thresholded resources)."""
    anomaly_condition: LoadAnomalyCondition | None = None
    """When an over-threshold node counts as overloaded (default: more than 5 consecutive observations)."""
    detector_cache_timeout: Duration = DEFAULT_DETECTOR_CACHE_TIMEOUT
    """How long a node's anomaly detector is kept without being used (at least the descheduling interval)."""
    node_pools: list[LowNodeLoadNodePool] = []
    """More pools, each with its own nodes and thresholds, processed after the default one."""

    @model_validator(mode="after")
    def _default_and_validate(self) -> LowNodeLoadArgs:
        self._apply_defaults()
        fail("LowNodeLoadArgs", self._problems())
        return self

    # --- defaulting ---------------------------------------------------------------------------------
    def _set(self, **values: Any) -> None:
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def _apply_defaults(self) -> None:
        cond = self.anomaly_condition
        if cond is None:
            cond = LoadAnomalyCondition(
                timeout=DEFAULT_ANOMALY_TIMEOUT,
                consecutive_abnormalities=DEFAULT_CONSECUTIVE_ABNORMALITIES,
                consecutive_normalities=DEFAULT_CONSECUTIVE_NORMALITIES,
            )
        elif cond.consecutive_abnormalities == 0:
            cond = cond.model_copy(update={"consecutive_abnormalities": DEFAULT_CONSECUTIVE_ABNORMALITIES})
        elif cond.consecutive_normalities == 0:
            cond = cond.model_copy(update={"consecutive_normalities": DEFAULT_CONSECUTIVE_NORMALITIES})
        defaults = {"cpu": 1, "memory": 1}
        for name in self.low_thresholds or {}:
            defaults[name] = 1
        for name in self.high_thresholds or {}:
            defaults[name] = 1
        if self.resource_weights is None:
            weights = defaults
        else:
            weights = dict(self.resource_weights)
            for name, weight in defaults.items():
                if weights.get(name, 0) <= 0:
                    weights[name] = weight
        self._set(anomaly_condition=cond, resource_weights=weights)
        pools = []
        for pool in self.node_pools:
            update: dict[str, Any] = {}
            # Unset pool fields share the top-level objects, as Koordinator's pools share its maps.
            for field in (
                "high_thresholds",
                "low_thresholds",
                "prod_high_thresholds",
                "prod_low_thresholds",
                "resource_weights",
            ):
                if getattr(pool, field) is None:
                    update[field] = getattr(self, field)
            if pool.anomaly_condition is None:
                update["anomaly_condition"] = cond
            else:
                pc = pool.anomaly_condition
                fix: dict[str, int] = {}
                if pc.consecutive_abnormalities == 0:
                    fix["consecutive_abnormalities"] = cond.consecutive_abnormalities
                if pc.consecutive_normalities == 0:
                    fix["consecutive_normalities"] = cond.consecutive_normalities
                if fix:
                    update["anomaly_condition"] = pc.model_copy(update=fix)
            pools.append(pool.model_copy(update=update) if update else pool)
        self._set(node_pools=pools)

    # --- validation -----------------------------------------------------------------------------------
    def _problems(self) -> list[tuple[tuple[str | int, ...], str, Any]]:
        out: list[tuple[tuple[str | int, ...], str, Any]] = []
        if self.number_of_nodes < 0:
            out.append((("numberOfNodes",), "must be greater than or equal to 0", self.number_of_nodes))
        if self.node_metric_expiration_seconds <= 0:
            out.append(
                (
                    ("nodeMetricExpirationSeconds",),
                    "nodeMetricExpiredSeconds should be a positive value",
                    self.node_metric_expiration_seconds,
                )
            )
        ns = self.evictable_namespaces
        if ns is not None and ns.include and ns.exclude:
            out.append((("evictableNamespaces",), "only one of Include/Exclude namespaces can be set", None))
        for i, sel in enumerate(self.pod_selectors):
            out += selector_problems(sel.selector, ("podSelectors", i, "selector"))
        out += _pool_problems(
            (),
            self.node_selector,
            self.high_thresholds,
            self.low_thresholds,
            self.prod_high_thresholds,
            self.prod_low_thresholds,
            self.anomaly_condition,
        )
        for i, pool in enumerate(self.node_pools):
            out += _pool_problems(
                ("nodePools", i),
                pool.node_selector,
                pool.high_thresholds,
                pool.low_thresholds,
                pool.prod_high_thresholds,
                pool.prod_low_thresholds,
                pool.anomaly_condition,
            )
        return out


def _pool_problems(
    at: tuple[str | int, ...],
    node_selector: LabelSelector | None,
    high: ResourceThresholds | None,
    low: ResourceThresholds | None,
    prod_high: ResourceThresholds | None,
    prod_low: ResourceThresholds | None,
    cond: LoadAnomalyCondition | None,
) -> list[tuple[tuple[str | int, ...], str, Any]]:
    """``ValidateLowLoadUtilizationArgs`` for one pool (the top level is the default pool)."""
    out: list[tuple[tuple[str | int, ...], str, Any]] = selector_problems(
        node_selector, (*at, "nodeSelector")
    )
    high, low, prod_high, prod_low = high or {}, low or {}, prod_high or {}, prod_low or {}
    # (field, its percentages, the ones it may not exceed, the message when it does), in upstream's order
    bounded: tuple[tuple[str, ResourceThresholds, ResourceThresholds, str], ...] = (
        ("highThresholds", high, {}, ""),
        ("lowThresholds", low, high, "low percentage must be less than or equal to highThresholds"),
        (
            "prodHighThresholds",
            prod_high,
            high,
            "node percentage must be greater than or equal to prodHighThresholds",
        ),
        (
            "prodLowThresholds",
            prod_low,
            prod_high,
            "low percentage must be less than or equal to prodHighThresholds",
        ),
    )
    for field, values, bound, too_high in bounded:
        for name, pct in values.items():
            if pct < 0:
                out.append(((*at, field, name), "percentage must be greater than or equal to 0", pct))
            if name in bound and pct > bound[name]:
                out.append(((*at, field, name), too_high, pct))
    if cond is not None:
        for field, count in (
            ("consecutiveAbnormalities", cond.consecutive_abnormalities),
            ("consecutiveNormalities", cond.consecutive_normalities),
        ):
            if count <= 0:
                out.append(((*at, "anomalyCondition", field), f"{field} must be greater than 0", count))
    return out
