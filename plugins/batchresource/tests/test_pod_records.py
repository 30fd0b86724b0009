"""PodRecords: parsed pods reused across calculations while their resourceVersion stays the same."""

from __future__ import annotations

from koord_plugin_batchresource import PodRecords

from koord_framework.testing import make_pod


def versioned(name: str, version: str, cpu: str = "1") -> dict[str, object]:
    pod = make_pod(name, cpu=cpu, memory="1Gi", node="n1")
    pod["metadata"]["resourceVersion"] = version
    return pod


def test_unchanged_pods_are_not_parsed_again() -> None:
    records = PodRecords()
    first = records.parse("n1", [versioned("a", "1"), versioned("b", "1")])
    second = records.parse("n1", [versioned("a", "1"), versioned("b", "1")])
    assert [id(i) for i in first] == [id(i) for i in second]


def test_a_new_version_is_parsed_and_a_gone_pod_forgotten() -> None:
    records = PodRecords()
    records.parse("n1", [versioned("a", "1"), versioned("b", "1")])
    again = records.parse("n1", [versioned("a", "2", cpu="3")])
    assert again[0].requests["cpu"] == 3000
    # b was not given the second time: a later b with the old version is parsed, not taken from memory.
    b = versioned("b", "1", cpu="5")
    assert records.parse("n1", [b])[0].requests["cpu"] == 5000


def test_pods_without_a_version_are_parsed_every_time() -> None:
    records = PodRecords()
    pod = make_pod("a", cpu="1", memory="1Gi", node="n1")
    one, two = records.parse("n1", [pod]), records.parse("n1", [pod])
    assert one[0] is not two[0]
    assert one[0].requests == two[0].requests
