"""Cases pinned from Koordinator's ``cpu_suppress_test.go`` / ``cpu_suppress.go`` (snapshot a7a1b76b) that the
vector file does not carry: the rest of ``Test_cpuSuppress_adjustByCfsQuota`` and
``Test_calculateBESuppressCPUSetPolicy``, and the static-policy ordering of ``applyBESuppressCPUSet``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from koord_plugin_cpusuppress import BECPUSuppress
from koord_plugin_cpusuppress.policy import calculate_be_suppress_cpuset_policy, cfs_quota_target

from koord_framework.api.qos import KubeQoS
from koord_framework.koordlet.system import ProcessorInfo
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod

PERIOD = 100000


# Test_cpuSuppress_adjustByCfsQuota: node capacity 80 cores, suppress 20 cores unless stated.
@pytest.mark.parametrize(
    ("suppress_milli", "current", "expected"),
    [
        # cpuQuantity > preBECPU + maxIncreaseCPU: rise capped at 10 % of 80 cores
        (20000, 10 * PERIOD, 10 * PERIOD + int(0.1 * 80 * PERIOD)),
        # preBECPU < cpuQuantity < preBECPU + maxIncreaseCPU
        (20000, 19 * PERIOD, 20 * PERIOD),
        # suppress: preBECPU > cpuQuantity -> at once
        (20000, 24 * PERIOD, 20 * PERIOD),
        # bypass minDeltaQuota: |2000000 - 1980000| < 80 x 100000 x 1 %
        (20000, int(19.8 * PERIOD), None),
        # minQuota 2000 is written even when the move is small
        (1, int(0.8 * PERIOD), 2000),
        # first time from unlimited (-1): no step limit
        (20000, -1, 20 * PERIOD),
    ],
)
def test_adjust_by_cfs_quota_table(suppress_milli: int, current: int, expected: int | None) -> None:
    assert cfs_quota_target(suppress_milli, current, 80) == expected


def _p(cpu: int, core: int, socket: int, node: int) -> ProcessorInfo:
    return ProcessorInfo(cpu_id=cpu, core_id=core, socket_id=socket, node_id=node)


TWO_NODES_NO_HT_PAIRS_ADJACENT = [
    _p(0, 0, 0, 0),
    _p(1, 1, 0, 0),
    _p(2, 2, 1, 1),
    _p(3, 3, 1, 1),
    _p(4, 0, 0, 0),
    _p(5, 1, 0, 0),
    _p(6, 2, 1, 1),
    _p(7, 3, 1, 1),
]
FOUR_SOCKETS = [_p(c, c // 2, c // 4, c // 8) for c in range(16)]
FOUR_SOCKETS_SHUFFLED = [FOUR_SOCKETS[i] for i in (12, 13, 14, 2, 3, 11, 4, 5, 8, 15, 0, 1, 9, 10, 6, 7)]


@pytest.mark.parametrize(
    ("cpus", "processors", "expected"),
    [
        # "stacking on HTs 0.": pairs (0,4) on node 0 then a single from node 1
        (3, TWO_NODES_NO_HT_PAIRS_ADJACENT, [0, 4, 2]),
        # "stacking on HTs 2. (also scattering on sockets)"
        (5, FOUR_SOCKETS, [0, 1, 4, 5, 8]),
        # "slow scale up: increase cpunum == maxIncreaseCPUNum" (the policy itself ignores the old size)
        (5, FOUR_SOCKETS_SHUFFLED, [0, 1, 4, 5, 8]),
    ],
)
def test_cpuset_policy_table(cpus: int, processors: list[ProcessorInfo], expected: list[int]) -> None:
    assert calculate_be_suppress_cpuset_policy(cpus, processors) == expected


def test_static_policy_recovers_pod_cpusets_even_when_no_cpu_is_left(
    koord_host_tree: Callable[..., FakeHostTree],
) -> None:
    """``applyBESuppressCPUSet`` (cpu_suppress.go:183-185) recovers the BE dir and pod dirs to the BE pool
    *before* ``applyCPUSetWithStaticPolicy`` skips an empty set (cpu_suppress.go:228-231)."""
    tree = koord_host_tree(version=1, cpus=8)
    be_dir = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    lse = make_running_pod(
        "lse",
        qos="LSE",
        requests={"cpu": "7", "memory": "1Gi"},
        limits={"cpu": "7", "memory": "1Gi"},
        annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-6"}'},
    )
    be = make_running_pod(
        "be",
        qos="BE",
        requests={"kubernetes.io/batch-cpu": "1000"},
        limits={"kubernetes.io/batch-cpu": "1000"},
    )
    h = QOSHarness(
        tree,
        pods=[lse, be],
        topology_annotations={"kubelet.koordinator.sh/cpu-manager-policy": '{"policy":"static"}'},
    )
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
    assert h.context.cpu_info is not None
    # only cpu 7 is not LSE-bound: 2 CPUs wanted, 1 available -> no BE set is chosen
    assert strategy.adjust_by_cpuset(2000, h.context.cpu_info) == []
    pod_level = tree.layout.walk("cpuset", be_dir, 1)
    assert len(pod_level) == 2  # the besteffort dir and the BE pod
    for d in pod_level:
        assert tree.read("cpuset.cpus", d) == "7"
