"""Random YAML thrown at the loaders: the answer is a configuration or a KoordError, never a traceback."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koord_framework.config import load_text
from koord_framework.errors import KoordError
from koord_framework.registry import PluginRegistry

HEADERS = [
    {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
    {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration"},
    {"apiVersion": "koordlet.koordinator.sh/v1alpha1", "kind": "KoordletConfiguration"},
    {"apiVersion": "v1", "kind": "ConfigMap"},
    {},
]

# Keys the models know, so generated documents get past the first unknown field and reach deeper checks.
VOCABULARY = [
    "profiles",
    "schedulerName",
    "plugins",
    "pluginConfig",
    "name",
    "args",
    "enabled",
    "disabled",
    "weight",
    "multiPoint",
    "queueSort",
    "preFilter",
    "filter",
    "score",
    "bind",
    "postFilter",
    "reserve",
    "permit",
    "preBind",
    "postBind",
    "preEnqueue",
    "preScore",
    "evict",
    "balance",
    "deschedule",
    "leaderElection",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "leaderElect",
    "resourceLock",
    "clientConnection",
    "qps",
    "burst",
    "percentageOfNodesToScore",
    "parallelism",
    "extenders",
    "urlPrefix",
    "deschedulingInterval",
    "nodeSelector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "qosStrategies",
    "runtimeHooks",
    "failurePolicy",
    "hostPaths",
    "procRoot",
    "usageThresholds",
    "cpu",
    "data",
    "kind",
    "apiVersion",
    "LoadAwareScheduling",
    "PrioritySort",
    "DefaultBinder",
    "MigrationController",
    "LowNodeLoad",
    "BECPUSuppress",
    "GroupIdentity",
    "*",
    "10s",
    "1m30s",
    "In",
    "Fail",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(VOCABULARY),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=8), st.integers(-3, 3), st.booleans())
structures = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=30,
)

# Text is cheap to try; whole documents cost a YAML round trip each, so they get fewer examples per run.
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_DOCS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def load_or_koord_error(text: str, registries: dict[str, PluginRegistry]) -> None:
    try:
        load_text(text, "fuzz.yaml", registries=registries)
    except KoordError as exc:
        assert str(exc)  # a message, and nothing else escapes


@FUZZ
@given(text=st.text(max_size=300))
def test_random_text(text: str, shared_registries: dict[str, PluginRegistry]) -> None:
    load_or_koord_error(text, shared_registries)


YAML_PIECES = st.sampled_from(
    [
        "a: 1\n",
        "- x\n",
        "  b: [1, 2\n",
        "? [k]\n: v\n",
        "&a [*a]\n",
        "*undefined\n",
        "!!python/object:os.system x\n",
        "!!binary aGVsbG8=\n",
        "2001-13-45\n",
        "!!set {a, b}\n",
        "<<: {a: 1}\n",
        "'unterminated\n",
        "---\n",
        "...\n",
        "%YAML 1.1\n",
        "key: |\n  block\n",
        "\t tab: 1\n",
        "kind: KubeSchedulerConfiguration\n",
        "apiVersion: kubescheduler.config.k8s.io/v1\n",
        "profiles:\n- plugins: {filter: {enabled: [{name: x}]}}\n",
        "data:\n  c: |\n    kind: DeschedulerConfiguration\n    profiles: [\n",
        "kind: ConfigMap\n",
        "\x00",
        "\ufeff",
        "{a: 1, a: 2}\n",
        "x: 10e999\n",
        "y: !!int '0x1F'\n",
        "z: !!float '.nan'\n",
    ]
)


@FUZZ
@given(pieces=st.lists(YAML_PIECES, max_size=8))
def test_random_yaml_fragments(pieces: list[str], shared_registries: dict[str, PluginRegistry]) -> None:
    load_or_koord_error("".join(pieces), shared_registries)


@FUZZ_DOCS
@given(
    header=st.sampled_from(HEADERS), body=st.dictionaries(st.sampled_from(VOCABULARY), structures, max_size=6)
)
def test_random_structures(
    header: dict[str, Any], body: dict[str, Any], shared_registries: dict[str, PluginRegistry]
) -> None:
    document = {**body, **header}
    load_or_koord_error(yaml.safe_dump(document, allow_unicode=True), shared_registries)


@FUZZ_DOCS
@given(header=st.sampled_from(HEADERS[:3]), body=structures)
def test_random_structures_inside_a_configmap(
    header: dict[str, Any], body: Any, shared_registries: dict[str, PluginRegistry]
) -> None:
    inner = {**header, "profiles": body} if isinstance(body, list) else body
    text = yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"config": yaml.safe_dump(inner)}}
    )
    load_or_koord_error(text, shared_registries)


@FUZZ_DOCS
@given(
    plugin_config=st.lists(
        st.fixed_dictionaries(
            {"name": st.sampled_from([*VOCABULARY, "NodeResourcesFit", "ElasticQuota"]), "args": structures}
        ),
        max_size=4,
    ),
    plugins=st.dictionaries(
        st.sampled_from(["filter", "score", "multiPoint", "queueSort", "bind"]), structures, max_size=3
    ),
)
def test_random_plugin_config_and_plugin_sets(
    plugin_config: list[dict[str, Any]], plugins: dict[str, Any], shared_registries: dict[str, PluginRegistry]
) -> None:
    profile = {"schedulerName": "s", "pluginConfig": plugin_config, "plugins": plugins}
    document = {**HEADERS[0], "profiles": [profile]}
    load_or_koord_error(yaml.safe_dump(document, allow_unicode=True), shared_registries)


def test_alias_bomb_is_refused_quickly(shared_registries: dict[str, PluginRegistry]) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [
        f"a{i}: &a{i} [*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1},*a{i - 1}]"
        for i in range(1, 9)
    ]
    try:
        load_text("\n".join(lines) + "\n", "bomb.yaml", registries=shared_registries)
    except KoordError as exc:
        assert "too large once its aliases are expanded" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an alias bomb was accepted")


def test_recursive_alias_is_refused(shared_registries: dict[str, PluginRegistry]) -> None:
    try:
        load_text("a: &a [*a]\n", "rec.yaml", registries=shared_registries)
    except KoordError as exc:
        assert "alias" in str(exc) or "recursive" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("a recursive alias was accepted")


def test_deep_nesting_is_refused(shared_registries: dict[str, PluginRegistry]) -> None:
    for text in ("[" * 5000 + "]" * 5000, "".join(f"{' ' * i}k{i}:\n" for i in range(400))):
        try:
            load_text(text, "deep.yaml", registries=shared_registries)
        except KoordError as exc:
            assert "nested deeper than 100 levels" in str(exc)
            assert "invalid YAML at line " in str(exc)
        else:  # pragma: no cover
            raise AssertionError("a deeply nested document was accepted")


def test_nesting_up_to_the_limit_is_fine(shared_registries: dict[str, PluginRegistry]) -> None:
    try:
        load_text("x: " + "[" * 90 + "]" * 90 + "\n", "deep.yaml", registries=shared_registries)
    except KoordError as exc:
        assert "nested" not in str(exc)  # refused for being no configuration, not for depth
    else:  # pragma: no cover
        raise AssertionError("not a configuration, yet accepted")
