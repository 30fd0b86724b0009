"""koord-manager with every calculator Koordinator enables by default (CPUNormalization,
ResourceAmplification, MidResource, BatchResource: ``--noderesource-plugins=*``) against BatchResource
alone, on ``bench.manager``'s cluster. ``python -m bench.calculators [NODES] [PODS_PER_NODE]``
(default 5,000 x 30).

Both passes of ``bench.manager`` are timed for both sets: the first after start (every NodeSLO, NodeMetric
spec, pod record and node written) and the steady state (every NodeMetric reported again, pods unchanged);
the difference is what the three calculators of wave 5 add to each pass.
"""

from __future__ import annotations

import sys
import time

from prometheus_client import CollectorRegistry

from bench.manager import build, report_again
from koord_framework.cli.manager import load_plugins
from koord_framework.manager.component import ManagerComponent


def passes(nodes: int, per_node: int, selection: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """(wall, CPU) seconds of the first and of the steady-state pass with the calculators ``selection``
    enables."""
    cluster = build(nodes, per_node)
    manager = ManagerComponent(
        cluster, CollectorRegistry(), config_namespace="koordinator-system", plugins=load_plugins(selection)
    )
    try:
        start, cpu = time.perf_counter(), time.process_time()
        manager.sync_once()
        first = time.perf_counter() - start, time.process_time() - cpu
        report_again(cluster, nodes, per_node)
        start, cpu = time.perf_counter(), time.process_time()
        manager.sync_once()
        return first, (time.perf_counter() - start, time.process_time() - cpu)
    finally:
        manager.close()


def steady_pass(nodes: int, per_node: int, selection: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the steady-state pass with the calculators ``selection`` enables."""
    return passes(nodes, per_node, selection)[1]


def main(argv: list[str]) -> int:
    nodes = int(argv[0]) if argv else 5000
    per_node = int(argv[1]) if len(argv) > 1 else 30
    for label, selection in (("BatchResource", "BatchResource"), ("all calculators", "*")):
        (wall, cpu), (s_wall, s_cpu) = passes(nodes, per_node, selection)
        print(
            f"manager passes, {label}: {nodes} nodes, {nodes * per_node} pods: "
            f"first {wall:.2f} s ({cpu:.2f} CPU-s), steady state {s_wall:.2f} s ({s_cpu:.2f} CPU-s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
