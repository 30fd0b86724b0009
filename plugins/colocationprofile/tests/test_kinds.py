"""The ClusterColocationProfile kind this distribution contributes (ADR 0004): registered through
``koord.kinds``, checked as manifests load, with errors naming file, object and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from koord_plugin_colocationprofile.kinds import KINDS

from koord_framework.cluster.manifests import load_manifests
from koord_framework.errors import ManifestError
from koord_framework.testing.kinds import KindConformance

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "colocation-profile.yaml"


def _obj(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": {"name": "p"},
        "spec": spec,
    }


class TestKinds(KindConformance):
    kinds = KINDS
    refused = [(_obj({"qosClass": "GOLD"}), "spec.qosClass: ")]


def test_the_example_loads() -> None:
    objs = load_manifests([EXAMPLE])
    assert objs[0]["spec"]["qosClass"] == "BE"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"qosClass": "GOLD"}, "spec.qosClass"),
        ({"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "spec.selector"),
        ({"koordinatorPriority": "high"}, "spec.koordinatorPriority"),
        ({"labels": {"a": 1}}, "spec.labels"),
        ({"labelKeysMapping": "a=b"}, "spec.labelKeysMapping"),
        ({"probability": "half"}, "spec.probability"),
    ],
)
def test_a_bad_profile_is_refused_naming_the_field(tmp_path: Path, spec: dict[str, Any], field: str) -> None:
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(_obj(spec)))
    with pytest.raises(ManifestError, match=field.replace(".", r"\.")):
        load_manifests([path])
