"""Feature gates: Koordinator's names and defaults per component, AllAlpha/AllBeta, bad input."""

from __future__ import annotations

import pytest

from koord_framework.featuregates import FeatureGateError, gates_for


def test_defaults_per_component() -> None:
    assert gates_for("koordlet").enabled("BECPUSuppress") is True
    assert gates_for("koordlet").enabled("BECPUEvict") is False
    assert gates_for("manager").enabled("PodMutatingWebhook") is True
    assert gates_for("scheduler").enabled("PriorityTransformer") is False
    with pytest.raises(KeyError):
        gates_for("scheduler").enabled("CPUBurst")


def test_all_alpha_and_all_beta_leave_explicit_gates_alone() -> None:
    g = gates_for("koordlet").parse("AllAlpha=true,BECPUEvict=false")
    assert g.enabled("CgroupReconcile") is True and g.enabled("BECPUEvict") is False
    g = gates_for("koordlet").parse("AllBeta=false")
    assert g.enabled("CPUBurst") is False and g.enabled("CgroupReconcile") is False


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Nope=true", "unrecognized feature gate: Nope"),
        ("CPUBurst=yes", "invalid value of CPUBurst=yes"),
        ("CPUBurst", "missing bool value for CPUBurst"),
    ],
)
def test_bad_input(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message):
        gates_for("koordlet").parse(text)


def test_help_lists_every_gate() -> None:
    text = gates_for("manager").help()
    assert "PodMutatingWebhook=true|false (BETA - default=true)" in text
    assert "AllAlpha=true|false" in text
