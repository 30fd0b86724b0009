"""koord-manager with every calculator Koordinator enables by default (CPUNormalization,
ResourceAmplification, MidResource, BatchResource: ``--noderesource-plugins=*``) against BatchResource
alone, on ``bench.manager``'s cluster. ``python -m bench.calculators [NODES] [PODS_PER_NODE]``
(default 5,000 x 30).

The steady-state pass (every NodeMetric reported again, pods unchanged) is timed for both sets; the
difference is what the three calculators of wave 5 add to each pass.
"""

from __future__ import annotations

import sys
import time

from prometheus_client import CollectorRegistry

from bench.manager import build, report_again
from koord_framework.cli.manager import load_plugins
from koord_framework.manager.component import ManagerComponent


def steady_pass(nodes: int, per_node: int, selection: str) -> tuple[float, float]:
    """(wall, CPU) seconds of the steady-state pass with the calculators ``selection`` enables."""
    cluster = build(nodes, per_node)
    manager = ManagerComponent(
        cluster, CollectorRegistry(), config_namespace="koordinator-system", plugins=load_plugins(selection)
    )
    try:
        manager.sync_once()
        report_again(cluster, nodes, per_node)
        start, cpu = time.perf_counter(), time.process_time()
        manager.sync_once()
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        manager.close()


def main(argv: list[str]) -> int:
    nodes = int(argv[0]) if argv else 5000
    per_node = int(argv[1]) if len(argv) > 1 else 30
    for label, selection in (("BatchResource", "BatchResource"), ("all calculators", "*")):
        wall, cpu = steady_pass(nodes, per_node, selection)
        print(
            f"manager steady pass, {label}: {nodes} nodes, {nodes * per_node} pods: "
            f"{wall:.2f} s ({cpu:.2f} CPU-s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
