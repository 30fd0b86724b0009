"""Kubernetes QoS and Koordinator QoS/priority classes of a pod, derived exactly as upstream does.

Koordinator's co-location model rests on two labels and two fall-backs (``apis/extension`` in
koordinator-sh/koordinator): a pod's *QoS class* (LSE/LSR/LS/BE/SYSTEM) comes from the
``koordinator.sh/qosClass`` label, else from its Kubernetes QoS (Guaranteed -> LSR, Burstable -> LS,
BestEffort -> BE); its *priority class* (koord-prod/mid/batch/free) comes from the
``koordinator.sh/priority-class`` label, else from the ``spec.priority`` band, else from the QoS class.
Which resources a pod consumes (``cpu`` or ``kubernetes.io/batch-cpu``…) follows from the priority class,
so every plugin must agree on these derivations; they live here once.

All functions take the pod as its manifest dict (camelCase, as in YAML or ``kubectl get -o json``) and
tolerate missing or ``null`` sections.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, cast

from koord_framework.api.constants import LABEL_PRIORITY_CLASS, LABEL_QOS_CLASS
from koord_framework.api.quantity import Quantity
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, MID_CPU, MID_MEMORY

__all__ = [
    "PRIORITY_BATCH_RANGE",
    "PRIORITY_FREE_RANGE",
    "PRIORITY_MID_RANGE",
    "PRIORITY_PROD_RANGE",
    "KubeQoS",
    "PriorityClass",
    "QoSClass",
    "compute_kube_qos",
    "default_priority_value",
    "kube_qos",
    "kube_qos_by_cgroup_parent",
    "priority_class_of_value",
    "priority_class_raw",
    "priority_class_with_default",
    "priority_value_with_default",
    "qos_class_by_name",
    "qos_class_raw",
    "qos_class_with_default",
    "translate_resource",
]


class KubeQoS(StrEnum):
    """Kubernetes ``PodQOSClass``."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class QoSClass(StrEnum):
    """Koordinator ``QoSClass``; ``NONE`` means the pod does not name one."""

    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    SYSTEM = "SYSTEM"
    NONE = ""


class PriorityClass(StrEnum):
    """Koordinator ``PriorityClass``; ``NONE`` means outside every Koordinator band."""

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""


# Inclusive priority bands (apis/extension/priority.go).
PRIORITY_PROD_RANGE: Final = (9000, 9999)
PRIORITY_MID_RANGE: Final = (7000, 7999)
PRIORITY_BATCH_RANGE: Final = (5000, 5999)
PRIORITY_FREE_RANGE: Final = (3000, 3999)

_BANDS: Final = (
    (PRIORITY_PROD_RANGE, PriorityClass.PROD),
    (PRIORITY_MID_RANGE, PriorityClass.MID),
    (PRIORITY_BATCH_RANGE, PriorityClass.BATCH),
    (PRIORITY_FREE_RANGE, PriorityClass.FREE),
)

# Default priority values per class (apis/extension/priority_utils.go).
_DEFAULT_PRIORITY_VALUE: Final[dict[PriorityClass, int]] = {
    PriorityClass.PROD: 9500,
    PriorityClass.MID: 7500,
    PriorityClass.BATCH: 5500,
    PriorityClass.FREE: 3500,
    PriorityClass.NONE: 0,
}

_QOS_BY_NAME: Final[dict[str, QoSClass]] = {q.value: q for q in QoSClass if q is not QoSClass.NONE}
_PRIORITY_BY_NAME: Final[dict[str, PriorityClass]] = {
    p.value: p for p in PriorityClass if p is not PriorityClass.NONE
}
_KUBE_QOS_BY_NAME: Final[dict[str, KubeQoS]] = {q.value: q for q in KubeQoS}

# A Guaranteed pod without a koordinator QoS label counts as LSR (QoSClassForGuaranteed).
_QOS_FOR_KUBE_QOS: Final[dict[KubeQoS, QoSClass]] = {
    KubeQoS.GUARANTEED: QoSClass.LSR,
    KubeQoS.BURSTABLE: QoSClass.LS,
    KubeQoS.BEST_EFFORT: QoSClass.BE,
}

_RESOURCE_BY_PRIORITY: Final[dict[PriorityClass, dict[str, str]]] = {
    PriorityClass.BATCH: {CPU: BATCH_CPU, MEMORY: BATCH_MEMORY},
    PriorityClass.MID: {CPU: MID_CPU, MEMORY: MID_MEMORY},
}

_QOS_COMPUTE_RESOURCES: Final = (CPU, MEMORY)
"""Only cpu and memory decide the Kubernetes QoS class (supportedQoSComputeResources)."""


_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def _section(obj: Any, key: str) -> Mapping[str, Any]:
    """``obj[key]`` as a mapping, or an empty one when missing, null or not a mapping."""
    # Manifests are plain dicts: testing for dict first skips the slow ABC isinstance on the hot path.
    if obj.__class__ is not dict and (obj is None or not isinstance(obj, Mapping)):
        return _EMPTY
    value = obj.get(key)
    if value.__class__ is dict or (value is not None and isinstance(value, Mapping)):
        return cast("Mapping[str, Any]", value)
    return _EMPTY


def _labels(pod: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _section(_section(pod, "metadata"), "labels")


def _priority(pod: Mapping[str, Any] | None) -> int | None:
    value = _section(pod, "spec").get("priority")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"spec.priority must be an integer, got {value!r}")
    return value


# --- Kubernetes QoS --------------------------------------------------------------------------------


def kube_qos(pod: Mapping[str, Any] | None) -> KubeQoS:
    """The pod's Kubernetes QoS class: ``status.qosClass`` when the kubelet/API server already set a known
    one, else computed from the containers (Koordinator's ``GetKubeQosClass``)."""
    recorded = _section(pod, "status").get("qosClass")
    if isinstance(recorded, str) and recorded in _KUBE_QOS_BY_NAME:
        return _KUBE_QOS_BY_NAME[recorded]
    return compute_kube_qos(pod)


def compute_kube_qos(pod: Mapping[str, Any] | None) -> KubeQoS:
    """Kubernetes' ``GetPodQOS`` over containers and init containers, counting only cpu and memory.

    * BestEffort: no container has a non-zero cpu/memory request or limit.
    * Guaranteed: every container has non-zero cpu *and* memory limits, and per resource the summed
      requests equal the summed limits.
    * Burstable: anything else.

    A manifest that never went through the API server lacks its defaulting, under which a container's
    missing request takes the value of its limit (``SetDefaults_Pod``); that default is applied here so a
    limits-only pod is Guaranteed exactly as it would be in a cluster. Zero quantities count as absent.
    Invalid quantities raise :class:`~koord_framework.api.quantity.QuantityError`.
    """
    spec = _section(pod, "spec")
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    for container in containers:
        resources = _section(container, "resources")
        container_limits = _nano_values(_section(resources, "limits"))
        container_requests = _nano_values(_section(resources, "requests"))
        for name, value in container_limits.items():
            container_requests.setdefault(name, value)
        for name, value in container_requests.items():
            if value > 0:
                requests[name] = requests.get(name, 0) + value
        limits_found = set()
        for name, value in container_limits.items():
            if value > 0:
                limits_found.add(name)
                limits[name] = limits.get(name, 0) + value
        if not limits_found.issuperset(_QOS_COMPUTE_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return KubeQoS.BEST_EFFORT
    if guaranteed and requests.keys() == limits.keys() and all(limits[n] == v for n, v in requests.items()):
        return KubeQoS.GUARANTEED
    return KubeQoS.BURSTABLE


def _nano_values(resource_list: Mapping[str, Any]) -> dict[str, int]:
    """Exact cpu/memory values (nano-units) of one ResourceList; null counts as zero like JSON null."""
    out: dict[str, int] = {}
    for name in _QOS_COMPUTE_RESOURCES:
        if name in resource_list:
            raw = resource_list[name]
            out[name] = 0 if raw is None else Quantity.parse(raw).nano_value()
    return out


def kube_qos_by_cgroup_parent(cgroup_dir: str) -> KubeQoS:
    """The Kubernetes QoS a pod cgroup directory belongs to, from the kubelet's naming
    (``kubepods-besteffort.slice/…``, ``kubepods/burstable/…``; Guaranteed pods sit directly under
    ``kubepods``). Koordlet's ``GetKubeQoSByCgroupParent``."""
    if "besteffort" in cgroup_dir:
        return KubeQoS.BEST_EFFORT
    if "burstable" in cgroup_dir:
        return KubeQoS.BURSTABLE
    return KubeQoS.GUARANTEED


# --- Koordinator QoS ---------------------------------------------------------------------------------


def qos_class_by_name(name: object) -> QoSClass:
    """The QoS class a label value names, ``NONE`` for anything unknown (``GetPodQoSClassByName``)."""
    if isinstance(name, str):
        return _QOS_BY_NAME.get(name, QoSClass.NONE)
    return QoSClass.NONE


def qos_class_raw(labels: Mapping[str, Any] | None) -> QoSClass:
    """The QoS class named by the ``koordinator.sh/qosClass`` label, ``NONE`` when absent or unknown."""
    if not labels or LABEL_QOS_CLASS not in labels:
        return QoSClass.NONE
    return qos_class_by_name(labels[LABEL_QOS_CLASS])


def qos_class_with_default(pod: Mapping[str, Any] | None) -> QoSClass:
    """The label's QoS class, else the one implied by the Kubernetes QoS (``GetPodQoSClassWithDefault``)."""
    raw = qos_class_raw(_labels(pod))
    if raw is not QoSClass.NONE:
        return raw
    return _QOS_FOR_KUBE_QOS[kube_qos(pod)]


# --- Koordinator priority ----------------------------------------------------------------------------


def priority_class_of_value(priority: int | None) -> PriorityClass:
    """The Koordinator band a ``spec.priority`` value falls in; ``NONE`` outside every band or for None
    (e.g. ``system-cluster-critical``'s 2000000000 is not a Koordinator priority)."""
    if priority is None:
        return PriorityClass.NONE
    for (low, high), klass in _BANDS:
        if low <= priority <= high:
            return klass
    return PriorityClass.NONE


def priority_class_raw(pod: Mapping[str, Any] | None) -> PriorityClass:
    """``GetPodPriorityClassRaw``: the ``koordinator.sh/priority-class`` label when present (an unknown
    value gives ``NONE`` and does *not* fall through), else the band of ``spec.priority``."""
    labels = _labels(pod)
    if LABEL_PRIORITY_CLASS in labels:
        name = labels[LABEL_PRIORITY_CLASS]
        return (
            _PRIORITY_BY_NAME.get(name, PriorityClass.NONE) if isinstance(name, str) else PriorityClass.NONE
        )
    return priority_class_of_value(_priority(pod))


def priority_class_with_default(pod: Mapping[str, Any] | None) -> PriorityClass:
    """``GetPodPriorityClassWithDefault``: the raw class, else derived from the QoS class
    (SYSTEM/LSE/LSR/LS -> prod, BE -> batch)."""
    raw = priority_class_raw(pod)
    if raw is not PriorityClass.NONE:
        return raw
    return _priority_class_for_qos(qos_class_with_default(pod))


def _priority_class_for_qos(qos: QoSClass) -> PriorityClass:
    if qos in (QoSClass.SYSTEM, QoSClass.LSE, QoSClass.LSR, QoSClass.LS):
        return PriorityClass.PROD
    if qos is QoSClass.BE:
        return PriorityClass.BATCH
    return PriorityClass.NONE


def classes_of(
    labels: Mapping[str, Any], priority: int | None, kube: KubeQoS
) -> tuple[QoSClass, PriorityClass]:
    """(QoS class with default, priority class with default) from already-derived inputs.

    The same answers as ``qos_class_with_default`` and ``priority_class_with_default``, for record builders
    that have computed the Kubernetes QoS once and must not derive it again per question.
    """
    qos = qos_class_raw(labels)
    if qos is QoSClass.NONE:
        qos = _QOS_FOR_KUBE_QOS[kube]
    if LABEL_PRIORITY_CLASS in labels:
        name = labels[LABEL_PRIORITY_CLASS]
        raw = _PRIORITY_BY_NAME.get(name, PriorityClass.NONE) if isinstance(name, str) else PriorityClass.NONE
    else:
        raw = priority_class_of_value(priority)
    return qos, (raw if raw is not PriorityClass.NONE else _priority_class_for_qos(qos))


def default_priority_value(priority_class: PriorityClass) -> int:
    """The value a pod of this class is treated as having when it sets none (9500/7500/5500/3500/0)."""
    return _DEFAULT_PRIORITY_VALUE[priority_class]


def priority_value_with_default(pod: Mapping[str, Any] | None) -> int:
    """``GetPodPriorityValueWithDefault``: a non-zero ``spec.priority`` as is, else the default value of
    the pod's priority class, so unprioritised pods still order prod > mid > batch > free."""
    if pod is None:
        return _DEFAULT_PRIORITY_VALUE[PriorityClass.NONE]
    priority = _priority(pod)
    if priority is not None and priority != 0:
        return priority
    return _DEFAULT_PRIORITY_VALUE[priority_class_with_default(pod)]


def translate_resource(name: str, priority_class: PriorityClass) -> str:
    """``TranslateResourceNameByPriorityClass``: the resource a pod of this class really consumes.

    Prod and unclassified pods keep the name; batch and mid pods consume ``kubernetes.io/batch-*`` /
    ``kubernetes.io/mid-*`` for cpu and memory and have no mapping (``""``) for anything else; free has
    no mapping at all.
    """
    if priority_class in (PriorityClass.PROD, PriorityClass.NONE):
        return name
    return _RESOURCE_BY_PRIORITY.get(priority_class, {}).get(name, "")
