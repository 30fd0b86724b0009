"""The agent benchmark script runs: 150 containers, collection and QoS loops, steps once a second.

The resource budget itself (at most 0.2 core and 256 MiB over 60 s) is measured by ``make bench``
(``python bench/koordlet_agent.py --seconds 60``), not asserted here: timings belong to benchmarks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "koordlet_agent.py"


@pytest.mark.slow
def test_agent_benchmark_runs_every_strategy_each_second() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "3", "--containers", "150"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["containers"] == 150
    assert result["strategies"] == ["BECPUSuppress", "CPUBurst", "BECPUEvict", "BEMemoryEvict"]
    assert result["steps"] >= 2
    assert result["cpuCores"] > 0
    assert result["peakRSSMiB"] > 0
