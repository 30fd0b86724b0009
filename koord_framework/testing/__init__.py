"""The testing kit for plugin authors: builders, the in-memory cluster and a fake clock.

Importable without pytest. The pytest fixtures (all prefixed ``koord_``, none autouse) live in
``koord_framework.testing.pytest_plugin``, which pytest loads through the ``pytest11`` entry point.
"""

from koord_framework.cluster.informer import NodeCache, PodCache, SharedInformer
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.testing.builders import (
    DEFAULT_START,
    FakeClock,
    format_duration,
    make_node,
    make_node_metric,
    make_pdb,
    make_pod,
    random_cluster,
)

__all__ = [
    "DEFAULT_START",
    "FakeClock",
    "MemoryCluster",
    "NodeCache",
    "PodCache",
    "SharedInformer",
    "format_duration",
    "make_node",
    "make_node_metric",
    "make_pdb",
    "make_pod",
    "random_cluster",
]
