"""The pytest plugin offers every koord_ fixture to a plugin author's tests, and none is autouse."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def test_all_koord_fixtures_are_offered(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_fixtures(koord_cluster, koord_clock, koord_builders, koord_scheduler_harness,
                          koord_descheduler_harness, koord_host_tree):
            from koord_framework.testing import make_node, make_pod

            h = koord_scheduler_harness([])
            assert h.cluster is not None
            d = koord_descheduler_harness([])
            assert d.cluster is not None
            tree = koord_host_tree(version=1)
            assert tree is not None
            koord_cluster.create(make_node("n1"))
            assert koord_cluster.get("Node", "n1")["metadata"]["name"] == "n1"
        """
    )
    result = pytester.runpytest("-p", "koord")
    result.assert_outcomes(passed=1)


def test_no_fixture_is_autouse() -> None:
    from koord_framework.testing import pytest_plugin

    markers = {name: getattr(pytest_plugin, name)._fixture_function_marker for name in pytest_plugin.__all__}
    assert len(markers) >= 6
    assert all(name.startswith("koord_") for name in markers)
    assert not [name for name, marker in markers.items() if marker.autouse]
