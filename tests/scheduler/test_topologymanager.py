"""The NUMA topology manager: merge and admission, with cases from Koordinator's ``topologymanager`` tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Code, Status
from koord_framework.scheduler.topologymanager import (
    AffinityStore,
    NUMATopologyHint,
    NUMATopologyHintProvider,
    ProviderHints,
    TopologyManager,
    _exclusive_ok,
    bits,
    iterate_bit_masks,
    mask_of,
    mask_string,
    merge_hints,
)


def H(nodes: Sequence[int] | None, preferred: bool, score: int = 0) -> NUMATopologyHint:
    return NUMATopologyHint(mask_of(nodes) if nodes is not None else None, preferred, False, score)


NUMA = [0, 1]

# (name, providers' hints, expected best hint) from commonPolicyMergeTestCases: the same answer under
# BestEffort, Restricted and SingleNUMANode.
COMMON: list[tuple[str, list[Mapping[str, list[NUMATopologyHint]] | None], NUMATopologyHint]] = [
    (
        "two providers, one hint each, same mask, both preferred",
        [{"resource1": [H([0], True)]}, {"resource2": [H([0], True)]}],
        H([0], True),
    ),
    (
        "one provider without hints, one single preferred hint",
        [None, {"resource": [H([1], True)]}],
        H([1], True),
    ),
    (
        "both with two hints, the narrower preferred one matches",
        [
            {"resource1": [H([0], True), H([1], True)]},
            {"resource2": [H([0], True), H([0, 1], False)]},
        ],
        H([0], True),
    ),
    (
        "a wider preferred hint beats a narrower non-preferred one",
        [
            {"resource1": [H([1], True), H([0, 1], False)]},
            {"resource2": [H([0], True), H([1], True), H([0, 1], False)]},
        ],
        H([1], True),
    ),
    (
        "several resources of one provider",
        [
            {
                "resource1": [H([1], True), H([0, 1], False)],
                "resource2": [H([0], True), H([1], True), H([0, 1], False)],
            }
        ],
        H([1], True),
    ),
]


@pytest.mark.parametrize("policy", ["BestEffort", "Restricted", "SingleNUMANode"])
@pytest.mark.parametrize(("name", "hints", "expected"), COMMON, ids=[c[0] for c in COMMON])
def test_common_merge_cases(
    policy: str, name: str, hints: list[ProviderHints | None], expected: NUMATopologyHint
) -> None:
    best, admitted, reasons = merge_hints(policy, NUMA, hints, "Preferred", [])
    assert (best.affinity, best.preferred) == (expected.affinity, expected.preferred)
    assert admitted and reasons == []


def test_restricted_rejects_hints_without_common_mask_naming_them() -> None:
    hints: list[ProviderHints | None] = [{"resource1": [H([0], True)]}, {"resource2": [H([1], True)]}]
    best, admitted, reasons = merge_hints("Restricted", NUMA, hints)
    assert not admitted
    assert best.affinity == mask_of(NUMA) and not best.preferred
    assert reasons == [
        "Unaligned NUMA Hint cause resource1 prefer [01] among [01] & resource2 prefer [10] among [10]"
    ]


def test_restricted_same_mask_one_not_preferred() -> None:
    hints: list[ProviderHints | None] = [{"resource1": [H([0], True)]}, {"resource2": [H([0], False)]}]
    best, admitted, reasons = merge_hints("Restricted", NUMA, hints)
    assert (best.affinity, best.preferred, admitted) == (mask_of([0]), False, False)
    assert reasons == [
        "Unaligned NUMA Hint cause resource1 prefer [01] among [01] & resource2 prefer [] among [01]"
    ]


def test_best_effort_admits_unaligned_hints() -> None:
    hints: list[ProviderHints | None] = [{"resource1": [H([0], True)]}, {"resource2": [H([1], True)]}]
    best, admitted, reasons = merge_hints("BestEffort", NUMA, hints)
    assert admitted and reasons == []
    assert best.affinity == mask_of(NUMA)


def test_empty_hint_list_is_unsatisfied() -> None:
    hints: list[ProviderHints | None] = [{"resource": []}]
    for policy in ("Restricted", "SingleNUMANode"):
        _, admitted, reasons = merge_hints(policy, NUMA, hints)
        assert not admitted and reasons == ["Unsatisfied NUMA resource"]
    best, admitted, _ = merge_hints("BestEffort", NUMA, hints)
    assert admitted and best.affinity == mask_of(NUMA)


def test_single_numa_node_only_takes_single_node_hints() -> None:
    hints: list[ProviderHints | None] = [
        {"resource1": [H([0, 1], True)], "resource2": [H([0], True), H([1], True), H([0, 1], False)]}
    ]
    best, admitted, reasons = merge_hints("SingleNUMANode", NUMA, hints)
    assert best.affinity is None and not best.preferred and not admitted
    assert reasons == [
        "Unaligned NUMA Hint cause resource1 prefer [11] among [11],resource2 prefer [01 10] among [01 10 11]"
    ]


def test_single_numa_node_with_a_no_preference_provider() -> None:
    hints: list[ProviderHints | None] = [{"resource1": [H([0], True), H([1], True), H([0, 1], False)]}, None]
    best, admitted, _ = merge_hints("SingleNUMANode", NUMA, hints)
    assert admitted and best.affinity == mask_of([0]) and best.preferred


def test_equal_width_preferred_hints_are_decided_by_score() -> None:
    hints: list[ProviderHints | None] = [{"cpu": [H([0], True, 10), H([1], True, 60)]}]
    best, admitted, _ = merge_hints("SingleNUMANode", NUMA, hints)
    assert admitted and bits(best.affinity or 0) == [1] and best.score == 60


# checkExclusivePolicy (Test_checkExclusivePolicy)
@pytest.mark.parametrize(
    ("nodes", "exclusive", "statuses", "ok"),
    [
        ([0], "Preferred", ["shared", "shared"], True),
        ([0, 1], "Preferred", ["shared", "shared"], True),
        ([0], "Preferred", ["idle", "single"], True),
        ([0, 1], "Preferred", ["idle", "single"], True),
        ([0], "Required", ["idle", "single"], True),
        ([0], "Required", ["shared", "single"], False),
        ([0], "Required", ["shared", "shared"], False),
        ([0], "Required", ["single", "shared"], True),
        ([0, 1], "Required", ["shared", "single"], False),
        ([0, 1], "Required", ["shared", "idle"], True),
        ([0, 1], "Required", ["shared", "shared"], True),
    ],
)
def test_exclusive_policy(nodes: list[int], exclusive: str, statuses: list[str], ok: bool) -> None:
    assert _exclusive_ok(H(nodes, True), exclusive, statuses) is ok


def test_required_exclusivity_makes_a_spanning_hint_not_preferred() -> None:
    hints: list[ProviderHints | None] = [{"cpu": [H([0, 1], True)]}]
    _, admitted, _ = merge_hints("Restricted", NUMA, hints, "Required", ["single", "idle"])
    assert not admitted


def test_bit_masks() -> None:
    assert list(iterate_bit_masks([0, 1, 2])) == [1, 2, 4, 3, 5, 6, 7]
    assert [mask_string(m) for m in (1, 2, 3, 4, 5)] == ["01", "10", "11", "100", "0101"]


class _Provider(NUMATopologyHintProvider):
    def __init__(self, hints: ProviderHints | None, fail: Status | None = None) -> None:
        self.hints = hints
        self.fail = fail
        self.allocated: list[NUMATopologyHint] = []

    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[ProviderHints | None, Status]:
        return self.hints, self.fail or Status.success()

    def allocate(self, state: CycleState, affinity: NUMATopologyHint, pod: PodInfo, node: NodeInfo) -> Status:
        self.allocated.append(affinity)
        return Status.success()


def _node() -> NodeInfo:
    return NodeInfo(NodeRecord("n1", "", {}, {}, {}, {}))


def _pod() -> PodInfo:
    return PodInfo.from_manifest({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}})


def test_admit_stores_the_best_hint_and_every_provider_allocates_it() -> None:
    a = _Provider({"cpu": [H([0], True), H([1], True)]})
    b = _Provider({"gpu": [H([1], True)]})
    manager = TopologyManager(lambda: [a, b])
    state = CycleState()
    AffinityStore.init(state)
    assert manager.admit(state, _pod(), _node(), NUMA, "SingleNUMANode").is_success
    stored = AffinityStore.of(state).get("n1")
    assert stored is not None and bits(stored.affinity or 0) == [1]
    assert a.allocated == b.allocated == [stored]
    # A second call in the same cycle reuses the stored hint.
    assert manager.admit(state, _pod(), _node(), NUMA, "SingleNUMANode").is_success
    assert len(a.allocated) == 2 and a.allocated[1] == stored


def test_admit_rejects_with_the_providers_reasons() -> None:
    failing = _Provider(None, Status.unschedulable("node(s) Insufficient NUMA Node resources"))
    manager = TopologyManager(lambda: [failing])
    state = CycleState()
    AffinityStore.init(state)
    status = manager.admit(state, _pod(), _node(), NUMA, "Restricted")
    assert status.code is Code.UNSCHEDULABLE
    assert status.reasons == ("node(s) Insufficient NUMA Node resources",)
    assert AffinityStore.of(state).get("n1") is None
