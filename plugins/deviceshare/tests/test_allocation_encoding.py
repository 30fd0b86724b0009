"""``encode_allocations`` writes the annotation text directly; it must equal the generic encoding exactly."""

from __future__ import annotations

import json
import random

import pytest
from koord_plugin_deviceshare import names as n
from koord_plugin_deviceshare.allocation import (
    DeviceAllocation,
    DeviceAllocations,
    VFAllocation,
    decode_allocations,
    encode_allocations,
    to_wire,
)

GiB = 1024**3


def _random_allocations(rng: random.Random) -> DeviceAllocations:
    out: DeviceAllocations = {}
    for device_type in rng.sample([n.GPU, n.RDMA, n.FPGA], rng.randint(1, 3)):
        allocs = []
        for minor in rng.sample(range(16), rng.randint(1, 4)):
            if device_type == n.GPU:
                share = rng.choice([25, 50, 100])
                resources = {
                    n.GPU_CORE: share,
                    n.GPU_MEMORY_RATIO: share,
                    n.GPU_MEMORY: rng.choice([16, 40, 80]) * GiB * share // 100,
                }
            else:
                name = n.RDMA_RESOURCE if device_type == n.RDMA else n.FPGA_RESOURCE
                resources = {name: rng.choice([1, 100])}
            vfs = tuple(
                VFAllocation(f"0000:1f:00.{i}", rng.choice([0, i])) for i in range(rng.choice([0, 0, 1, 2]))
            )
            allocs.append(
                DeviceAllocation(
                    minor,
                    resources,
                    id=rng.choice(["", f"GPU-{rng.getrandbits(64):x}", 'odd "id" \u00e9']),
                    vfs=vfs,
                    shared_resource_template=rng.choice(["", "", "tmpl-a"]),
                )
            )
        out[device_type] = allocs
    return out


@pytest.mark.parametrize("seed", range(40))
def test_encoding_equals_the_generic_json(seed: int) -> None:
    allocations = _random_allocations(random.Random(seed))
    raw = encode_allocations(allocations)
    assert raw == json.dumps(to_wire(allocations), separators=(",", ":"))
    decoded = decode_allocations(raw)
    assert to_wire(decoded) == to_wire(allocations)


def test_empty_allocations_encode_as_an_empty_object() -> None:
    assert encode_allocations({}) == "{}"
    assert encode_allocations({n.GPU: []}) == '{"gpu":[]}'
