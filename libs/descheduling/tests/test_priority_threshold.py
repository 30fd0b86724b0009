"""``resolve_priority_threshold`` is descheduler's ``GetPriorityValueFromPriorityThreshold``."""

from __future__ import annotations

import pytest
from koord_lib_descheduling.evictor_filters import resolve_priority_threshold

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import NotFoundError


def _cluster() -> MemoryCluster:
    cluster = MemoryCluster(VirtualClock(0.0))
    for name, value in (("important", 500), ("system-node-critical", 2_000_001_000)):
        cluster.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    return cluster


def test_value_wins_over_name_and_names_resolve() -> None:
    cluster = _cluster()
    assert resolve_priority_threshold(cluster, 100, "important") == 100
    assert resolve_priority_threshold(cluster, None, "important") == 500
    assert resolve_priority_threshold(cluster, None, None) is None
    assert resolve_priority_threshold(cluster, 2_000_000_000, None) == 2_000_000_000
    with pytest.raises(NotFoundError, match="'missing' not found"):
        resolve_priority_threshold(cluster, None, "missing")


@pytest.mark.parametrize(("value", "name"), [(2_000_000_001, None), (None, "system-node-critical")])
def test_above_system_critical_is_refused(value: int | None, name: str | None) -> None:
    with pytest.raises(ValueError, match="can't be greater than 2000000000"):
        resolve_priority_threshold(_cluster(), value, name)
