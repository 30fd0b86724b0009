"""The ``koord`` pytest plugin: fixtures a plugin author's test file gets from the installed framework."""

from __future__ import annotations

from importlib.metadata import entry_points
from types import ModuleType

import pytest

from koord_framework.cluster.memory import MemoryCluster
from koord_framework.testing import DEFAULT_START, FakeClock

pytest_plugins = ["pytester"]


def test_registered_under_pytest11() -> None:
    (ep,) = [e for e in entry_points(group="pytest11") if e.name == "koord"]
    assert ep.value == "koord_framework.testing.pytest_plugin"


def test_fixtures_in_this_suite(
    koord_clock: FakeClock, koord_cluster: MemoryCluster, koord_builders: ModuleType
) -> None:
    assert koord_clock.now() == DEFAULT_START
    assert koord_cluster.clock is koord_clock
    koord_cluster.create(koord_builders.make_pod("p"))
    assert koord_cluster.count("Pod") == 1


def test_a_plugin_authors_tests_get_the_fixtures(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_my_plugin="""
        def test_schedule_like_a_plugin_author(koord_cluster, koord_clock, koord_builders):
            koord_cluster.create(koord_builders.make_node("n1"))
            koord_cluster.create(koord_builders.make_pod("p", cpu="1"))
            koord_clock.advance(30)
            koord_cluster.bind("default", "p", "n1")
            pod = koord_cluster.get("Pod", "p", "default")
            assert pod["status"]["conditions"][0]["lastTransitionTime"] == "2024-01-01T00:00:30Z"

        def test_each_test_gets_a_fresh_cluster(koord_cluster):
            assert koord_cluster.count("Pod") == 0
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_no_fixture_is_autouse(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_untouched="""
        def test_nothing_requested(request):
            assert not [name for name in request.fixturenames if name.startswith("koord_")]
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
