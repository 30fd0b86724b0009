"""Kubernetes label selectors, node selectors, node affinity and tolerations.

Cases name the upstream test they come from:
* k8s.io/apimachinery/pkg/labels/selector_test.go (TestRequirementConstructor,
  TestRequirementSelectorMatching)
* k8s.io/apimachinery/pkg/apis/meta/v1/helpers_test.go (TestLabelSelectorAsSelector)
* k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity_test.go (TestNodeSelectorMatch,
  TestPreferredSchedulingTermsScore, TestRequiredNodeAffinityMatch)
* k8s.io/component-helpers/scheduling/corev1/helpers_test.go (TestFindMatchingUntoleratedTaint)
* k8s.io/api/core/v1/toleration_test.go (TestTolerationToleratesTaint)
"""

from __future__ import annotations

from typing import Any

import pytest

from koord_framework.api.objects import NodeRecord, PodInfo, Taint
from koord_framework.api.selectors import (
    EVERYTHING,
    NOTHING,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    Requirement,
    SelectorError,
    find_untolerated_taint,
    is_qualified_name,
    is_valid_label_value,
    parse_label_selector,
    parse_node_selector,
    pod_matches_node_selector_and_affinity,
    selector_from_set,
    tolerates,
)


def node(name: str = "n1", labels: dict[str, str] | None = None) -> NodeRecord:
    return NodeRecord.from_manifest({"metadata": {"name": name, "labels": labels or {}}})


def pod(spec: dict[str, Any]) -> PodInfo:
    return PodInfo.from_manifest({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": [], **spec}})


# --- names ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("simple", True),
        ("now-with-dashes", True),
        ("1-starts-with-num", True),
        ("example.com/name", True),
        ("kubernetes.io/hostname", True),
        ("-starts-with-dash", False),
        ("ends-with-dash-", False),
        ("Example.com/name", False),  # prefix must be lowercase
        ("a/b/c", False),
        ("/name", False),
        ("x" * 64, False),
        ("", False),
    ],
)
def test_qualified_names(name: str, ok: bool) -> None:
    assert is_qualified_name(name) is ok


@pytest.mark.parametrize(
    ("value", "ok"), [("", True), ("a", True), ("a-b.c_d", True), ("-a", False), ("a" * 64, False)]
)
def test_label_values(value: str, ok: bool) -> None:
    assert is_valid_label_value(value) is ok


# --- requirements (TestRequirementConstructor) -------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "op", "values"),
    [
        ("x1", "In", []),  # in/notin need values
        ("x1", "NotIn", []),
        ("x1", "Exists", ["a"]),  # exists takes none
        ("x1", "Gt", ["1", "2"]),  # exactly one value
        ("x1", "Lt", ["a"]),  # integer
        ("x1", "Gt", ["-1"]),  # a negative number is not a valid label value
        ("-bad", "Exists", []),
        ("x1", "In", ["-bad"]),
    ],
)
def test_requirement_constructor_rejects(key: str, op: Any, values: list[str]) -> None:
    with pytest.raises(SelectorError):
        Requirement.new(key, op, values)


def test_requirement_matching() -> None:
    labels = {"x": "1", "y": "abc"}
    assert Requirement.new("x", "In", ["1", "2"]).matches(labels)
    assert not Requirement.new("x", "In", ["2"]).matches(labels)
    assert Requirement.new("z", "NotIn", ["1"]).matches(labels)  # absent key satisfies NotIn
    assert not Requirement.new("x", "NotIn", ["1"]).matches(labels)
    assert Requirement.new("x", "Gt", ["0"]).matches(labels)
    assert not Requirement.new("x", "Gt", ["1"]).matches(labels)
    assert Requirement.new("x", "Lt", ["2"]).matches(labels)
    assert not Requirement.new("y", "Gt", ["0"]).matches(labels)  # non-integer label value
    assert not Requirement.new("z", "Lt", ["9"]).matches(labels)  # absent key never compares
    assert Requirement.new("y", "Exists").matches(labels)
    assert Requirement.new("z", "DoesNotExist").matches(labels)


# --- label selectors (TestLabelSelectorAsSelector) ---------------------------------------------------------
def test_nil_selector_selects_nothing_and_empty_selects_everything() -> None:
    assert parse_label_selector(None) is NOTHING
    assert not NOTHING.matches({})
    assert not NOTHING.empty()
    assert parse_label_selector({}) == EVERYTHING
    assert EVERYTHING.matches({"a": "b"})
    assert EVERYTHING.empty()


def test_label_selector_match_labels_and_expressions() -> None:
    sel = parse_label_selector(
        {
            "matchLabels": {"foo": "bar"},
            "matchExpressions": [
                {"key": "baz", "operator": "In", "values": ["qux", "norf"]},
                {"key": "gone", "operator": "DoesNotExist"},
            ],
        }
    )
    assert sel.matches({"foo": "bar", "baz": "norf"})
    assert not sel.matches({"foo": "bar", "baz": "other"})
    assert not sel.matches({"foo": "bar", "baz": "qux", "gone": "x"})
    assert not sel.matches({"baz": "qux"})


def test_label_selector_rejects_bad_operator_and_gt() -> None:
    with pytest.raises(SelectorError, match="not a valid label selector operator"):
        parse_label_selector({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    with pytest.raises(SelectorError, match=r"matchExpressions\[0\].values"):
        parse_label_selector({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})


def test_selector_from_set() -> None:
    assert selector_from_set({}).matches({"x": "y"})
    assert selector_from_set({"a": "1"}).matches({"a": "1", "b": "2"})
    assert not selector_from_set({"a": "1"}).matches({"a": "2"})


# --- node selectors (TestNodeSelectorMatch) ----------------------------------------------------------------
NODE_SELECTOR_CASES: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("nil terms", [], False),
    ("nil term", [{}], False),
    (
        "label matches",
        [{"matchExpressions": [{"key": "label_1", "operator": "In", "values": ["label_1_val"]}]}],
        True,
    ),
    (
        "field matches",
        [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["host_1"]}]}],
        True,
    ),
    (
        "label does not match",
        [
            {
                "matchExpressions": [{"key": "label_1", "operator": "In", "values": ["label_1_val", "foo"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["host_2"]}],
            }
        ],
        False,
    ),
    (
        "second term matches",
        [
            {"matchExpressions": [{"key": "label_1", "operator": "In", "values": ["foo"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["host_2"]}]},
        ],
        True,
    ),
    (
        "Gt on integer label",
        [{"matchExpressions": [{"key": "num", "operator": "Gt", "values": ["4"]}]}],
        True,
    ),
    (
        "Lt on integer label",
        [{"matchExpressions": [{"key": "num", "operator": "Lt", "values": ["4"]}]}],
        False,
    ),
    (
        "invalid term is skipped, the valid one matches",
        [
            {"matchExpressions": [{"key": "label_1", "operator": "In", "values": []}]},
            {"matchExpressions": [{"key": "label_1", "operator": "Exists"}]},
        ],
        True,
    ),
    (
        "matchFields with two values is invalid",
        [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["host_1", "host_2"]}]}],
        False,
    ),
    (
        "unknown field never equals a non-empty value",
        [{"matchFields": [{"key": "metadata.namespace", "operator": "In", "values": ["x"]}]}],
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "terms", "want"), NODE_SELECTOR_CASES, ids=[c[0] for c in NODE_SELECTOR_CASES]
)
def test_node_selector_match(name: str, terms: list[dict[str, Any]], want: bool) -> None:
    n = node("host_1", {"label_1": "label_1_val", "num": "5"})
    assert parse_node_selector({"nodeSelectorTerms": terms}).match_node(n) is want


def test_strict_node_selector_raises_with_path() -> None:
    bad = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Foo"}]}]}
    with pytest.raises(SelectorError, match=r"nodeSelectorTerms\[0\].matchExpressions\[0\].operator"):
        parse_node_selector(bad, strict=True)
    lazy = parse_node_selector(bad)
    assert len(lazy.errors) == 1


# --- preferred terms (TestPreferredSchedulingTermsScore) ---------------------------------------------------
def test_preferred_terms_score_sums_matching_weights() -> None:
    terms = PreferredSchedulingTerms.parse(
        [
            {
                "weight": 5,
                "preference": {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]},
            },
            {
                "weight": 2,
                "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            },
            {"weight": 0, "preference": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}},
            {"weight": 7, "preference": {}},
            {"weight": 3, "preference": {"matchExpressions": [{"key": "baz", "operator": "Exists"}]}},
        ]
    )
    assert terms.score({"foo": "bar"}, "n1") == 7
    assert terms.score({"foo": "bar", "baz": ""}, "n2") == 8
    with pytest.raises(SelectorError):
        PreferredSchedulingTerms.parse(
            [{"weight": 1, "preference": {"matchExpressions": [{"key": "-x", "operator": "Exists"}]}}]
        )


# --- pod node selector and affinity (TestPodMatchesNodeSelectorAndAffinityTerms) ---------------------------
AFFINITY_CASES: list[tuple[str, dict[str, Any], dict[str, str], bool]] = [
    ("no selector", {}, {}, True),
    ("nodeSelector matches", {"nodeSelector": {"foo": "bar"}}, {"foo": "bar", "x": "y"}, True),
    ("nodeSelector does not match", {"nodeSelector": {"foo": "bar"}}, {"foo": "baz"}, False),
    (
        "required affinity with empty terms list matches nothing",
        {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
            }
        },
        {"foo": "bar"},
        False,
    ),
    (
        "required affinity In",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kernel-version", "operator": "Gt", "values": ["0204"]}
                                ]
                            }
                        ]
                    }
                }
            }
        },
        {"kernel-version": "0206"},
        True,
    ),
    (
        "nodeSelector and affinity are ANDed",
        {
            "nodeSelector": {"foo": "bar"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "Exists"}]}]
                    }
                }
            },
        },
        {"foo": "baz"},
        False,
    ),
    (
        "preferred only does not restrict",
        {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "preference": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
                        }
                    ]
                }
            }
        },
        {},
        True,
    ),
]


@pytest.mark.parametrize(
    ("name", "spec", "labels", "want"), AFFINITY_CASES, ids=[c[0] for c in AFFINITY_CASES]
)
def test_pod_matches_node_selector_and_affinity(
    name: str, spec: dict[str, Any], labels: dict[str, str], want: bool
) -> None:
    assert pod_matches_node_selector_and_affinity(pod(spec), node("n1", labels)) is want
    # the manifest forms give the same answer
    manifest_pod = {"spec": spec}
    manifest_node = {"metadata": {"name": "n1", "labels": labels}}
    assert pod_matches_node_selector_and_affinity(manifest_pod, manifest_node) is want


def test_required_node_affinity_match_fields_by_name() -> None:
    aff = RequiredNodeAffinity.of(
        pod(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": ["n2"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            }
        )
    )
    assert not aff.match_node(node("n1"))
    assert aff.match_node(node("n2"))


# --- tolerations (TestTolerationToleratesTaint, TestFindMatchingUntoleratedTaint) --------------------------
TOLERATION_CASES: list[tuple[str, dict[str, Any], Taint, bool]] = [
    ("empty toleration tolerates nothing with a value", {}, Taint("foo", "bar", "NoSchedule"), False),
    (
        "operator Exists with empty key tolerates all",
        {"operator": "Exists"},
        Taint("foo", "bar", "NoExecute"),
        True,
    ),
    (
        "effect mismatch",
        {"key": "foo", "operator": "Exists", "effect": "NoExecute"},
        Taint("foo", "", "NoSchedule"),
        False,
    ),
    ("key mismatch", {"key": "foo", "operator": "Exists"}, Taint("bar", "", "NoSchedule"), False),
    (
        "Equal with same value",
        {"key": "foo", "operator": "Equal", "value": "bar"},
        Taint("foo", "bar", "NoSchedule"),
        True,
    ),
    ("empty operator is Equal", {"key": "foo", "value": "bar"}, Taint("foo", "bar", "NoSchedule"), True),
    (
        "Equal with different value",
        {"key": "foo", "operator": "Equal", "value": "baz"},
        Taint("foo", "bar", "NoSchedule"),
        False,
    ),
    (
        "unknown operator",
        {"key": "foo", "operator": "Gt", "value": "1"},
        Taint("foo", "2", "NoSchedule"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "tol", "taint", "want"), TOLERATION_CASES, ids=[c[0] for c in TOLERATION_CASES]
)
def test_tolerates(name: str, tol: dict[str, Any], taint: Taint, want: bool) -> None:
    assert tolerates(tol, taint) is want
    assert tolerates(tol, {"key": taint.key, "value": taint.value, "effect": taint.effect}) is want


def test_find_untolerated_taint_respects_effect_filter() -> None:
    taints = [
        Taint("soft", "", "PreferNoSchedule"),
        Taint("dedicated", "user1", "NoSchedule"),
        Taint("x", "", "NoExecute"),
    ]
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"}]
    assert find_untolerated_taint(taints, tolerations) == Taint("x", "", "NoExecute")
    assert find_untolerated_taint(taints, tolerations, effects=None) == Taint("soft", "", "PreferNoSchedule")
    assert find_untolerated_taint(taints[:2], tolerations) is None
    assert find_untolerated_taint(taints, [{"operator": "Exists"}], effects=None) is None
