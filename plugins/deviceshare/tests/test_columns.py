"""The GPU columns' per-shape caches: after any sequence of node changes, ``fits_of``/``scores_of`` (cached,
changed rows judged in Python or with the arrays) equal ``fits``/``scores`` computed afresh."""

from __future__ import annotations

import random

import numpy as np
import pytest
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import DeviceAllocation
from koord_plugin_deviceshare.builders import GiB, make_device
from koord_plugin_deviceshare.columns import GPUColumns
from koord_plugin_deviceshare.device import ParsedDevice, parse_device
from koord_plugin_deviceshare.nodedevice import NodeDevice
from koord_plugin_deviceshare.scoring import LEAST_ALLOCATED, MOST_ALLOCATED, DeviceScorer

from koord_framework.scheduler.table import NodeTable

SCORED = (n.GPU_CORE, n.GPU_MEMORY, n.GPU_MEMORY_RATIO)
SHAPES = [
    ({n.GPU_CORE: 100, n.GPU_MEMORY_RATIO: 100}, 1),
    ({n.GPU_CORE: 100, n.GPU_MEMORY_RATIO: 100}, 4),
    ({n.GPU_CORE: 25, n.GPU_MEMORY_RATIO: 25}, 1),
    ({n.GPU_CORE: 50, n.GPU_MEMORY: 20 * GiB}, 1),
]


def _device(rng: random.Random, name: str) -> ParsedDevice:
    gpus = rng.randint(1, 8)
    unhealthy = tuple(m for m in range(gpus) if rng.random() < 0.15)
    return parse_device(make_device(name, gpus, 0, memory=80 * GiB, unhealthy=unhealthy))


def _node(rng: random.Random, name: str) -> NodeDevice:
    nd = NodeDevice()
    nd.set_device(_device(rng, name))
    return nd


@pytest.mark.parametrize(
    ("seed", "strategy"), [(0, LEAST_ALLOCATED), (1, MOST_ALLOCATED), (2, LEAST_ALLOCATED)]
)
def test_cached_columns_equal_fresh_ones(seed: int, strategy: str) -> None:
    rng = random.Random(seed)
    scorer = DeviceScorer(strategy, dict.fromkeys(SCORED, 1))
    table = NodeTable()
    names = [f"n{i}" for i in range(60)]
    for name in names:
        table.add_node(name, {})
    nodes = {name: _node(rng, name) for name in names if rng.random() < 0.9}
    cached = GPUColumns(SCORED)
    cached.dirty.update(names)
    held: list[tuple[str, str, list[DeviceAllocation]]] = []
    for step in range(60):
        # One to forty nodes change per step: the Python path and the array path both run.
        for _ in range(rng.choice([1, 1, 2, 40])):
            name = rng.choice(names)
            nd = nodes.get(name)
            if nd is None:
                continue
            if rng.random() < 0.05:
                # A new Device object (other GPU count, health): the row is read again from scratch.
                nd.set_device(_device(rng, name))
                cached.dirty.add(name)
                continue
            if held and rng.random() < 0.3:
                node, key, allocs = held.pop(rng.randrange(len(held)))
                nodes[node].update_used({n.GPU: allocs}, key, add=False)
                cached.dirty.add(node)
                continue
            minors = [m for m, r in nd.total.get(n.GPU, {}).items() if r]
            if not minors:
                continue
            share = rng.choice([25, 50, 100])
            allocs = [DeviceAllocation(rng.choice(minors), {n.GPU_CORE: share, n.GPU_MEMORY_RATIO: share})]
            key = f"p{step}-{len(held)}"
            nd.update_used({n.GPU: allocs}, key, add=True)
            held.append((name, key, allocs))
            cached.dirty.add(name)
        cached.flush(table, nodes.get, lambda _name, _nd: False)
        fresh = GPUColumns(SCORED)
        fresh.dirty.update(names)
        fresh.flush(table, nodes.get, lambda _name, _nd: False)
        rows = np.array(sorted(rng.sample(range(len(names)), 30)), dtype=np.int64)
        for per_gpu, count in SHAPES:
            assert cached.fits_of(rows, per_gpu, count).tolist() == fresh.fits(rows, per_gpu, count).tolist()
            assert (
                cached.scores_of(rows, per_gpu, scorer).tolist()
                == fresh.scores(rows, per_gpu, scorer).tolist()
            )
