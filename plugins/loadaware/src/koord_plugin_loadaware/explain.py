"""LoadAwareScheduling's section of ``koord explain node``: the node's usage against the thresholds.

Per resource: the usage Filter compares (the NodeMetric's node usage plus the estimates of assigned pods
not yet reported in it, Koordinator's ``GetNodeMetricAndEstimatedOfExisting``), as a percent of the
node's allocatable, against ``usageThresholds`` (and the prod usage against ``prodUsageThresholds``);
then every assigned pod with its estimate and whether the NodeMetric already reports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from koord_framework.explain.hooks import ExplainSection

if TYPE_CHECKING:
    from koord_plugin_loadaware.plugin import LoadAwareScheduling


def _pct(used: int, allocatable: int) -> float | None:
    return round(100 * used / allocatable, 1) if allocatable > 0 else None


def explain_node(plugin: LoadAwareScheduling, node_name: str) -> ExplainSection:
    args = plugin.args
    names = plugin.vectorizer.names
    snapshot = plugin.handle.snapshot
    ni = snapshot.get(node_name) if snapshot is not None else None
    if ni is None:
        return ExplainSection("LoadAwareScheduling", ["the node is not in the scheduler's snapshot"], {})
    view, profile = plugin._node_view(ni.node)  # the node's own thresholds (annotation) over the args'
    allocatable = dict(zip(names, view.alloc, strict=True))
    aggregated = profile.aggregated is not None
    thresholds = dict(zip(names, profile.aggregated if profile.aggregated is not None else profile.usage))
    prod_thresholds = dict(zip(names, profile.prod, strict=True))
    with plugin._lock:
        load = plugin.cache.get(node_name)
        metric = load.metric if load is not None else None
        existing = None
        if load is not None:
            agg = (profile.agg_type, profile.agg_window_ns) if aggregated else ("", 0)
            existing = load.existing_estimate(False, *agg)
        prod = load.existing_estimate(True) if load is not None else None
        assigned = list(load.pods.values()) if load is not None else []
    now = plugin.handle.clock.now()
    lines: list[str] = []
    data: dict[str, Any] = {"allocatable": allocatable, "thresholds": thresholds}
    if aggregated:
        data["aggregation"] = {"type": profile.agg_type, "windowSeconds": profile.agg_window_ns / 1e9}
        lines.append(
            f"thresholds on aggregated usage {profile.agg_type} over {profile.agg_window_ns / 1e9:g}s"
        )
    if metric is None:
        lines.append("no NodeMetric: Filter passes the node and Score gives it 0")
        data["nodeMetric"] = None
    else:
        age = None if metric.update_time is None else now - metric.update_time
        expired = age is None or age >= args.node_metric_expiration_seconds
        lines.append(
            f"NodeMetric updated {'never' if age is None else f'{age:.0f}s ago'}"
            f" (expires after {args.node_metric_expiration_seconds}s){': EXPIRED' if expired else ''}"
        )
        data["nodeMetric"] = {"ageSeconds": age, "expired": expired}
    rows = []
    for i, name in enumerate(names):
        used = existing[i] if existing is not None else None
        threshold = thresholds.get(name)
        pct = _pct(used, allocatable[name]) if used is not None else None
        over = pct is not None and threshold is not None and threshold > 0 and pct > threshold
        row: dict[str, Any] = {
            "resource": name,
            "allocatable": allocatable[name],
            "usagePlusEstimates": used,
            "percent": pct,
            "threshold": threshold,
            "exceeds": over,
        }
        text = f"{name}: usage+estimates {used if used is not None else '-'} of {allocatable[name]}"
        text += f" = {pct}%" if pct is not None else ""
        text += f" vs threshold {threshold}%" if threshold else " (no threshold)"
        text += "  EXCEEDS" if over else ""
        if profile.prod_enabled and prod is not None:
            prod_t = prod_thresholds.get(name)
            row["prodUsage"], row["prodThreshold"] = prod[i], prod_t
            text += f"; prod {prod[i]} = {_pct(prod[i], allocatable[name])}% vs {prod_t}%"
        rows.append(row)
        lines.append(text)
    data["resources"] = rows
    pods: list[dict[str, Any]] = []
    reported = metric.pod_usages if metric is not None else {}
    for pod in sorted(assigned, key=lambda p: p.key):
        estimate = dict(zip(names, pod.estimated, strict=True)) if pod.estimated is not None else None
        pods.append(
            {"pod": pod.key, "estimated": estimate, "reported": pod.key in reported, "prod": pod.prod}
        )
    data["assignedPods"] = pods
    if pods:
        lines.append(f"assigned pods ({len(pods)}): estimate, and whether the NodeMetric reports the pod")
        for p in pods[:20]:
            est = ", ".join(f"{k}={v}" for k, v in (p["estimated"] or {}).items()) or "-"
            lines.append(f"  {p['pod']}: {est}{' (reported)' if p['reported'] else ''}")
        if len(pods) > 20:
            lines.append(f"  ... {len(pods) - 20} more (-o json lists them all)")
    return ExplainSection("LoadAwareScheduling", lines, data)
