"""The ElasticQuota kind this distribution contributes (ADR 0004): registered through ``koord.kinds``,
checked as manifests load, with errors naming file, object and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from koord_plugin_elasticquota.kinds import KINDS

from koord_framework.cluster.kinds import KindRegistry
from koord_framework.cluster.manifests import load_manifests
from koord_framework.errors import ManifestError

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}


def _write(tmp_path: Path, obj: dict[str, Any]) -> Path:
    path = tmp_path / "objects.yaml"
    path.write_text(yaml.safe_dump_all([NAMESPACE, obj]))
    return path


def _obj(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"namespace": "team", "name": "q"},
        **fields,
    }


def test_the_entry_point_contributes_the_kind() -> None:
    installed = KindRegistry.discover()
    assert installed["ElasticQuota"] == KINDS[0]
    assert installed["ElasticQuota"].validator is KINDS[0].validator
    assert "ElasticQuota" not in KindRegistry.builtin()


def test_a_bad_field_is_refused_naming_file_object_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, _obj({"spec": {"max": {"cpu": "lots"}}}))
    with pytest.raises(ManifestError) as err:
        load_manifests([path], KindRegistry.discover())
    assert str(err.value).startswith(f"{path} (document 1): spec.max.cpu: ")


def test_without_the_distribution_the_kind_names_it(tmp_path: Path) -> None:
    path = _write(tmp_path, _obj({"spec": {"max": {"cpu": "lots"}}}))
    with pytest.raises(
        ManifestError, match=r"unknown kind 'ElasticQuota'.*install koord-plugin-elasticquota"
    ):
        load_manifests([path], KindRegistry.builtin())
