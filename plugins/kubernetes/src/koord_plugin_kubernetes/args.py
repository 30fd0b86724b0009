"""Plugin args with kube-scheduler's v1 field names, defaults (``SetDefaults_*``) and validation
(``pkg/scheduler/apis/config/validation/validation_pluginargs.go``).

Validation failures raise ``ValueError`` inside pydantic, so a bad profile surfaces as one
``pydantic.ValidationError`` whose message names the field path exactly as kube-scheduler does
(``scoringStrategy.resources[0].weight: ...``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from koord_framework.api.selectors import (
    PreferredSchedulingTerms,
    SelectorError,
    parse_node_selector,
    qualified_name_problems,
)
from koord_framework.plugin import PluginArgs

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE = 10
"""The top of a RequestedToCapacityRatio shape's score axis; scores are scaled by 100/10."""


class _Nested(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        validate_default=True,
    )


def _raise(problems: list[str]) -> None:
    if problems:
        raise ValueError("; ".join(problems))


class ResourceSpec(_Nested):
    """A resource to score and its weight."""

    name: str
    """Resource name, e.g. ``cpu``, ``memory``, ``kubernetes.io/batch-cpu``, ``nvidia.com/gpu``."""
    weight: int = 0
    """Weight of the resource; 0 (unset) becomes 1."""


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


def _with_default_weights(resources: list[ResourceSpec]) -> list[ResourceSpec]:
    if not resources:
        return _default_resources()
    return [r if r.weight != 0 else ResourceSpec(name=r.name, weight=1) for r in resources]


class UtilizationShapePoint(_Nested):
    utilization: int
    """Utilization (x axis), 0..100."""
    score: int
    """Score (y axis), 0..10; scaled by 10 to the scheduler's 0..100."""


class RequestedToCapacityRatioParam(_Nested):
    shape: list[UtilizationShapePoint] = Field(default_factory=list)
    """Points of the broken-linear scoring function, sorted by increasing utilization."""


class ScoringStrategy(_Nested):
    type: str = ""
    """``LeastAllocated``, ``MostAllocated`` or ``RequestedToCapacityRatio``."""
    resources: list[ResourceSpec] = Field(default_factory=list)
    """Resources to score with their weights; empty means cpu and memory with weight 1."""
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None
    """The shape used by the ``RequestedToCapacityRatio`` strategy."""

    @field_validator("resources", mode="after")
    @classmethod
    def _default_resources(cls, v: list[ResourceSpec]) -> list[ResourceSpec]:
        return _with_default_weights(v)


def _validate_shape(shape: list[UtilizationShapePoint], path: str) -> list[str]:
    if not shape:
        return [f"{path}: Required value: at least one point must be specified"]
    problems: list[str] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            problems.append(
                f"{path}[{i}].utilization: Invalid value: {shape[i].utilization}: values must be sorted in "
                "increasing order"
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            problems.append(
                f"{path}[{i}].utilization: Invalid value: {point.utilization}: not in valid range [0, 100]"
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            problems.append(f"{path}[{i}].score: Invalid value: {point.score}: not in valid range [0, 10]")
    return problems


class NodeResourcesFitArgs(PluginArgs):
    """Args of NodeResourcesFit (kubescheduler.config.k8s.io/v1 NodeResourcesFitArgs)."""

    ignored_resources: list[str] = Field(default_factory=list)
    """Extended resources the Filter ignores (only extended names, e.g. ``example.com/foo``, are ignorable)."""  # noqa: E501
    ignored_resource_groups: list[str] = Field(default_factory=list)
    """Extended-resource domains the Filter ignores, e.g. ``example.com`` ignores ``example.com/*``."""
    scoring_strategy: ScoringStrategy = Field(
        default_factory=lambda: ScoringStrategy(type=LEAST_ALLOCATED, resources=_default_resources())
    )
    """How nodes are scored; default LeastAllocated over cpu and memory with weight 1."""

    @model_validator(mode="after")
    def _validate(self) -> NodeResourcesFitArgs:
        problems: list[str] = []
        for i, res in enumerate(self.ignored_resources):
            for p in qualified_name_problems(res):
                problems.append(f"ignoredResources[{i}]: Invalid value: {res!r}: {p}")
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                problems.append(
                    f"ignoredResourceGroups[{i}]: Invalid value: {group!r}: resource group name can't contain '/'"  # noqa: E501
                )
            for p in qualified_name_problems(group):
                problems.append(f"ignoredResourceGroups[{i}]: Invalid value: {group!r}: {p}")
        strategy = self.scoring_strategy
        if strategy.type not in SCORING_STRATEGIES:
            supported = ", ".join(f'"{s}"' for s in sorted(SCORING_STRATEGIES))
            problems.append(
                f'scoringStrategy.type: Unsupported value: "{strategy.type}": supported values: {supported}'
            )
        for i, r in enumerate(strategy.resources):
            if not 0 < r.weight <= 100:
                problems.append(
                    f"scoringStrategy.resources[{i}].weight: Invalid value: {r.weight}: resource weight of "
                    f"{r.name} not in valid range (0, 100]"
                )
        if strategy.requested_to_capacity_ratio is not None:
            problems += _validate_shape(strategy.requested_to_capacity_ratio.shape, "scoringStrategy.shape")
        elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            # kube-scheduler dereferences the shape when it builds the scorer; refuse it here instead.
            problems.append(
                "scoringStrategy.requestedToCapacityRatio: Required value: the RequestedToCapacityRatio strategy needs a shape"  # noqa: E501
            )
        _raise(problems)
        return self


class NodeResourcesBalancedAllocationArgs(PluginArgs):
    """Args of NodeResourcesBalancedAllocation."""

    resources: list[ResourceSpec] = Field(default_factory=_default_resources)
    """Resources whose requested fractions are balanced; default cpu and memory. Weights must be 1."""

    @field_validator("resources", mode="after")
    @classmethod
    def _defaults(cls, v: list[ResourceSpec]) -> list[ResourceSpec]:
        return _with_default_weights(v)

    @model_validator(mode="after")
    def _validate(self) -> NodeResourcesBalancedAllocationArgs:
        problems: list[str] = []
        seen: set[str] = set()
        for i, r in enumerate(self.resources):
            if r.name in seen:
                problems.append(f'resources[{i}].name: Duplicate value: "{r.name}"')
            seen.add(r.name)
            if r.weight != 1:
                problems.append(f"resources[{i}].weight: Invalid value: {r.weight}: must be 1")
        _raise(problems)
        return self


SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"


class PodTopologySpreadArgs(PluginArgs):
    """Args of PodTopologySpread."""

    default_constraints: list[dict[str, Any]] = Field(default_factory=list)
    """Constraints for pods that define none (``defaultingType: List``); no ``labelSelector`` allowed."""
    defaulting_type: str = SYSTEM_DEFAULTING
    """``System`` (kube-scheduler's built-in soft constraints on hostname and zone) or ``List``."""

    @model_validator(mode="after")
    def _validate(self) -> PodTopologySpreadArgs:
        problems: list[str] = []
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            problems.append(
                f'defaultingType: Unsupported value: "{self.defaulting_type}": supported values: "List", "System"'  # noqa: E501
            )
        elif self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            problems.append('defaultingType: Invalid value: "System": when .defaultConstraints are not empty')
        for i, c in enumerate(self.default_constraints):
            p = f"defaultConstraints[{i}]"
            if int(c.get("maxSkew") or 0) <= 0:
                problems.append(
                    f"{p}.maxSkew: Invalid value: {c.get('maxSkew', 0)}: not in valid range (0, inf)"
                )
            key = str(c.get("topologyKey") or "")
            if not key:
                problems.append(f"{p}.topologyKey: Required value: can not be empty")
            else:
                problems += [
                    f"{p}.topologyKey: Invalid value: {key!r}: {m}" for m in qualified_name_problems(key)
                ]
            when = c.get("whenUnsatisfiable") or ""
            if not when:
                problems.append(f"{p}.whenUnsatisfiable: Required value: can not be empty")
            elif when not in ("DoNotSchedule", "ScheduleAnyway"):
                problems.append(
                    f'{p}.whenUnsatisfiable: Unsupported value: "{when}": supported values: "DoNotSchedule", "ScheduleAnyway"'  # noqa: E501
                )
            if c.get("labelSelector") is not None:
                problems.append(
                    f"{p}.labelSelector: Forbidden: constraint must not define a selector, as they deduced for each pod"  # noqa: E501
                )
            for j in range(i):
                o = self.default_constraints[j]
                if o.get("topologyKey") == c.get("topologyKey") and o.get("whenUnsatisfiable") == when:
                    problems.append(f'defaultConstraints[{i}]: Duplicate value: "{{{key}, {when}}}"')
                    break
        _raise(problems)
        return self


class InterPodAffinityArgs(PluginArgs):
    """Args of InterPodAffinity."""

    hard_pod_affinity_weight: int = 1
    """Score weight of existing pods' *required* affinity terms that the incoming pod matches, 0..100."""
    ignore_preferred_terms_of_existing_pods: bool = False
    """Skip existing pods' preferred terms when the incoming pod has no preferred (anti-)affinity."""

    @model_validator(mode="after")
    def _validate(self) -> InterPodAffinityArgs:
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            _raise(
                [
                    f"hardPodAffinityWeight: Invalid value: {self.hard_pod_affinity_weight}: not in valid range [0, 100]"  # noqa: E501
                ]
            )
        return self


class NodeAffinityArgs(PluginArgs):
    """Args of NodeAffinity."""

    added_affinity: dict[str, Any] | None = None
    """A NodeAffinity ANDed with every pod's own (required and preferred terms)."""

    @model_validator(mode="after")
    def _validate(self) -> NodeAffinityArgs:
        aff = self.added_affinity
        if aff is None:
            return self
        problems: list[str] = []
        required = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            try:
                parse_node_selector(
                    required, "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution", strict=True
                )
            except SelectorError as err:
                problems.append(str(err))
        preferred = aff.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        if preferred:
            try:
                PreferredSchedulingTerms.parse(
                    preferred, "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"
                )
            except SelectorError as err:
                problems.append(str(err))
        _raise(problems)
        return self


class DefaultPreemptionArgs(PluginArgs):
    """Args of DefaultPreemption: how many candidate nodes a dry run must find before it stops."""

    min_candidate_nodes_percentage: int = 10
    """Minimum candidates as a percentage of the potential nodes, 0..100."""
    min_candidate_nodes_absolute: int = 100
    """Minimum number of candidates, >= 0."""

    @model_validator(mode="after")
    def _validate(self) -> DefaultPreemptionArgs:
        problems: list[str] = []
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= pct <= 100:
            problems.append(f"minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]")
        if absolute < 0:
            problems.append(
                f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)"
            )
        if pct == 0 and absolute == 0:
            problems.append(
                "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"  # noqa: E501
            )
            problems.append(
                "minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"  # noqa: E501
            )
        _raise(problems)
        return self


class SchedulingHintArgs(PluginArgs):
    """Args of Koordinator's SchedulingHint."""

    max_hint_nodes: int = 100
    """The most preferred nodes taken from a hint; longer lists are truncated. Must be positive."""

    @model_validator(mode="after")
    def _validate(self) -> SchedulingHintArgs:
        if self.max_hint_nodes <= 0:
            _raise([f"maxHintNodes: Invalid value: {self.max_hint_nodes}: must be a positive value"])
        return self


ScoringStrategyType = Literal["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"]

__all__ = [
    "DefaultPreemptionArgs",
    "InterPodAffinityArgs",
    "NodeAffinityArgs",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "PodTopologySpreadArgs",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "SchedulingHintArgs",
    "ScoringStrategy",
    "UtilizationShapePoint",
]
