"""Kubernetes matching rules shared by the scheduler and the descheduler: label selectors, node selectors,
node affinity and taint tolerations.

Each function reproduces the apimachinery / component-helpers code the real components call, including its
corners, because a pod that fits in Kubernetes must fit here too:

* ``parse_label_selector(None)`` selects *nothing*, ``parse_label_selector({})`` selects *everything*
  (``metav1.LabelSelectorAsSelector``); ``LabelSelector.empty`` is true only for the latter.
* A node selector term without expressions and fields selects no node; terms are ORed, requirements inside
  a term ANDed. A term that does not parse (bad key, ``Gt`` with two values, ...) is skipped when matching and
  reported by the strict parser (``nodeaffinity.NewLazyErrorNodeSelector`` vs ``NewNodeSelector``).
* ``matchFields`` supports only ``metadata.name`` with ``In``/``NotIn`` and exactly one value.
* Tolerations: an empty effect matches every effect, an empty key every key; operator ``""`` means ``Equal``.

Inputs are the platform's slim records (``PodInfo``, ``NodeRecord``, ``Taint``) or Kubernetes-shaped dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from koord_framework.api.objects import NodeRecord, PodInfo, Taint
from koord_framework.api.strconv import parse_int

# --- name validation (k8s.io/apimachinery/pkg/util/validation) ------------------------------------------
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

OBJECT_NAME_FIELD: Final = "metadata.name"


def qualified_name_problems(name: str) -> list[str]:
    """Why ``name`` is not a valid label key (``IsQualifiedName``); empty when it is."""
    parts = name.split("/")
    if len(parts) == 1:
        local = parts[0]
    elif len(parts) == 2:
        prefix, local = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        if len(prefix) > 253:
            return ["prefix part must be no more than 253 characters"]
        if not _DNS1123_SUBDOMAIN.match(prefix):
            return ["prefix part must be a lowercase RFC 1123 subdomain"]
    else:
        return ["a qualified name must consist of an optional DNS subdomain prefix and '/' and a name"]
    if not local:
        return ["name part must be non-empty"]
    if len(local) > 63:
        return ["name part must be no more than 63 characters"]
    if not _QUALIFIED_NAME.match(local):
        return [
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        ]
    return []


def is_qualified_name(name: str) -> bool:
    return not qualified_name_problems(name)


def is_valid_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(_LABEL_VALUE.match(value))


class SelectorError(ValueError):
    """A selector that Kubernetes would refuse to parse; ``path`` names the offending field."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


# --- label selectors (k8s.io/apimachinery/pkg/labels) ------------------------------------------------------
Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Equals", "NotEquals"]
_SET_OPERATORS: Final = frozenset({"In", "NotIn", "Equals", "NotEquals"})


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``key <op> values`` requirement, validated as ``labels.NewRequirement`` validates it."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()
    number: int = 0
    """The parsed value of ``Gt``/``Lt``."""

    @staticmethod
    def new(key: str, operator: Operator, values: Sequence[str] = (), path: str = "") -> Requirement:
        problems = qualified_name_problems(key)
        if problems:
            raise SelectorError(f"{path}.key" if path else "key", f"invalid label key {key!r}: {problems[0]}")
        vpath = f"{path}.values" if path else "values"
        values = [str(v) for v in values]
        number = 0
        if operator in ("In", "NotIn"):
            if not values:
                raise SelectorError(vpath, "for 'in', 'notin' operators, values set can't be empty")
        elif operator in ("Equals", "NotEquals"):
            if len(values) != 1:
                raise SelectorError(vpath, "exact-match compatibility requires one single value")
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                raise SelectorError(vpath, "values set must be empty for exists and does not exist")
        elif operator in ("Gt", "Lt"):
            if len(values) != 1:
                raise SelectorError(vpath, "for 'Gt', 'Lt' operators, exactly one value is required")
            parsed = parse_int(values[0])
            if parsed is None:
                raise SelectorError(f"{vpath}[0]", "for 'Gt', 'Lt' operators, the value must be an integer")
            number = parsed
        else:  # pragma: no cover - callers map operators first
            raise SelectorError(
                f"{path}.operator" if path else "operator", f"unsupported operator {operator!r}"
            )
        for i, v in enumerate(values):
            if not is_valid_label_value(v):
                raise SelectorError(f"{vpath}[{i}]", f"invalid label value {v!r}")
        return Requirement(key, operator, frozenset(values), number)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in ("In", "Equals"):
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op in ("NotIn", "NotEquals"):
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if value is None:
            return False
        parsed = parse_int(value)
        if parsed is None:
            return False
        return parsed > self.number if op == "Gt" else parsed < self.number


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed selector. ``nothing`` selects no object; no requirements (and not nothing) selects all."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        """``labels.Selector.Empty()``: true for the select-everything selector only."""
        return not self.nothing and not self.requirements

    def add(self, *requirements: Requirement) -> LabelSelector:
        if self.nothing:
            return self
        return LabelSelector(self.requirements + tuple(requirements))


EVERYTHING: Final = LabelSelector()
NOTHING: Final = LabelSelector(nothing=True)

_LABEL_SELECTOR_OPS: Final[dict[str, Operator]] = {
    "In": "In",
    "NotIn": "NotIn",
    "Exists": "Exists",
    "DoesNotExist": "DoesNotExist",
}


def parse_label_selector(obj: Mapping[str, Any] | None, path: str = "") -> LabelSelector:
    """``metav1.LabelSelectorAsSelector``: ``None`` selects nothing, ``{}`` everything. Raises SelectorError."""  # noqa: E501
    if obj is None:
        return NOTHING
    match_labels = obj.get("matchLabels") or {}
    match_expressions = obj.get("matchExpressions") or []
    if not match_labels and not match_expressions:
        return EVERYTHING
    reqs: list[Requirement] = []
    for k, v in match_labels.items():
        reqs.append(Requirement.new(str(k), "Equals", [str(v)], f"{path}.matchLabels[{k}]".lstrip(".")))
    for i, expr in enumerate(match_expressions):
        p = f"{path}.matchExpressions[{i}]".lstrip(".")
        op = _LABEL_SELECTOR_OPS.get(str(expr.get("operator", "")))
        if op is None:
            raise SelectorError(
                f"{p}.operator", f"{expr.get('operator')!r} is not a valid label selector operator"
            )
        reqs.append(Requirement.new(str(expr.get("key", "")), op, list(expr.get("values") or ()), p))
    return LabelSelector(tuple(reqs))


def selector_from_set(labels: Mapping[str, str]) -> LabelSelector:
    """``labels.SelectorFromSet``: equality on every pair, no validation (an empty set selects everything)."""
    return LabelSelector(tuple(Requirement(k, "Equals", frozenset({v})) for k, v in labels.items()))


# --- node selectors (k8s.io/component-helpers/scheduling/corev1/nodeaffinity) ------------------------------
_NODE_SELECTOR_OPS: Final[dict[str, Operator]] = {
    "In": "In",
    "NotIn": "NotIn",
    "Exists": "Exists",
    "DoesNotExist": "DoesNotExist",
    "Gt": "Gt",
    "Lt": "Lt",
}


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """``metadata.name`` (or another field) equal / not equal to one value."""

    key: str
    equal: bool
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        # fields.Set.Get returns "" for a missing field, and the field selector compares against that.
        actual = fields.get(self.key, "")
        return (actual == self.value) if self.equal else (actual != self.value)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One parsed term; ``error`` holds the first parse problem (the term then matches nothing)."""

    match_labels: LabelSelector | None = None
    match_fields: tuple[FieldRequirement, ...] | None = None
    error: SelectorError | None = None

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if self.error is not None:
            return False
        if self.match_labels is not None and not self.match_labels.matches(labels):
            return False
        if self.match_fields is not None and name:
            fields = {OBJECT_NAME_FIELD: name}
            if not all(f.matches(fields) for f in self.match_fields):
                return False
        return True


def _is_empty_term(term: Mapping[str, Any] | None) -> bool:
    return not term or (not term.get("matchExpressions") and not term.get("matchFields"))


def _parse_expressions(exprs: Sequence[Mapping[str, Any]], path: str) -> LabelSelector:
    reqs: list[Requirement] = []
    for i, expr in enumerate(exprs):
        p = f"{path}[{i}]"
        op = _NODE_SELECTOR_OPS.get(str(expr.get("operator", "")))
        if op is None:
            raise SelectorError(f"{p}.operator", f"Unsupported value: {expr.get('operator')!r}")
        reqs.append(Requirement.new(str(expr.get("key", "")), op, list(expr.get("values") or ()), p))
    return LabelSelector(tuple(reqs))


def _parse_fields(exprs: Sequence[Mapping[str, Any]], path: str) -> tuple[FieldRequirement, ...]:
    out: list[FieldRequirement] = []
    for i, expr in enumerate(exprs):
        p = f"{path}[{i}]"
        op = expr.get("operator")
        values = list(expr.get("values") or ())
        if op not in ("In", "NotIn"):
            raise SelectorError(
                f"{p}.operator", f'Unsupported value: {op!r}: supported values: "In", "NotIn"'
            )
        if len(values) != 1:
            raise SelectorError(f"{p}.values", "must have one element")
        out.append(FieldRequirement(str(expr.get("key", "")), op == "In", str(values[0])))
    return tuple(out)


def parse_node_selector_term(term: Mapping[str, Any], path: str = "") -> NodeSelectorTerm:
    """Parse one term; problems are kept on the term (lazy), never raised."""
    try:
        labels = None
        fields = None
        if term.get("matchExpressions"):
            labels = _parse_expressions(term["matchExpressions"], f"{path}.matchExpressions".lstrip("."))
        if term.get("matchFields"):
            fields = _parse_fields(term["matchFields"], f"{path}.matchFields".lstrip("."))
        return NodeSelectorTerm(labels, fields)
    except SelectorError as err:
        return NodeSelectorTerm(error=err)


@dataclass(frozen=True, slots=True)
class NodeSelector:
    """ORed node selector terms (empty terms dropped: they select no node)."""

    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        return any(t.matches(labels, name) for t in self.terms)

    def match_node(self, node: NodeRecord | Mapping[str, Any]) -> bool:
        labels, name = _node_labels_and_name(node)
        return self.matches(labels, name)

    @property
    def errors(self) -> list[SelectorError]:
        return [t.error for t in self.terms if t.error is not None]


def parse_node_selector(obj: Mapping[str, Any], path: str = "", *, strict: bool = False) -> NodeSelector:
    """Parse ``{nodeSelectorTerms: [...]}``. ``strict`` raises the first problem (``NewNodeSelector``)."""
    terms: list[NodeSelectorTerm] = []
    for i, term in enumerate(obj.get("nodeSelectorTerms") or ()):
        if _is_empty_term(term):
            continue
        parsed = parse_node_selector_term(term, f"{path}.nodeSelectorTerms[{i}]".lstrip("."))
        if strict and parsed.error is not None:
            raise parsed.error
        terms.append(parsed)
    return NodeSelector(tuple(terms))


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerms:
    """Weighted preferred terms; ``score`` is the sum of the weights of the terms a node matches."""

    terms: tuple[tuple[NodeSelectorTerm, int], ...]

    @staticmethod
    def parse(terms: Sequence[Mapping[str, Any]], path: str = "") -> PreferredSchedulingTerms:
        """``NewPreferredSchedulingTerms``: zero-weight and empty terms are dropped; a bad term raises."""
        out: list[tuple[NodeSelectorTerm, int]] = []
        for i, term in enumerate(terms):
            weight = int(term.get("weight") or 0)
            pref = term.get("preference") or {}
            if weight == 0 or _is_empty_term(pref):
                continue
            parsed = parse_node_selector_term(pref, f"{path}[{i}].preference".lstrip("."))
            if parsed.error is not None:
                raise parsed.error
            out.append((parsed, weight))
        return PreferredSchedulingTerms(tuple(out))

    def score(self, labels: Mapping[str, str], name: str) -> int:
        return sum(w for t, w in self.terms if t.matches(labels, name))


def _node_labels_and_name(node: NodeRecord | Mapping[str, Any]) -> tuple[Mapping[str, str], str]:
    if isinstance(node, NodeRecord):
        return node.labels, node.name
    meta = node.get("metadata") or {}
    return meta.get("labels") or {}, str(meta.get("name") or "")


def _pod_selector_and_affinity(
    pod: PodInfo | Mapping[str, Any],
) -> tuple[Mapping[str, str], Mapping[str, Any]]:
    if isinstance(pod, PodInfo):
        return pod.node_selector, pod.affinity or {}
    spec = pod.get("spec") or {}
    return spec.get("nodeSelector") or {}, spec.get("affinity") or {}


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """A pod's ``nodeSelector`` ANDed with its required node affinity (``GetRequiredNodeAffinity``)."""

    label_selector: LabelSelector | None
    node_selector: NodeSelector | None

    @staticmethod
    def of(pod: PodInfo | Mapping[str, Any]) -> RequiredNodeAffinity:
        node_selector_map, affinity = _pod_selector_and_affinity(pod)
        label_selector = selector_from_set(node_selector_map) if node_selector_map else None
        required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        node_selector = parse_node_selector(required) if required is not None else None
        return RequiredNodeAffinity(label_selector, node_selector)

    def matches(self, labels: Mapping[str, str], name: str) -> bool:
        if self.label_selector is not None and not self.label_selector.matches(labels):
            return False
        if self.node_selector is not None:
            return self.node_selector.matches(labels, name)
        return True

    def match_node(self, node: NodeRecord | Mapping[str, Any]) -> bool:
        labels, name = _node_labels_and_name(node)
        return self.matches(labels, name)


def pod_matches_node_selector_and_affinity(
    pod: PodInfo | Mapping[str, Any], node: NodeRecord | Mapping[str, Any]
) -> bool:
    """Whether ``node`` satisfies the pod's nodeSelector and required node affinity (parse errors: no match)."""  # noqa: E501
    return RequiredNodeAffinity.of(pod).match_node(node)


# --- taints and tolerations (k8s.io/api/core/v1 toleration.go, component-helpers) ---------------------
TaintLike = Taint | Mapping[str, Any]
NO_SCHEDULE: Final = "NoSchedule"
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
NO_EXECUTE: Final = "NoExecute"
DO_NOT_SCHEDULE_EFFECTS: Final = frozenset({NO_SCHEDULE, NO_EXECUTE})
"""The effects that keep a pod off a node at scheduling time (``DoNotScheduleTaintsFilterFunc``)."""


def _taint_fields(taint: TaintLike) -> tuple[str, str, str]:
    if isinstance(taint, Taint):
        return taint.key, taint.value, taint.effect
    return str(taint.get("key") or ""), str(taint.get("value") or ""), str(taint.get("effect") or "")


def tolerates(toleration: Mapping[str, Any], taint: TaintLike) -> bool:
    """``Toleration.ToleratesTaint``: effect and key match when set; ``Equal`` (or empty) compares values."""
    key, value, effect = _taint_fields(taint)
    t_effect = toleration.get("effect") or ""
    if t_effect and t_effect != effect:
        return False
    t_key = toleration.get("key") or ""
    if t_key and t_key != key:
        return False
    op = toleration.get("operator") or ""
    if op in ("", "Equal"):
        return (toleration.get("value") or "") == value
    return op == "Exists"


def tolerations_tolerate_taint(tolerations: Iterable[Mapping[str, Any]], taint: TaintLike) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated_taint(
    taints: Iterable[TaintLike],
    tolerations: Sequence[Mapping[str, Any]],
    effects: Iterable[str] | None = DO_NOT_SCHEDULE_EFFECTS,
) -> TaintLike | None:
    """The first taint with one of ``effects`` (all effects when ``None``) that no toleration tolerates."""
    wanted = None if effects is None else frozenset(effects)
    for taint in taints:
        if wanted is not None and _taint_fields(taint)[2] not in wanted:
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


__all__ = [
    "DO_NOT_SCHEDULE_EFFECTS",
    "EVERYTHING",
    "NOTHING",
    "NO_EXECUTE",
    "NO_SCHEDULE",
    "OBJECT_NAME_FIELD",
    "PREFER_NO_SCHEDULE",
    "FieldRequirement",
    "LabelSelector",
    "NodeSelector",
    "NodeSelectorTerm",
    "PreferredSchedulingTerms",
    "RequiredNodeAffinity",
    "Requirement",
    "SelectorError",
    "find_untolerated_taint",
    "is_qualified_name",
    "is_valid_label_value",
    "parse_label_selector",
    "parse_node_selector",
    "parse_node_selector_term",
    "pod_matches_node_selector_and_affinity",
    "qualified_name_problems",
    "selector_from_set",
    "tolerates",
    "tolerations_tolerate_taint",
]
