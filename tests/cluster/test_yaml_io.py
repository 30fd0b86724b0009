"""The YAML reader and writer: what the writer emits, the reader (and PyYAML) read back unchanged."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from koord_framework.cluster.yaml_io import dump_yaml_documents, join_path, json_document, yaml_documents
from koord_framework.errors import ManifestError

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
        st.sampled_from(
            ["yes", "No", "ON", "~", "null", "1e3", "0x1F", "0o17", "1_000", "1:20", ".5", "+1", "-"]
        ),
        st.sampled_from(
            ["2024-01-01T00:00:00Z", "2024-01-01", "100m", "1Gi", "a: b", "#x", "- x", "'", '"', "*a"]
        ),
        st.sampled_from(["\u2028", "\ufeff", "\x85", "\U0001f600", "tab\tand\nline", "", " lead", "trail "]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=30,
)


def _read(text: str) -> list[Any]:
    return [value for _, value in yaml_documents(text, "t.yaml")]


@settings(max_examples=400, deadline=None)
@given(st.lists(json_values, min_size=1, max_size=3))
def test_written_documents_read_back_equal(values: list[Any]) -> None:
    text = "".join(dump_yaml_documents(values))
    assert _read(text) == values
    assert list(yaml.load_all(text, Loader=yaml.SafeLoader)) == values, "PyYAML's own reader agrees"


def test_layout_is_kubectl_like() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app.kubernetes.io/name": "web"}, "annotations": {}},
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}],
            "tolerations": [],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None}],
        },
    }
    assert "".join(dump_yaml_documents([obj, {"ratio": 1.5e-05}])) == (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "  name: p\n"
        "  labels:\n"
        "    app.kubernetes.io/name: web\n"
        "  annotations: {}\n"
        "spec:\n"
        "  containers:\n"
        "  - name: c\n"
        "    resources:\n"
        "      requests:\n"
        "        cpu: 100m\n"
        "        memory: 1Gi\n"
        "  tolerations: []\n"
        "status:\n"
        "  phase: Running\n"
        "  conditions:\n"
        "  - type: Ready\n"
        '    status: "True"\n'
        "    lastProbeTime: null\n"
        "---\n"
        "ratio: 1.5e-05\n"
    )


def test_reader_keeps_timestamps_and_converts_keys() -> None:
    (doc,) = _read("t: 2024-01-01T00:00:00Z\n1: int key\ntrue: bool key\nv: [yes, 0x10, 1.5, ~]\n")
    assert doc == {
        "t": "2024-01-01T00:00:00Z",
        "1": "int key",
        "true": "bool key",
        "v": [True, 16, 1.5, None],
    }


def test_reader_merges_anchors() -> None:
    (doc,) = _read("base: &b {a: 1, b: 2}\nother: &o {c: 3}\nx:\n  <<: [*b, *o]\n  b: 9\n")
    assert doc["x"] == {"a": 1, "b": 9, "c": 3}
    doc["base"]["a"] = 100
    assert doc["x"]["a"] == 1, "aliases are expanded, not shared"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!binary aGVsbG8=\n", "unsupported YAML tag"),
        ("a: !custom x\n", "unsupported YAML tag"),
        ("a: .inf\n", "not a JSON number"),
        ("? [a, b]\n: c\n", "mapping key must be a scalar"),
        ("a: !!set {x}\n", "unsupported YAML tag"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("<<: 3\n", "merge key"),
    ],
)
def test_reader_refuses_what_json_cannot_hold(text: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        _read(text)


def test_join_path() -> None:
    assert join_path("", "spec") == "spec"
    assert join_path("spec", "nodeName") == "spec.nodeName"
    assert join_path("requests", "kubernetes.io/batch-cpu") == "requests[kubernetes.io/batch-cpu]"
    assert join_path("", "a.b") == "[a.b]"


def test_unpaired_surrogates_are_refused_both_ways() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        "".join(dump_yaml_documents([{"a": "x\ud800"}]))
    with pytest.raises(ManifestError, match="surrogate") as info:
        json_document('{"metadata": {"name": "\\ud800"}}', "s.json")
    assert info.value.path == "metadata.name"
