"""Feature gates of every component: Koordinator's names, defaults and maturity (``pkg/features`` at
a7a1b76b), parsed from ``--feature-gates`` as ``k8s.io/component-base/featuregate`` does.

    --feature-gates=CPUBurst=false,AllAlpha=true

``AllAlpha=true`` / ``AllBeta=true`` turn on every alpha / beta gate not named explicitly (``=false`` turns
them off); an unknown gate or a value that is not a boolean is an error naming it. Koordinator registers
koord-manager's and koord-descheduler's gates in one gate set (the webhook, quota, descheduler and
transformer gates), koord-scheduler's in Kubernetes' own set (its gates and the transformer gates; the
Kubernetes ones are not repeated here) and the koordlet's in its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from koord_framework.errors import KoordError

__all__ = [
    "COMPONENT_GATES",
    "KOORDLET_PLUGIN_GATES",
    "FeatureGateError",
    "FeatureGates",
    "FeatureSpec",
    "gates_for",
]

PreRelease = Literal["Alpha", "Beta", "GA", "Deprecated"]


class FeatureGateError(KoordError):
    """A ``--feature-gates`` value that cannot be used; the message names the gate."""


@dataclass(frozen=True)
class FeatureSpec:
    """One gate: its name, default and maturity."""

    name: str
    default: bool
    pre_release: PreRelease


MANAGER_GATES: Final[tuple[FeatureSpec, ...]] = (
    FeatureSpec("PodMutatingWebhook", True, "Beta"),
    FeatureSpec("PodValidatingWebhook", True, "Beta"),
    FeatureSpec("ElasticMutatingWebhook", True, "Beta"),
    FeatureSpec("ElasticValidatingWebhook", True, "Beta"),
    FeatureSpec("NodeMutatingWebhook", False, "Alpha"),
    FeatureSpec("NodeValidatingWebhook", False, "Alpha"),
    FeatureSpec("ConfigMapValidatingWebhook", False, "Alpha"),
    FeatureSpec("ReservationMutatingWebhook", False, "Alpha"),
    FeatureSpec("WebhookFramework", True, "Beta"),
    FeatureSpec("ColocationProfileSkipMutatingResources", False, "Alpha"),
    FeatureSpec("ColocationProfileSkipValidatingPriority", False, "Alpha"),
    FeatureSpec("MultiQuotaTree", False, "Alpha"),
    FeatureSpec("ElasticQuotaIgnorePodOverhead", False, "Alpha"),
    FeatureSpec("ElasticQuotaGuaranteeUsage", False, "Alpha"),
    FeatureSpec("ElasticQuotaEnableUpdateResourceKey", False, "Alpha"),
    FeatureSpec("ElasticQuotaEvaluationTransformPod", False, "Alpha"),
    FeatureSpec("DisableDefaultQuota", False, "Alpha"),
    FeatureSpec("SupportParentQuotaSubmitPod", False, "Alpha"),
    FeatureSpec("EnableQuotaAdmission", False, "Alpha"),
    FeatureSpec("EnableQuotaAdmissionOnUpdate", False, "Alpha"),
    FeatureSpec("EnableSyncGPUSharedResource", False, "Alpha"),
    FeatureSpec("ColocationProfileController", False, "Alpha"),
    FeatureSpec("ValidatePodDeviceResource", False, "Alpha"),
    FeatureSpec("EnablePodEnhancedValidator", False, "Alpha"),
    FeatureSpec("DisableExtendedResourceSpec", False, "Alpha"),
    FeatureSpec("DisableDeviceResourceSpec", False, "Alpha"),
    FeatureSpec("BindingAdmissionWebhook", False, "Alpha"),
)

DESCHEDULER_GATES: Final[tuple[FeatureSpec, ...]] = (FeatureSpec("DisablePVCReservation", False, "Beta"),)

TRANSFORMER_GATES: Final[tuple[FeatureSpec, ...]] = (
    FeatureSpec("PriorityTransformer", False, "Alpha"),
    FeatureSpec("PreemptionPolicyTransformer", False, "Alpha"),
    FeatureSpec("ReplaceResourcesTransformer", False, "Alpha"),
)

SCHEDULER_GATES: Final[tuple[FeatureSpec, ...]] = (
    FeatureSpec("CompatibleCSIStorageCapacity", False, "Alpha"),
    FeatureSpec("DisableCSIStorageCapacityInformer", False, "Alpha"),
    FeatureSpec("CompatiblePodDisruptionBudget", False, "Alpha"),
    FeatureSpec("DisablePodDisruptionBudgetInformer", False, "Alpha"),
    FeatureSpec("DisableDynamicResourceAllocationInformer", False, "Alpha"),
    FeatureSpec("ResizePod", False, "Alpha"),
    FeatureSpec("MultiQuotaTree", False, "Alpha"),
    FeatureSpec("ElasticQuotaIgnorePodOverhead", False, "Alpha"),
    FeatureSpec("ElasticQuotaIgnoreTerminatingPod", False, "Alpha"),
    FeatureSpec("ElasticQuotaImmediateIgnoreTerminatingPod", False, "Alpha"),
    FeatureSpec("ElasticQuotaGuaranteeUsage", False, "Alpha"),
    FeatureSpec("DisableDefaultQuota", False, "Alpha"),
    FeatureSpec("SupportParentQuotaSubmitPod", False, "Alpha"),
    FeatureSpec("LazyReservationRestore", False, "Alpha"),
    FeatureSpec("OmitNodeLabelsForReservation", False, "Alpha"),
    FeatureSpec("SkipReservationFitsNode", False, "Alpha"),
    FeatureSpec("DevicePluginAdaption", False, "Alpha"),
    FeatureSpec("CleanExpiredReservationAllocated", False, "Alpha"),
    FeatureSpec("SkipFilterWithNominatedPods", False, "Alpha"),
    FeatureSpec("DynamicSchedulerCheck", True, "Alpha"),
    FeatureSpec("CSIStorageCapacity", True, "GA"),
    FeatureSpec("GenericEphemeralVolume", True, "GA"),
    FeatureSpec("PodDisruptionBudget", True, "GA"),
    FeatureSpec("SyncBarrier", False, "Alpha"),
    FeatureSpec("CrossSchedulerNomination", False, "Alpha"),
    FeatureSpec("GangPendingPodsConditionPatch", True, "Beta"),
    FeatureSpec("EnableInlineBatchSchedule", False, "Alpha"),
    FeatureSpec("EnableBatchScheduleNodeSnapshot", True, "Beta"),
)

KOORDLET_GATES: Final[tuple[FeatureSpec, ...]] = (
    FeatureSpec("AuditEvents", False, "Alpha"),
    FeatureSpec("AuditEventsHTTPHandler", False, "Alpha"),
    FeatureSpec("BECPUSuppress", True, "Beta"),
    FeatureSpec("BECPUManager", False, "Alpha"),
    FeatureSpec("BECPUEvict", False, "Alpha"),
    FeatureSpec("CPUEvict", False, "Alpha"),
    FeatureSpec("CPUAllocatableEvict", False, "Alpha"),
    FeatureSpec("BEMemoryEvict", False, "Alpha"),
    FeatureSpec("MemoryEvict", False, "Alpha"),
    FeatureSpec("MemoryAllocatableEvict", False, "Alpha"),
    FeatureSpec("CPUBurst", True, "Beta"),
    FeatureSpec("SystemConfig", False, "Alpha"),
    FeatureSpec("RdtResctrl", True, "Beta"),
    FeatureSpec("ResctrlCollector", False, "Alpha"),
    FeatureSpec("CgroupReconcile", False, "Alpha"),
    FeatureSpec("NodeTopologyReport", True, "Beta"),
    FeatureSpec("Accelerators", False, "Alpha"),
    FeatureSpec("RDMADevices", False, "Alpha"),
    FeatureSpec("CPICollector", False, "Alpha"),
    FeatureSpec("Libpfm4", False, "Alpha"),
    FeatureSpec("PSICollector", False, "Alpha"),
    FeatureSpec("BlkIOReconcile", False, "Alpha"),
    FeatureSpec("ColdPageCollector", False, "Alpha"),
    FeatureSpec("HugePageReport", False, "Alpha"),
    FeatureSpec("PodResourcesProxy", False, "Alpha"),
    FeatureSpec("HamiCoreVGPUMonitor", False, "Alpha"),
    FeatureSpec("PerCPUMetric", False, "Alpha"),
    FeatureSpec("NodeMetricPromMetrics", False, "Alpha"),
    # The runtime hooks' gates (``runtimehooks/config.go``), registered in the same koordlet gate set.
    FeatureSpec("GroupIdentity", True, "Beta"),
    FeatureSpec("CPUSetAllocator", True, "Beta"),
    FeatureSpec("GPUEnvInject", False, "Alpha"),
    FeatureSpec("RDMADeviceInject", False, "Alpha"),
    FeatureSpec("BatchResource", True, "Beta"),
    FeatureSpec("CPUNormalization", False, "Alpha"),
    FeatureSpec("CoreSched", False, "Alpha"),
    FeatureSpec("TerwayQoS", False, "Alpha"),
    FeatureSpec("TCNetworkQoS", False, "Alpha"),
    FeatureSpec("Resctrl", False, "Alpha"),
    FeatureSpec("OOMScoreAdj", False, "Alpha"),
)

KOORDLET_PLUGIN_GATES: Final[Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    "qos": {
        "BECPUSuppress": ("BECPUSuppress",),
        "CPUBurst": ("CPUBurst",),
        "BECPUEvict": ("BECPUEvict", "CPUAllocatableEvict", "CPUEvict"),
        "BEMemoryEvict": ("BEMemoryEvict", "MemoryAllocatableEvict", "MemoryEvict"),
        "Resctrl": ("RdtResctrl",),
    },
    "runtimehooks": {
        name: (name,)
        for name in ("GroupIdentity", "CPUSetAllocator", "GPUEnvInject", "BatchResource", "CPUNormalization")
    },
}
"""Which koordlet gates switch which plugin, by registry group and plugin name: a plugin runs when one of
its gates is on (the QoS strategies' ``Enabled()``, ``registerPlugins`` of the runtime hooks); an eviction
strategy's triggers are its gates, each run only while on."""


COMPONENT_GATES: Final[Mapping[str, tuple[FeatureSpec, ...]]] = {
    "manager": MANAGER_GATES + DESCHEDULER_GATES + TRANSFORMER_GATES,
    "descheduler": MANAGER_GATES + DESCHEDULER_GATES + TRANSFORMER_GATES,
    "scheduler": SCHEDULER_GATES + TRANSFORMER_GATES,
    "koordlet": KOORDLET_GATES,
}
"""The gates each command accepts (Koordinator's gate set of that binary)."""

_ALL: Final = {"AllAlpha": "Alpha", "AllBeta": "Beta"}


@dataclass
class FeatureGates:
    """A component's gates and their values after ``parse``."""

    component: str
    specs: Mapping[str, FeatureSpec]
    values: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, component: str, specs: Iterable[FeatureSpec]) -> FeatureGates:
        by_name: dict[str, FeatureSpec] = {}
        for spec in specs:
            by_name.setdefault(spec.name, spec)
        return cls(component, by_name, {n: s.default for n, s in by_name.items()})

    def parse(self, text: str) -> FeatureGates:
        """Apply ``A=true,B=false,...``; raises ``FeatureGateError`` naming the gate on bad input."""
        explicit: dict[str, bool] = {}
        for item in (p.strip() for p in (text or "").split(",")):
            if not item:
                continue
            name, sep, raw = item.partition("=")
            name = name.strip()
            if not sep:
                raise FeatureGateError(f"--feature-gates: missing bool value for {name}")
            value = _bool(name, raw.strip())
            if name not in self.specs and name not in _ALL:
                raise FeatureGateError(
                    f"--feature-gates: unrecognized feature gate: {name} (koord {self.component} knows: "
                    f"{', '.join(sorted(self.specs))})"
                )
            explicit[name] = value
        values = {n: s.default for n, s in self.specs.items()}
        for all_name, stage in _ALL.items():
            if all_name in explicit:
                for n, s in self.specs.items():
                    if s.pre_release == stage:
                        values[n] = explicit[all_name]
        values.update({n: v for n, v in explicit.items() if n not in _ALL})
        self.values = values
        return self

    def enabled(self, name: str) -> bool:
        if name not in self.specs:
            raise KeyError(f"feature gate {name!r} is not registered for koord {self.component}")
        return self.values[name]

    def plugin_gates(self, group: str, name: str) -> tuple[str, ...]:
        """The gates that switch plugin ``name`` of registry ``group`` (empty: not gated)."""
        table = KOORDLET_PLUGIN_GATES if self.component == "koordlet" else {}
        return table.get(group, {}).get(name, ())

    def plugin_enabled(self, group: str, name: str) -> bool:
        """Whether the gates let plugin ``name`` of ``group`` run: one of its gates is on, or it has none."""
        gates = self.plugin_gates(group, name)
        return not gates or any(self.values.get(g, False) for g in gates)

    def help(self) -> str:
        """The ``--help`` text: every gate with its maturity and default, as kube components list them."""
        lines = [
            "feature gates (--feature-gates=key1=true,key2=false,...):",
            "  AllAlpha=true|false (ALPHA - default=false)",
            "  AllBeta=true|false (BETA - default=false)",
        ]
        for name in sorted(self.specs):
            s = self.specs[name]
            lines.append(f"  {name}=true|false ({s.pre_release.upper()} - default={str(s.default).lower()})")
        return "\n".join(lines)


def _bool(name: str, raw: str) -> bool:
    # strconv.ParseBool's spellings
    if raw in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if raw in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise FeatureGateError(f"--feature-gates: invalid value of {name}={raw}, err: not a boolean")


def gates_for(component: str) -> FeatureGates:
    """A fresh gate set of ``component`` (``manager``, ``scheduler``, ``descheduler``, ``koordlet``)."""
    return FeatureGates.of(component, COMPONENT_GATES[component])
