"""``koord_framework.cluster.served``: the way to install a kind the API server does not serve names a file
that exists in ``configs/crds`` and the chart's switch that exists in its values."""

from __future__ import annotations

from pathlib import Path

import yaml

from koord_framework.cluster.kinds import KINDS
from koord_framework.cluster.served import crd_file, install_hint, is_builtin

ROOT = Path(__file__).resolve().parents[2]


def test_every_custom_kind_points_at_its_shipped_crd_and_chart_switch() -> None:
    values = yaml.safe_load((ROOT / "configs" / "helm" / "koord" / "values.yaml").read_text())["crds"]
    custom = [k for k in KINDS if not is_builtin(k)]
    assert "NodeMetric" in custom and "Pod" not in custom
    for kind in custom:
        path = crd_file(kind)
        assert path is not None and (ROOT / path).is_file(), f"{kind}: {path} is not shipped"
        doc = yaml.safe_load((ROOT / path).read_text())
        assert doc["spec"]["names"]["kind"] == kind
        plural = KINDS[kind].plural
        assert values.get(plural) is True, f"the chart has no crds.{plural} switch"
        hint = install_hint(kind)
        assert f"kubectl apply -f {path}" in hint and f"crds.{plural}=true" in hint


def test_builtin_and_unknown_kinds_are_not_crds() -> None:
    assert crd_file("Lease") is None
    assert "built into Kubernetes" in install_hint("Lease")
    assert crd_file("NoSuchKind") is None
    assert "not a kind" in install_hint("NoSuchKind")


def test_plugin_kinds_have_hints_and_a_missing_distribution_is_named() -> None:
    from koord_framework.cluster.kinds import KIND_DISTRIBUTIONS, installed_kinds

    for kind in KIND_DISTRIBUTIONS:  # installed in the project's environment: a CRD to apply
        assert kind in installed_kinds()
        assert (
            crd_file(kind)
            == f"configs/crds/{installed_kinds()[kind].group}_{installed_kinds()[kind].plural}.yaml"
        )
        assert "kubectl apply -f configs/crds/" in install_hint(kind)
    installed_kinds.cache_clear()
    try:
        from unittest import mock

        with mock.patch("koord_framework.cluster.kinds.contributed_kinds", return_value=[]):
            assert install_hint("PodGroup") == (
                "PodGroup is contributed by koord-plugin-coscheduling, which is not installed: "
                "pip install koord-plugin-coscheduling"
            )
    finally:
        installed_kinds.cache_clear()
