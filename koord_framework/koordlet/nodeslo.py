"""NodeSLO (``slo.koordinator.sh/v1alpha1``): the per-node QoS policy the SLO controller writes and the
koordlet obeys, with Koordinator's defaults and the koordlet's merge of a node's spec over them.

The koordlet never uses a received spec as is. Like ``states_nodeslo.go`` it overlays each section
(``resourceUsedThresholdWithBE``, ``resourceQOSStrategy``, ``cpuBurstStrategy``, ``systemStrategy``,
``extensions``) onto a fresh copy of the defaults the way Go's ``json.Unmarshal`` onto a filled struct does:
objects merge key by key, anything else replaces, and what Go would have omitted on marshal (null, empty
string/list/object) leaves the default standing. Then every QoS class whose ``cpuQOS``/``resctrlQOS``/
``memoryQOS`` is switched off gets that section's "none" values, so a disabled feature writes neutral values.

The sections the QoS strategies read are typed models (``ResourceThresholdStrategy``, ``CPUBurstStrategy``,
``HostApplicationSpec``); the rest stays a merged dict until a plugin that reads it types it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from pydantic.alias_generators import to_camel

from koord_framework.attribute_docs import install as _install_attribute_docs
from koord_framework.errors import Problem, ValidationError

_install_attribute_docs()  # before the first model: class creation reads attribute docstrings

__all__ = [
    "CPUBurstPolicy",
    "CPUBurstStrategy",
    "HostApplicationSpec",
    "NodeSLO",
    "NodeSLOSpec",
    "ResourceThresholdStrategy",
    "default_node_slo_spec",
    "is_feature_disabled",
    "merge_node_slo_spec",
]


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )


class CPUSuppressPolicy(StrEnum):
    CPUSET = "cpuset"
    CFS_QUOTA = "cfsQuota"


class CPUEvictPolicy(StrEnum):
    EVICT_BY_REAL_LIMIT = "evictByRealLimit"
    EVICT_BY_ALLOCATABLE = "evictByAllocatable"


class ResourceThresholdStrategy(_Model):
    """``spec.resourceUsedThresholdWithBE``: when to suppress and evict best-effort work."""

    enable: bool | None = None
    """Master switch of BE suppression and eviction on this node (default false)."""
    cpu_suppress_threshold_percent: int | None = Field(default=None, ge=0, le=100)
    """Node CPU share (percent of capacity) non-BE work plus BE work may use; default 65."""
    cpu_suppress_min_percent: int | None = Field(default=None, ge=0, le=100)
    """Floor of the BE share, percent of capacity; unset = no floor."""
    cpu_suppress_policy: CPUSuppressPolicy | None = None
    """``cpuset`` (default) or ``cfsQuota``."""
    memory_evict_threshold_percent: int | None = Field(default=None, ge=0, le=100)
    """Node memory usage percent that triggers BE memory eviction; default 70."""
    memory_evict_lower_percent: int | None = Field(default=None, ge=0, le=100)
    """Evict down to this usage percent; default threshold - 2."""
    memory_allocatable_evict_threshold_percent: int | None = Field(default=None, ge=0)
    memory_allocatable_evict_lower_percent: int | None = Field(default=None, ge=0)
    cpu_evict_be_satisfaction_upper_percent: int | None = Field(
        default=None, ge=0, le=100, alias="cpuEvictBESatisfactionUpperPercent"
    )
    """BE CPU satisfaction (limit/request) to restore by evicting, percent."""
    cpu_evict_be_satisfaction_lower_percent: int | None = Field(
        default=None, ge=0, le=100, alias="cpuEvictBESatisfactionLowerPercent"
    )
    """BE CPU satisfaction below which eviction starts, percent."""
    cpu_evict_be_usage_threshold_percent: int | None = Field(
        default=None, ge=0, le=100, alias="cpuEvictBEUsageThresholdPercent"
    )
    """BE usage/limit percent above which BE counts as starved; default 90."""
    cpu_evict_time_window_seconds: int | None = Field(default=None, gt=0)
    cpu_evict_threshold_percent: int | None = Field(default=None, ge=0, le=100)
    cpu_evict_lower_percent: int | None = Field(default=None, ge=0, le=100)
    cpu_allocatable_evict_threshold_percent: int | None = Field(default=None, ge=0)
    cpu_allocatable_evict_lower_percent: int | None = Field(default=None, ge=0)
    cpu_evict_policy: CPUEvictPolicy | None = None
    """``evictByRealLimit`` (default) or ``evictByAllocatable``."""
    evict_enabled_priority_threshold: int | None = None
    allocatable_evict_priority_threshold: int | None = Field(default=None, ge=0, le=7999)


class CPUBurstPolicy(StrEnum):
    NONE = "none"
    CPU_BURST_ONLY = "cpuBurstOnly"
    CFS_QUOTA_BURST_ONLY = "cfsQuotaBurstOnly"
    AUTO = "auto"


class CPUBurstConfig(_Model):
    """A pod's burst configuration (the ``koordinator.sh/cpuBurst`` annotation has this shape too)."""

    policy: CPUBurstPolicy | None = None
    cpu_burst_percent: int | None = Field(default=None, ge=1, le=10000)
    """``cpu.cfs_burst_us`` as percent of the container's CPU limit; default 1000."""
    cfs_quota_burst_percent: int | None = Field(default=None, ge=100)
    """Ceiling of the scaled cfs quota as percent of the limit-derived quota; default 300."""
    cfs_quota_burst_period_seconds: int | None = Field(default=None, ge=-1)
    """Token-bucket period limiting continuous bursting; -1 (default) = unlimited."""


class CPUBurstStrategy(CPUBurstConfig):
    """``spec.cpuBurstStrategy``."""

    share_pool_threshold_percent: int | None = Field(default=None, ge=0, le=100)
    """Share-pool usage percent above which bursting is scaled back; default 50."""


class CgroupPath(_Model):
    base: str = ""
    parent_dir: str = ""
    relative_path: str = ""


class HostApplicationSpec(_Model):
    """A non-pod workload on the node the koordlet accounts for (``spec.hostApplications[]``)."""

    name: str
    priority: str = ""
    qos: str = Field(default="", alias="qos")
    cgroup_path: CgroupPath | None = None


class NodeSLOSpec(_Model):
    resource_used_threshold_with_be: ResourceThresholdStrategy | None = Field(
        default=None, alias="resourceUsedThresholdWithBE"
    )
    resource_qos_strategy: dict[str, Any] | None = Field(default=None, alias="resourceQOSStrategy")
    cpu_burst_strategy: CPUBurstStrategy | None = None
    system_strategy: dict[str, Any] | None = None
    extensions: dict[str, Any] | None = None
    host_applications: list[HostApplicationSpec] = Field(default_factory=list)


# --- defaults (pkg/util/sloconfig/nodeslo_config.go) ---------------------------------------------------


def _cpu_qos(gi: int, expeller: bool) -> dict[str, Any]:
    return {"groupIdentity": gi, "schedIdle": 0, "coreExpeller": expeller}


def _resctrl(start: int, end: int) -> dict[str, Any]:
    return {"catRangeStartPercent": start, "catRangeEndPercent": end, "mbaPercent": 100}


def _memory(wmark_ratio: int, scale_permill: int, min_adj: int) -> dict[str, Any]:
    return {
        "minLimitPercent": 0,
        "lowLimitPercent": 0,
        "throttlingPercent": 0,
        "wmarkRatio": wmark_ratio,
        "wmarkScalePermill": scale_permill,
        "wmarkMinAdj": min_adj,
        "priorityEnable": 0,
        "priority": 0,
        "oomKillGroup": 0,
    }


_NONE_NETWORK: Final = {"ingressRequest": 0, "ingressLimit": 0, "egressRequest": 0, "egressLimit": 0}


def _class(cpu: dict[str, Any], resctrl: dict[str, Any], memory: dict[str, Any]) -> dict[str, Any]:
    return {
        "cpuQOS": {"enable": False, **cpu},
        "resctrlQOS": {"enable": False, **resctrl},
        "memoryQOS": {"enable": False, **memory},
        "blkioQOS": {"enable": False},
        "networkQOS": {"enable": False, **_NONE_NETWORK},
    }


NONE_CPU_QOS: Final = _cpu_qos(0, False)
NONE_RESCTRL_QOS: Final = _resctrl(0, 100)
NONE_MEMORY_QOS: Final = _memory(0, 50, 0)


def default_node_slo_spec(extensions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``DefaultNodeSLOSpecConfig()`` as a manifest-shaped dict (a fresh copy every call)."""
    return {
        "resourceUsedThresholdWithBE": {
            "enable": False,
            "cpuSuppressThresholdPercent": 65,
            "cpuSuppressPolicy": "cpuset",
            "memoryEvictThresholdPercent": 70,
            "cpuEvictPolicy": "evictByRealLimit",
        },
        "resourceQOSStrategy": {
            "policies": {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"},
            "lsrClass": _class(_cpu_qos(2, True), _resctrl(0, 100), _memory(95, 20, -25)),
            "lsClass": _class(_cpu_qos(2, True), _resctrl(0, 100), _memory(95, 20, -25)),
            "beClass": _class(_cpu_qos(-1, False), _resctrl(0, 30), _memory(95, 20, 50)),
            "systemClass": _class(_cpu_qos(0, False), _resctrl(0, 100), _memory(0, 50, 0)),
            "cgroupRoot": {"blkioQOS": {"enable": False}},
        },
        "cpuBurstStrategy": {
            "policy": "none",
            "cpuBurstPercent": 1000,
            "cfsQuotaBurstPercent": 300,
            "cfsQuotaBurstPeriodSeconds": -1,
            "sharePoolThresholdPercent": 50,
        },
        "systemStrategy": {"totalNetworkBandwidth": "0"},
        "extensions": copy.deepcopy(dict(extensions or {})),
    }


def _omitted(value: Any) -> bool:
    """What Go's ``json.Marshal`` of a typed spec leaves out (omitempty): null and empty values."""
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def _overlay(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if _omitted(value):
            continue
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            _overlay(current, value)
        else:
            base[key] = copy.deepcopy(value)
    return base


_SECTIONS: Final = (
    "resourceUsedThresholdWithBE",
    "resourceQOSStrategy",
    "cpuBurstStrategy",
    "systemStrategy",
)


def merge_node_slo_spec(
    spec: Mapping[str, Any] | None, *, default_extensions: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The spec the koordlet acts on: each section of ``spec`` overlaid on the defaults, "none" values for
    switched-off QoS classes, extensions merged only for keys that have registered defaults (as upstream),
    and ``hostApplications`` taken as given."""
    given = dict(spec or {})
    defaults = default_node_slo_spec(default_extensions)
    merged: dict[str, Any] = {k: copy.deepcopy(v) for k, v in given.items()}
    for section in _SECTIONS:
        patch = given.get(section)
        merged[section] = _overlay(defaults[section], patch if isinstance(patch, Mapping) else {})
    _none_if_disabled(merged["resourceQOSStrategy"])
    ext = defaults["extensions"]
    given_ext = given.get("extensions")
    if isinstance(given_ext, Mapping):
        for key in list(ext):
            if key in given_ext and isinstance(ext[key], dict) and isinstance(given_ext[key], Mapping):
                _overlay(ext[key], given_ext[key])
            elif key in given_ext and not _omitted(given_ext[key]):
                ext[key] = copy.deepcopy(given_ext[key])
    merged["extensions"] = ext
    return merged


def _none_if_disabled(strategy: dict[str, Any]) -> None:
    for klass in ("lsrClass", "lsClass", "beClass"):
        cfg = strategy.get(klass)
        if not isinstance(cfg, dict):
            continue
        for section, none in (
            ("cpuQOS", NONE_CPU_QOS),
            ("resctrlQOS", NONE_RESCTRL_QOS),
            ("memoryQOS", NONE_MEMORY_QOS),
        ):
            sub = cfg.get(section)
            if isinstance(sub, dict) and sub.get("enable") is False:
                sub.update(copy.deepcopy(none))


def _validation_error(source: str, err: PydanticValidationError) -> ValidationError:
    problems = [Problem(".".join(str(p) for p in e["loc"]), e["msg"]) for e in err.errors(include_url=False)]
    return ValidationError(source, problems)


class NodeSLO:
    """A node's NodeSLO as the koordlet uses it: the merged spec, typed where strategies read it."""

    __slots__ = ("merged", "name", "raw", "spec")

    def __init__(
        self, name: str, spec: NodeSLOSpec, merged: dict[str, Any], raw: Mapping[str, Any] | None
    ) -> None:
        self.name = name
        self.spec = spec
        self.merged = merged
        self.raw = raw

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any] | None, *, name: str = "", source: str = "NodeSLO") -> NodeSLO:
        merged = merge_node_slo_spec(spec)
        try:
            typed = NodeSLOSpec.model_validate(merged)
        except PydanticValidationError as err:
            raise _validation_error(f"{source} {name}".strip() + " spec", err) from None
        return cls(name, typed, merged, spec)

    @classmethod
    def from_manifest(cls, obj: Mapping[str, Any]) -> NodeSLO:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        spec = obj.get("spec")
        if spec is not None and not isinstance(spec, Mapping):
            raise ValidationError(f"NodeSLO {name}", [Problem("spec", "must be an object")])
        return cls.from_spec(spec, name=name)

    @classmethod
    def default(cls, name: str = "") -> NodeSLO:
        return cls.from_spec(None, name=name)

    @property
    def threshold(self) -> ResourceThresholdStrategy:
        """``resourceUsedThresholdWithBE`` after merging (never None)."""
        t = self.spec.resource_used_threshold_with_be
        assert t is not None  # the merge always fills it
        return t

    @property
    def cpu_burst(self) -> CPUBurstStrategy:
        b = self.spec.cpu_burst_strategy
        assert b is not None
        return b

    @property
    def host_applications(self) -> list[HostApplicationSpec]:
        return self.spec.host_applications


ThresholdFeature = Literal[
    "BECPUSuppress",
    "BEMemoryEvict",
    "BECPUEvict",
    "CPUEvict",
    "MemoryEvict",
    "CPUAllocatableEvict",
    "MemoryAllocatableEvict",
]
_THRESHOLD_FEATURES: Final = frozenset(ThresholdFeature.__args__)  # type: ignore[attr-defined]


def is_feature_disabled(node_slo: NodeSLO | None, feature: str) -> bool:
    """``features.IsFeatureDisabled``: suppress/evict features follow ``resourceUsedThresholdWithBE.enable``;
    without a NodeSLO everything is disabled. Unknown features are disabled."""
    if node_slo is None or feature not in _THRESHOLD_FEATURES:
        return True
    return not bool(node_slo.threshold.enable)
