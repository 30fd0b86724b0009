"""Fuzzing the manifest loader: whatever the input, it loads or raises ManifestError, nothing else."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koord_framework.cluster.manifests import load_manifests, parse_documents
from koord_framework.errors import KoordError
from koord_framework.testing import make_node, make_node_metric, make_pdb, make_pod

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["100m", "1Gi", "-1", "1e3", "0.5", "Pod", "v1", "50%", "2024-01-01T00:00:00Z", "", "~"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.text(max_size=8), st.sampled_from(["kind", "metadata", "spec", "status"])),
            children,
            max_size=4,
        ),
    ),
    max_leaves=25,
)

SEEDS: list[dict[str, Any]] = [
    make_pod("p", cpu="1", memory="1Gi", node="n", labels={"a": "b"}),
    make_node("n", taints=["k=v:NoSchedule"]),
    make_node_metric("n", cpu="2", pods=[{"name": "p", "cpu": "1"}], aggregated={300: {"p90": {"cpu": "1"}}}),
    make_pdb("b", match_labels={"a": "b"}, min_available="50%"),
    {"apiVersion": "v1", "kind": "List", "items": [make_pod("q")]},
]


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_manifests(draw: st.DrawFn) -> Any:
    """A valid object with one field replaced by an arbitrary value: exercises every field check."""
    obj = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    path = draw(st.sampled_from(_paths(obj)))
    value = draw(json_values)
    if not path:
        return value
    target = obj
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return obj


def _check(text: str, name: str = "fuzz.yaml") -> None:
    with contextlib.suppress(KoordError):
        parse_documents(text, name, json_text=name.endswith(".json"))


@SETTINGS
@given(st.lists(st.one_of(json_values, mutated_manifests()), min_size=1, max_size=3))
def test_random_structures_as_yaml(docs: list[Any]) -> None:
    _check(yaml.safe_dump_all(docs))


@SETTINGS
@given(mutated_manifests())
def test_random_structures_as_json(doc: Any) -> None:
    _check(json.dumps(doc), "fuzz.json")


@SETTINGS
@given(
    st.lists(
        st.sampled_from([*"{}[]:,-&*!|>'\"#%@`?\n\t abk019.~", "---\n", "&a ", "*a", "<<: ", "kind: Pod\n"]),
        max_size=40,
    )
)
def test_random_yaml_text(pieces: list[str]) -> None:
    _check("".join(pieces))


@SETTINGS
@given(st.binary(max_size=64))
def test_random_bytes_through_files(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_bytes(data)
        with contextlib.suppress(KoordError):
            load_manifests([path])


def test_deep_nesting_is_a_manifest_error() -> None:
    for depth in (150, 5000):
        for text in ("[" * depth + "]" * depth, "a: " * 0 + "{a: " * depth + "1" + "}" * depth):
            _check(text)
        _check("[" * depth + "]" * depth, "deep.json")
