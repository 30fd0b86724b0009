"""ElasticQuota's section of ``koord explain quota``: the quota and its tree (min, max, runtime, used,
request of each quota from the root down to it, then its children), and the water-filling rounds that
gave the quota and its siblings their runtime.

The rounds are those of the plugin's own calculation (``QuotaTree.redistribution``), replayed on a copy of
the parent's tree for each resource: round 0 gives every quota its floor (its min, or its request when it
asks less and lends the rest), then each round splits what is left among the quotas still short of their
request in proportion to their shared weights (the largest-remainder split), hands back what a satisfied
quota does not need, and goes again with it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from koord_framework.api.resources import format_resource_list
from koord_framework.explain.hooks import ExplainSection

if TYPE_CHECKING:
    from koord_plugin_elasticquota.manager import GroupQuotaManager
    from koord_plugin_elasticquota.plugin import ElasticQuota

TITLE = "ElasticQuota"
FIELDS = ("min", "max", "runtime", "used", "request")


def _row(mgr: GroupQuotaManager, name: str) -> dict[str, Any]:
    mgr.refresh_runtime(name)
    summary = mgr.summary(name) or {}
    return {"name": name, **{f: dict(summary.get(f) or {}) for f in FIELDS}}


def _line(row: dict[str, Any], indent: str) -> str:
    cells = []
    for f in FIELDS:
        shown = ",".join(f"{k}={v}" for k, v in format_resource_list(row[f]).items()) or "-"
        cells.append(f"{f} {shown}")
    return f"{indent}{row['name']}: " + "; ".join(cells)


def explain_quota(plugin: ElasticQuota, name: str) -> ExplainSection | None:
    mgr = plugin.quotas.manager_for_quota(name)
    info = mgr.get_quota_info(name)
    if info is None:
        return None
    path = [q.name for q in reversed(mgr.path_to_root(name))]
    tree = [_row(mgr, q) for q in path]
    children = [_row(mgr, c) for c in mgr.children(name)]
    lines = [f"tree {mgr.tree_id or '(default)'}, root first:"]
    lines += [_line(row, "  " * (i + 1)) for i, row in enumerate(tree)]
    if children:
        lines.append("children:")
        lines += [_line(row, "  ") for row in children]
    rounds = _rounds(mgr, info.parent, name)
    for key, steps in rounds.items():
        unit = {"cpu": "milli-cores", "memory": "bytes"}.get(key, "base units")
        lines.append(f"runtime of {info.parent}'s children in {key}, {unit} (water-filling):")
        for step in steps:
            lines += _step_lines(step)
    data = {"tree": tree, "children": children, "parent": info.parent, "rounds": rounds}
    return ExplainSection(TITLE, lines, data)


def _rounds(mgr: GroupQuotaManager, parent: str, name: str) -> dict[str, list[dict[str, Any]]]:
    """Per resource of the parent's calculation, the rounds that set the runtimes of its children."""
    calc = mgr.calculators.get(parent)
    if calc is None:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for key in sorted(calc.resource_keys):
        tree = calc.trees.get(key)
        if tree is None or tree.find(name) is None:
            continue
        steps: list[dict[str, Any]] = []
        copy.deepcopy(tree).redistribution(int(calc.total.get(key, 0)), record=steps)
        out[key] = steps
    return out


def _step_lines(step: dict[str, Any]) -> list[str]:
    if step["round"] == 0:
        lines = [f"  round 0: total {step['total']}; floors:"]
        for q, v in sorted(step["nodes"].items()):
            lines.append(f"    {q}: {v['runtime']} (request {v['request']}; {v['why']})")
        lines.append(f"    left to share: {step['remaining']}")
        return lines
    lines = [f"  round {step['round']}: share {step['total']} by weight (sum {step['weightSum']}):"]
    for q, v in sorted(step["nodes"].items()):
        done = " = request, satisfied" if v["satisfied"] else ""
        lines.append(f"    {q}: weight {v['weight']} gets {v['share']} -> runtime {v['runtime']}{done}")
    lines.append(f"    handed back by satisfied quotas: {step['surplus']}")
    return lines
