"""The text forms of ``koord explain``: compact on 1,000 nodes.

Rejected nodes are grouped by (plugin, reason), one line per group with its count and a few names;
feasible nodes are listed best first, nodes with the very same scores on one line, at most ``top`` lines.
"""

from __future__ import annotations

from koord_framework.explain.node import Explanation, SectionResult
from koord_framework.explain.pod import NodeVerdict, PodExplanation

__all__ = ["render_pod", "render_sections"]

NAMES_SHOWN = 3
"""Node names a grouped line shows before ``(+N)``."""


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" (+{len(names) - NAMES_SHOWN})" if len(names) > NAMES_SHOWN else "")


def _scores(v: NodeVerdict) -> str:
    return ", ".join(f"{p} {r}/{n}/{w}" for p, (r, n, w) in v.scores.items())


def render_pod(ex: PodExplanation, *, top: int = 10, focus: str | None = None) -> str:
    lines: list[str] = []
    head = f"pod {ex.pod} (profile {ex.profile}): {ex.status}"
    if ex.node:
        head += f" on {ex.node}" if ex.status != "Waiting" else f" at {ex.node}"
    lines.append(head)
    if ex.bound_to:
        lines.append(f"  re-evaluated as if pending: the pod is bound to {ex.bound_to} in the cluster")
    if ex.gated_by:
        lines.append(f"  PreEnqueue: gated by {ex.gated_by} (the scheduler would not try it yet)")
    pf = ex.pre_filter
    pre = f"PreFilter: {pf['status']}"
    if pf["plugin"] and pf["status"] != "Success":
        pre += f" by {pf['plugin']}: {pf['reason']}"
    if pf["nodes"] is not None:
        pre += f"; nodes narrowed to {len(pf['nodes'])}: {_names(pf['nodes'])}"
    if pf["skippedFilter"]:
        pre += f"; Filter skipped for {', '.join(pf['skippedFilter'])}"
    lines.append(pre)
    lines.append(
        f"Filter: {', '.join(ex.filter_plugins) or '-'} (a node stops at the first plugin that rejects it)"
    )
    lines.append(
        "Score (raw/normalized/weighted): "
        + (", ".join(f"{s['name']} x{s['weight']}" for s in ex.score_plugins) or "-")
    )
    feasible = ex.feasible()
    lines.append(
        f"nodes: {len(ex.nodes)}, {len(feasible)} feasible, {len(ex.nodes) - len(feasible)} rejected"
    )
    if focus is not None:
        lines += _focus(ex, focus)
    else:
        groups = ex.groups()
        if groups:
            lines.append("rejected:")
            width = max(len(str(g["count"])) for g in groups)
            for g in groups:
                lines.append(
                    f"  {g['count']:>{width}} x {g['plugin'] or '-'}: {g['reason']}  [{_names(g['nodes'])}]"
                )
        if feasible:
            lines.append(f"feasible, best first (at most {top} lines; --nodes N for more):")
            lines += _feasible_lines(feasible, top)
    lines.append(
        f"result: {ex.status}"
        + (f" on {ex.node}" if ex.node else "")
        + (f": {ex.message}" if ex.message else "")
    )
    if ex.tied_with:
        lines.append(
            f"  tied with {_names(ex.tied_with)}: the scheduler picks one of the best at random (--seed)"
        )
    if ex.permit:
        lines.append(f"Permit: {ex.permit}")
    if ex.annotations:
        lines.append("Reserve/PreBind would write:")
        lines += [f"  {k}: {v}" for k, v in sorted(ex.annotations.items())]
    lines += [f"note: {n}" for n in ex.notes]
    lines += _section_lines(ex.sections)
    return "\n".join(lines) + "\n"


def _feasible_lines(feasible: list[NodeVerdict], top: int) -> list[str]:
    out: list[str] = []
    groups: list[list[NodeVerdict]] = []
    for v in feasible:
        if groups and groups[-1][0].scores == v.scores and groups[-1][0].total == v.total:
            groups[-1].append(v)
        else:
            groups.append([v])
    for g in groups[:top]:
        first = g[0]
        who = first.name if len(g) == 1 else f"{first.name} and {len(g) - 1} more with the same scores"
        total = "-" if first.total is None else str(first.total)
        out.append(f"  #{first.rank or '-'} {who}: total {total}")
        if first.scores:
            out.append(f"      {_scores(first)}")
    if len(groups) > top:
        out.append(f"  ... {sum(len(g) for g in groups[top:])} more feasible nodes")
    return out


def _focus(ex: PodExplanation, name: str) -> list[str]:
    v = next(v for v in ex.nodes if v.name == name)
    if not v.feasible:
        out = [f"node {name}: rejected by {v.plugin or '-'} ({v.code}): {v.reason}"]
    else:
        out = [f"node {name}: feasible, rank {v.rank or '-'} of {len(ex.feasible())}, total {v.total}"]
    if v.filters is not None:
        out.append("  each Filter plugin on its own (the scheduler stops at the first rejection):")
        out += [
            f"    {f['plugin']}: {f['code']}{': ' + f['reason'] if f['reason'] else ''}" for f in v.filters
        ]
    for plugin, (raw, norm, weighted) in v.scores.items():
        out.append(f"  {plugin}: raw {raw}, normalized {norm}, weighted {weighted}")
    return out


def render_sections(ex: Explanation) -> str:
    lines = [f"{ex.kind} {ex.name}", *_section_lines(ex.sections)]
    return "\n".join(lines) + "\n"


def _section_lines(sections: list[SectionResult]) -> list[str]:
    """Each plugin's section: its title, then its lines indented (or why its hook failed)."""
    lines: list[str] = []
    for s in sections:
        if s.section is None:
            lines.append(f"{s.plugin}: explain hook failed: {s.error}")
            continue
        lines.append(f"{s.section.title or s.plugin}:")
        lines += [f"  {line}" for line in s.section.lines]
    return lines
