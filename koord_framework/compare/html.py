"""``koord compare --html``: the report as one self-contained HTML page with plots.

The plots are drawn with matplotlib (the framework's optional ``report`` extra) on the Agg backend and
embedded as inline SVG, so the page needs no network, no script and no stylesheet from elsewhere:

* a bar chart per measure (placed, unschedulable, evictions), one group per run, one bar per phase
  (snapshot, after scheduling, after descheduling);
* per run, histograms of node utilisation: requested CPU and memory, and estimated usage when known;
* per run, heat strips: one cell per node (sorted by name, the same order in every run), coloured by
  requested and estimated utilisation;
* tables: the side-by-side summary, unschedulable reasons, evictions, quotas and gangs.

matplotlib is imported only by ``renderer()``: the other commands never pay for it.
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["MissingPlotting", "renderer"]

PHASES = (("snapshot", "snapshot"), ("scheduled", "after scheduling"), ("descheduled", "after descheduling"))
HEAT_COLUMNS = 100
"""Cells per row of a heat strip (a 5,000-node cluster is 50 rows)."""


class MissingPlotting(Exception):
    """matplotlib is not installed."""


def renderer() -> Callable[[dict[str, Any]], str]:
    """The page renderer; raises ``MissingPlotting`` naming the extra to install when matplotlib is absent."""
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingPlotting(
            "--html needs matplotlib, which is not installed: pip install 'koord-framework[report]'"
            " (make install installs it)"
        ) from exc
    matplotlib.use("Agg", force=True)
    return render


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and DOCTYPE: inline SVG in HTML5


def _bars(report: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt

    runs = report["runs"]
    measures = (("placed", "placed"), ("unschedulable", "unschedulable"), ("evictions", "evictions"))
    phases = [p for p in PHASES if any(p[0] in r["phases"] for r in runs)]
    fig, axes = plt.subplots(
        1, len(measures), figsize=(4.2 * len(measures), 3.4), squeeze=False, layout="constrained"
    )
    width = 0.8 / max(len(phases), 1)
    for ax, (key, title) in zip(axes[0], measures):
        for j, (phase, name) in enumerate(phases):
            values = [r["phases"].get(phase, {}).get(key, 0) for r in runs]
            xs = [i + (j - (len(phases) - 1) / 2) * width for i in range(len(runs))]
            bars = ax.bar(xs, values, width, label=name)
            ax.bar_label(bars, fontsize=7)
        ax.set_xticks(range(len(runs)), [r["label"] for r in runs], fontsize=8)
        ax.set_title(title)
        ax.margins(y=0.15)
    axes[0][0].legend(fontsize=7)
    return _svg(fig)


def _histograms(report: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt

    runs = report["runs"]
    panels = [("requested", "cpu"), ("requested", "memory"), ("estimated", "cpu"), ("estimated", "memory")]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(3.4 * len(panels), 3.0), squeeze=False, sharey=True, layout="constrained"
    )
    width = 8.0 / max(len(runs), 1)
    for ax, (what, res) in zip(axes[0], panels):
        for j, r in enumerate(runs):
            dist = (r["utilisation"][what] or {}).get(res)
            if not dist:
                continue
            bins = dist["histogram"]["bins"]
            xs = [b + 1 + j * width for b in bins]
            ax.bar(xs, dist["histogram"]["counts"], width, align="edge", label=r["label"])
        ax.set_title(f"{what} {res} %", fontsize=9)
        ax.set_xticks([*range(0, 101, 20), 110], [*map(str, range(0, 101, 20)), "100+"], fontsize=7)
        ax.set_xlabel("utilisation % (10-point bins)", fontsize=7)
    axes[0][0].set_ylabel("nodes")
    axes[0][0].legend(fontsize=7)
    return _svg(fig)


def _heat(report: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt
    import numpy as np

    runs = report["runs"]
    strips = [
        ("requestedCpuPercent", "requested cpu"),
        ("requestedMemoryPercent", "requested memory"),
        ("estimatedCpuPercent", "estimated cpu"),
        ("estimatedMemoryPercent", "estimated memory"),
    ]
    n = max((len(r["nodes"]["names"]) for r in runs), default=0)
    cols = min(HEAT_COLUMNS, max(n, 1))
    rows_per = max(math.ceil(n / cols), 1)
    fig, axes = plt.subplots(
        len(runs),
        len(strips),
        figsize=(3.2 * len(strips), 0.6 + 0.22 * rows_per * len(runs) + 0.5 * len(runs)),
        squeeze=False,
        layout="constrained",
    )
    image = None
    for i, r in enumerate(runs):
        for j, (key, title) in enumerate(strips):
            values = [np.nan if v is None else v for v in r["nodes"][key]]
            grid = np.full(rows_per * cols, np.nan)
            grid[: len(values)] = values
            ax = axes[i][j]
            image = ax.imshow(
                np.ma.masked_invalid(grid.reshape(rows_per, cols)),
                cmap="RdYlGn_r",
                vmin=0,
                vmax=100,
                aspect="auto",
                interpolation="nearest",
            )
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{r['label']}: {title}", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="%")
    return _svg(fig)


def _heat_caption(report: dict[str, Any]) -> str:
    n = max((len(r["nodes"]["names"]) for r in report["runs"]), default=0)
    cols = min(HEAT_COLUMNS, max(n, 1))
    return (
        f"<p class='meta'>One cell per node, {cols} nodes a row, sorted by name (the same place in every"
        " run);"
        " green is idle, red is full; a blank cell has no measure (no NodeMetric).</p>"
    )


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["<table><thead><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f0f0f0}.plot svg{max-width:100%;height:auto}.meta{color:#555;font-size:.85em}
"""


def render(report: dict[str, Any]) -> str:
    """The page for a ``koord compare`` report (the JSON contract's dict)."""
    from koord_framework.cli.compare import _rows

    runs = report["runs"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>koord compare</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>koord compare: " + " vs ".join(_e(r["label"]) for r in runs) + "</h1>",
        "<p class='meta'>cluster: "
        + _e(", ".join(report["cluster"]))
        + f" &middot; clock starts {_e(report['now'])} &middot; seed {_e(report['seed'])}"
        + f" &middot; report version {_e(report['version'])}</p>",
        "<h2>Summary</h2>",
        _table(["", *(r["label"] for r in runs)], [[name, *values] for name, values in _rows(report)]),
        "<h2>Placed, unschedulable, evictions</h2>",
        "<p class='meta'>Per run: before anything ran (snapshot), after scheduling, after descheduling.</p>",
        f"<div class='plot' id='bars'>{_bars(report)}</div>",
        "<h2>Node utilisation</h2>",
        f"<div class='plot' id='histograms'>{_histograms(report)}</div>",
        "<h3>Utilisation per node</h3>",
        _heat_caption(report),
        f"<div class='plot' id='heat'>{_heat(report)}</div>",
    ]
    for r in runs:
        parts.append(f"<h2>{_e(r['label'])} ({_e(r['config'])})</h2>")
        reasons = r["pods"]["unschedulableByReason"]
        if reasons:
            parts.append("<h3>Not placed, by reason</h3>")
            parts.append(_table(["pods", "reason"], [[n, reason] for reason, n in reasons.items()]))
        if r["evictions"]["byReason"]:
            parts.append("<h3>Evictions, by plugin and reason</h3>")
            parts.append(
                _table(
                    ["pods", "plugin: reason"],
                    [[n, reason] for reason, n in r["evictions"]["byReason"].items()],
                )
            )
        viol = r["loadAwareViolations"]
        if viol and viol["worst"]:
            parts.append("<h3>LoadAware threshold violations</h3>")
            parts.append(
                _table(
                    ["node", "over (percent > threshold)"],
                    [
                        [
                            w["node"],
                            ", ".join(
                                f"{k} {v['percent']}% > {v['threshold']}%" for k, v in w["over"].items()
                            ),
                        ]
                        for w in viol["worst"]
                    ],
                )
            )
        if r["quotas"]:
            parts.append("<h3>ElasticQuota: runtime vs used</h3>")
            parts.append(
                _table(
                    ["quota", "min", "max", "runtime", "used", "used > runtime"],
                    [
                        [
                            q["name"],
                            *(_resources(q[k]) for k in ("min", "max", "runtime", "used")),
                            ", ".join(q["usedOverRuntime"]) or "-",
                        ]
                        for q in r["quotas"]
                    ],
                )
            )
        if r["gangs"] and r["gangs"]["gangs"]:
            parts.append("<h3>Gangs</h3>")
            parts.append(
                _table(
                    ["gang", "minMember", "bound", "waiting", "pending", "verdict"],
                    [
                        [g["gang"], g["minMember"], g["bound"], g["waiting"], g["pending"], g["verdict"]]
                        for g in r["gangs"]["gangs"]
                    ],
                )
            )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _resources(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value if value is not None else "-")
