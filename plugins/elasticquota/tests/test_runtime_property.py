"""Randomized (hypothesis) test of the runtime calculation, one parent and one resource dimension.

When the children's guarantees (min, or the request when it is smaller and the child lends) fit in the
parent's total: the runtimes add up to at most the total (exactly the total when some child still wants more),
every child gets at least min(request, min), no child gets more than its request unless it keeps an unused
min it does not lend, none more than its max (requests are max-limited before they reach the tree), and what
is shared beyond the mins follows the shared weights up to the largest-remainder rounding.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from koord_plugin_elasticquota.calculator import QuotaTree

Child = tuple[int, int, int, int, bool]  # weight, request, min, max, lends

children = st.lists(
    st.tuples(
        st.integers(0, 50),  # shared weight
        st.integers(0, 10_000),  # raw request
        st.integers(0, 2_000),  # min
        st.integers(0, 10_000),  # max
        st.booleans(),  # allow lent
    ),
    min_size=1,
    max_size=8,
)


def build(kids: list[Child]) -> tuple[QuotaTree, dict[str, tuple[int, int, int, int, bool]]]:
    tree = QuotaTree()
    spec: dict[str, tuple[int, int, int, int, bool]] = {}
    for i, (weight, raw, min_, max_, lends) in enumerate(kids):
        min_ = min(min_, max_)  # valid quotas only
        request = min(raw, max_)  # the tree sees max-limited requests
        name = f"q{i:02d}"
        tree.insert(name, weight, request, min_, 0, lends)
        spec[name] = (weight, request, min_, max_, lends)
    return tree, spec


@settings(max_examples=400, deadline=None)
@given(kids=children, extra=st.integers(0, 30_000))
def test_runtime_invariants(kids: list[Child], extra: int) -> None:
    tree, spec = build(kids)
    floor = sum(
        min_ if (not lends or request > min_) else request for _, request, min_, _, lends in spec.values()
    )
    total = floor + extra  # the mins fit
    tree.redistribution(total)
    runtime = {name: node.runtime for name, node in tree.nodes.items()}
    assert sum(runtime.values()) <= total
    hungry = [n for n, (w, request, _, _, _) in spec.items() if w > 0 and runtime[n] < request]
    if hungry:
        assert sum(runtime.values()) == total  # nothing is held back while a weighted child wants more
    for name, (_weight, request, min_, max_, lends) in spec.items():
        assert runtime[name] >= min(request, min_)
        assert runtime[name] <= max(request, 0 if lends else min_)
        assert runtime[name] <= max_
    # Beyond its floor, a child got a share of what was left. Two children that both still want more got
    # shares proportional to their weights, up to one unit of rounding per round.
    rounds = len(spec)
    beyond = {n: runtime[n] - min_ for n, (_, request, min_, _, _) in spec.items() if request > min_}
    for a in hungry:
        for b in hungry:
            wa, wb = spec[a][0], spec[b][0]
            if a < b and wa > 0 and wb > 0:
                assert abs(beyond[a] * wb - beyond[b] * wa) <= rounds * (wa + wb)


@settings(max_examples=200, deadline=None)
@given(kids=children, total=st.integers(0, 5_000))
def test_runtime_is_never_below_min_of_request_and_min_even_when_mins_do_not_fit(
    kids: list[Child], total: int
) -> None:
    tree, spec = build(kids)
    tree.redistribution(total)
    for name, (_, request, min_, _, _) in spec.items():
        assert tree.nodes[name].runtime >= min(request, min_)
