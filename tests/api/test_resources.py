"""Resource lists in canonical integer units and the quotav1-style helpers."""

from __future__ import annotations

import pytest

from koord_framework.api import resources as r
from koord_framework.api.quantity import Quantity, QuantityError


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "1.5", 1500),
        ("cpu", 2, 2000),  # a bare YAML int is cores
        ("cpu", 0.25, 250),
        ("cpu", "1n", 1),  # MilliValue rounds up
        ("cpu", Quantity.parse("4"), 4000),
        ("memory", "1Gi", 1073741824),
        ("memory", "1.5Gi", 1610612736),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129000000),
        ("memory", "123Mi", 128974848),
        ("memory", "0.5", 1),  # Value rounds up
        ("pods", "110", 110),
        ("ephemeral-storage", "10G", 10_000_000_000),
        ("kubernetes.io/batch-cpu", "2000", 2000),  # already milli-cores: Value()
        ("kubernetes.io/batch-cpu", "2k", 2000),
        ("kubernetes.io/mid-cpu", 1500, 1500),
        ("kubernetes.io/batch-memory", "2Gi", 2147483648),
        ("nvidia.com/gpu", "1", 1),
    ],
)
def test_to_int(name: str, raw: object, expected: int) -> None:
    assert r.to_int(name, raw) == expected  # type: ignore[arg-type]


def test_parse_resource_list() -> None:
    parsed = r.parse_resource_list(
        {
            "cpu": "250m",
            "memory": "64Mi",
            "pods": 110,
            "kubernetes.io/batch-cpu": "1500",
            "hugepages-2Mi": "4Mi",
        }
    )
    assert parsed == {
        "cpu": 250,
        "memory": 67108864,
        "pods": 110,
        "kubernetes.io/batch-cpu": 1500,
        "hugepages-2Mi": 4194304,
    }
    assert r.parse_resource_list({}) == {}
    assert r.parse_resource_list(None) == {}
    assert r.parse_resource_list({"cpu": None}) == {"cpu": 0}  # JSON null decodes to a zero Quantity


def test_parse_resource_list_error_names_key_and_value() -> None:
    with pytest.raises(QuantityError) as info:
        r.parse_resource_list({"cpu": "1", "memory": "1GB"}, path="spec.containers[0].resources.limits")
    message = str(info.value)
    assert message.startswith("spec.containers[0].resources.limits.memory: ")
    assert "'1GB'" in message
    with pytest.raises(QuantityError, match=r"^cpu: .*True"):
        r.parse_resource_list({"cpu": True})
    with pytest.raises(QuantityError, match="expected a mapping"):
        r.parse_resource_list(["cpu"], path="spec.overhead")
    with pytest.raises(QuantityError, match="resource name"):
        r.parse_resource_list({1: "1"})


@pytest.mark.parametrize(
    ("name", "value", "text"),
    [
        ("cpu", 1500, "1500m"),
        ("cpu", 4000, "4"),
        ("cpu", 0, "0"),
        ("memory", 1073741824, "1Gi"),
        ("memory", 1500, "1500"),
        ("memory", 128974848, "123Mi"),
        ("ephemeral-storage", 10 * 2**30, "10Gi"),
        ("kubernetes.io/batch-memory", 2**31, "2Gi"),
        ("kubernetes.io/mid-memory", 3 * 2**20, "3Mi"),
        ("hugepages-1Gi", 2**31, "2Gi"),
        ("pods", 110, "110"),
        ("kubernetes.io/batch-cpu", 2000, "2000"),
        ("nvidia.com/gpu", 8, "8"),
    ],
)
def test_format_resource(name: str, value: int, text: str) -> None:
    assert r.format_resource(name, value) == text
    assert r.to_int(name, text) == value


def test_format_resource_list_round_trips() -> None:
    d = {"cpu": 3500, "memory": 6 * 2**30, "pods": 12, "kubernetes.io/batch-cpu": 700}
    text = r.format_resource_list(d)
    assert text == {"cpu": "3500m", "memory": "6Gi", "pods": "12", "kubernetes.io/batch-cpu": "700"}
    assert r.parse_resource_list(text) == d


def test_add_is_union() -> None:
    assert r.add({"cpu": 100, "memory": 10}, {"cpu": 50, "pods": 1}) == {"cpu": 150, "memory": 10, "pods": 1}
    assert r.add({}, {}) == {}


def test_subtract_is_union_with_negatives() -> None:
    # quotav1.Subtract: a name only in b comes out as -b
    assert r.subtract({"cpu": 100, "memory": 10}, {"cpu": 150, "pods": 2}) == {
        "cpu": -50,
        "memory": 10,
        "pods": -2,
    }


def test_subtract_non_negative() -> None:
    # quotav1.SubtractWithNonNegativeResult: clamps at zero and zero-fills names only in b
    assert r.subtract_non_negative({"cpu": 100, "memory": 10}, {"cpu": 150, "memory": 4, "pods": 2}) == {
        "cpu": 0,
        "memory": 6,
        "pods": 0,
    }


@pytest.mark.parametrize(
    ("a", "b", "ok", "violations"),
    [
        ({"cpu": 100}, {"cpu": 100}, True, []),
        ({"cpu": 101}, {"cpu": 100}, False, ["cpu"]),
        ({"cpu": 101, "memory": 5}, {"cpu": 100, "memory": 4}, False, ["cpu", "memory"]),
        # names missing on either side are not compared
        ({"cpu": 10**9}, {"memory": 1}, True, []),
        ({}, {"cpu": 0}, True, []),
        ({"cpu": 1, "pods": 300}, {"cpu": 2}, True, []),
        ({"memory": 3, "cpu": 0}, {"memory": 2, "cpu": 0}, False, ["memory"]),
    ],
)
def test_less_than_or_equal(a: dict[str, int], b: dict[str, int], ok: bool, violations: list[str]) -> None:
    assert r.less_than_or_equal(a, b) == (ok, violations)


def test_mask_is_zero_max_each() -> None:
    assert r.mask({"cpu": 1, "memory": 2, "pods": 3}, ["cpu", "pods", "gpu"]) == {"cpu": 1, "pods": 3}
    assert r.mask({"cpu": 1}, []) == {}
    assert r.is_zero({})
    assert r.is_zero({"cpu": 0, "memory": 0})
    assert not r.is_zero({"cpu": 0, "memory": 1})
    assert r.max_each({"cpu": 100, "memory": 5}, {"cpu": 50, "memory": 9, "pods": 1}) == {
        "cpu": 100,
        "memory": 9,
        "pods": 1,
    }


def test_helpers_do_not_mutate_inputs() -> None:
    a = {"cpu": 1}
    b = {"cpu": 2, "memory": 3}
    r.add(a, b)
    r.subtract(a, b)
    r.subtract_non_negative(a, b)
    r.max_each(a, b)
    assert a == {"cpu": 1}
    assert b == {"cpu": 2, "memory": 3}


def test_resource_name_constants() -> None:
    assert (r.CPU, r.MEMORY, r.PODS, r.EPHEMERAL_STORAGE) == ("cpu", "memory", "pods", "ephemeral-storage")
    assert (r.BATCH_CPU, r.BATCH_MEMORY) == ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory")
    assert (r.MID_CPU, r.MID_MEMORY) == ("kubernetes.io/mid-cpu", "kubernetes.io/mid-memory")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ({"cpu": 1000}, {"cpu": 2000}),
        ({"cpu": 3000}, {"cpu": 2000}),
        ({"cpu": 1000, "memory": 5}, {"cpu": 1000}),
        ({"cpu": 1000}, {"cpu": 1000, "memory": 0}),
        ({}, {"cpu": 0}),
        ({"cpu": 1, "memory": 9}, {"cpu": 2, "memory": 8}),
    ],
)
def test_within_is_less_than_or_equal_without_the_list(a: dict[str, int], b: dict[str, int]) -> None:
    assert r.within(a, b) is r.less_than_or_equal(a, b)[0]
