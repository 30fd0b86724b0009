"""``koord compare``: several scheduler configurations on one snapshot and one clock, measured side by side.

``compare`` runs each configuration on its own copy of the cluster (``koord_framework.compare.run``) and
assembles the JSON report whose schema is ``schema.json`` next to this file (documented in
``docs/compare.md``); ``koord_framework.compare.html`` renders it as a self-contained HTML page.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from koord_framework.cluster.clock import format_time
from koord_framework.compare.run import CompareInput, RunOutcome, run_profile
from koord_framework.config.loader import LoadedSchedulerConfig

__all__ = ["SCHEMA_PATH", "VERSION", "CompareInput", "RunOutcome", "compare"]

VERSION = 1
"""Bumped when a field changes meaning or goes away; new fields may appear within a version."""
SCHEMA_PATH = Path(__file__).with_name("schema.json")


def compare(
    configs: Sequence[tuple[str, str, LoadedSchedulerConfig]],
    given: CompareInput,
    *,
    on_run: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every ``(label, source, loaded config)`` on ``given`` and return the report."""
    runs = []
    for label, source, loaded in configs:
        if on_run is not None:
            on_run(label)
        runs.append(run_profile(label, source, loaded, given).entry)
        # The run's cluster and scheduler hold reference cycles: free them before the next run loads its
        # copy, so that memory peaks at one run's, not two.
        gc.collect()
    return {
        "kind": "KoordCompare",
        "version": VERSION,
        "cluster": [str(p) for p in given.cluster],
        "now": format_time(given.now),
        "seed": given.seed,
        "input": {
            "arrivals": sum(len(a.pods) for a in given.arrivals),
            "arrivalBatches": len(given.arrivals),
            "scale": given.scale,
            "descheduleRounds": given.deschedule_rounds,
        },
        "runs": runs,
    }
