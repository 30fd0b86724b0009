"""``KindConformance``: the contract of a distribution that contributes CRD kinds (ADR 0004).

    class TestKinds(KindConformance):
        kinds = KINDS                      # the distribution's koord.kinds entry point's value
        refused = [                        # objects its validator must refuse, and what the error says
            ({"apiVersion": "...", "kind": "Reservation", "metadata": {"name": "r"},
              "spec": {"owners": []}}, "spec.owners: a reservation needs at least one owner"),
        ]

Checked: every kind is contributed through the ``koord.kinds`` entry points (the same object, validator
included) and none is built into the framework; each refused object fails to load with an error that names
the file, the document and the field; and a cluster without the distribution refuses the object naming the
kind (and, for Koordinator's kinds, the distribution to install) instead of loading it unchecked.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from koord_framework.cluster.kinds import KIND_DISTRIBUTIONS, KindInfo, KindRegistry
from koord_framework.cluster.manifests import load_manifests
from koord_framework.errors import ManifestError


class KindConformance:
    kinds: ClassVar[Sequence[KindInfo]]
    """Every kind the distribution contributes."""
    refused: ClassVar[Sequence[tuple[dict[str, Any], str]]] = ()
    """(object, error): an object of one of ``kinds`` that loading refuses, and the start of the error after
    its location: the dotted field, then the message (``"spec.owners: a reservation needs..."``). At least
    one per kind that has a validator. An object with a namespace is loaded after that Namespace."""

    def _write(self, tmp_path: Path, obj: dict[str, Any]) -> Path:
        documents: list[dict[str, Any]] = []
        namespace = obj.get("metadata", {}).get("namespace")
        if namespace:
            documents.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        documents.append(obj)
        path = tmp_path / "objects.yaml"
        path.write_text(yaml.safe_dump_all(documents))
        return path

    def test_every_kind_is_contributed_through_the_entry_points(self) -> None:
        installed = KindRegistry.discover()
        builtin = KindRegistry.builtin()
        for info in self.kinds:
            assert installed[info.kind] == info, f"{info.kind}: not the object the entry point contributes"
            assert installed[info.kind].validator is info.validator, f"{info.kind}: another validator won"
            assert info.kind not in builtin, f"{info.kind} is built into the framework, not contributed"

    def test_a_refused_object_names_file_document_and_field(self, tmp_path: Path) -> None:
        with_validator = {info.kind for info in self.kinds if info.validator is not None}
        covered = {obj["kind"] for obj, _ in self.refused}
        assert with_validator <= covered, f"no refused object for {sorted(with_validator - covered)}"
        for obj, error in self.refused:
            path = self._write(tmp_path, obj)
            document = 1 if obj.get("metadata", {}).get("namespace") else 0  # 0-based, as manifests.py counts
            with pytest.raises(ManifestError) as err:
                load_manifests([path], KindRegistry.discover())
            message = str(err.value)
            assert message.startswith(f"{path} (document {document}): {error}"), message

    def test_without_the_distribution_the_kind_is_refused_by_name(self, tmp_path: Path) -> None:
        for obj, _ in self.refused:
            kind = obj["kind"]
            path = self._write(tmp_path, obj)
            expected = f"unknown kind {kind!r}"
            if kind in KIND_DISTRIBUTIONS:
                expected += f".*install {KIND_DISTRIBUTIONS[kind]}"
            with pytest.raises(ManifestError, match=expected):
                load_manifests([path], KindRegistry.builtin())
