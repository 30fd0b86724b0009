"""BatchResource's section of ``koord explain node``: Koordinator's formula with the node's numbers.

    batch = min(capacity * threshold, capacity - safetyMargin - max(systemUsed, nodeReserved) - HP)

``HP`` is what the policy says: the HP pods' usage (``usage``), their larger of request and usage
(``maxUsageRequest``), or, for memory under ``request``, their requests (with the node reservation
instead of the system usage). The numbers are those ``calculate`` uses (``Calculation``); the result is
``calculate``'s own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from koord_framework.explain.hooks import ExplainSection
from koord_framework.manager.noderesource import ColocationStrategy, ResourceMetrics

if TYPE_CHECKING:
    from koord_plugin_batchresource.plugin import BatchResource

TITLE = "BatchResource (koord-manager)"


def explain_resources(
    plugin: BatchResource,
    strategy: ColocationStrategy,
    node: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    metrics: ResourceMetrics,
) -> ExplainSection:
    from koord_plugin_batchresource.plugin import CPU, MEMORY, Calculation

    items = plugin.calculate(strategy, node, pods, metrics)
    results = {i.name: i for i in items}
    data: dict[str, Any] = {
        "policy": {"cpu": strategy.cpu_calculate_policy, "memory": strategy.memory_calculate_policy},
        "reclaimThresholdPercent": {
            "cpu": strategy.cpu_reclaim_threshold_percent,
            "memory": strategy.memory_reclaim_threshold_percent,
        },
        "thresholdPercent": {
            "cpu": strategy.batch_cpu_threshold_percent,
            "memory": strategy.batch_memory_threshold_percent,
        },
        "result": {
            name: {"quantity": i.quantity, "reset": i.reset, "message": i.message}
            for name, i in results.items()
        },
    }
    lines = [
        "batch = min(capacity * threshold, capacity - safetyMargin - max(systemUsed, nodeReserved) - HP)",
        f"policy cpu {strategy.cpu_calculate_policy}, memory {strategy.memory_calculate_policy};"
        f" reclaimThresholdPercent cpu {strategy.cpu_reclaim_threshold_percent},"
        f" memory {strategy.memory_reclaim_threshold_percent}",
    ]
    if any(i.reset for i in items) or metrics.node_metric is None:
        reason = next((i.message for i in items if i.message), "no NodeMetric")
        lines.append(f"reset: {reason}")
        return ExplainSection(TITLE, lines, data)
    c = Calculation(strategy, node, pods, metrics.node_metric)
    numbers = {
        "capacity": c.capacity,
        "safetyMargin": c.safety_margin,
        "nodeReserved": c.node_reserved,
        "systemUsedOrReserved": c.system_used,
        "hpRequest": c.hp_request,
        "hpUsed": c.hp_used,
        "hpMaxUsedRequest": c.hp_max_used_req,
    }
    data["numbers"] = {k: dict(v) for k, v in numbers.items()}
    for key, label in ((CPU, "cpu (milli-cores)"), (MEMORY, "memory (bytes)")):
        lines.append(
            f"{label}: capacity {c.capacity[key]}, safetyMargin {c.safety_margin[key]},"
            f" nodeReserved {c.node_reserved[key]}, systemUsed-or-reserved {c.system_used[key]},"
            f" HP request {c.hp_request[key]}, HP used {c.hp_used[key]}, HP max(used, request)"
            f" {c.hp_max_used_req[key]}"
        )
    for name, item in sorted(results.items()):
        lines.append(f"{name} = {item.quantity}: {item.message}")
    return ExplainSection(TITLE, lines, data)
