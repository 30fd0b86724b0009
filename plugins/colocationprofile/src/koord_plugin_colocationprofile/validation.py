"""The pod rules of Koordinator's ``pod/validating/cluster_colocation_profile.go``, as messages.

On update: the QoS class, the priority class and (unless ``ColocationProfileSkipValidatingPriority``) the
``koordinator.sh/priority`` label are immutable. Always: a pod requesting batch resources must be
``koordinator.sh/qosClass=BE``; BE cannot go with priority class none or prod, LSR not with none, mid, batch
or free; an LSR or LSE pod must request a whole number of CPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koord_framework.api.constants import LABEL_PRIORITY, LABEL_QOS_CLASS
from koord_framework.api.qos import PriorityClass, QoSClass, priority_class_raw, qos_class_raw
from koord_framework.api.quantity import QuantityError, parse_quantity

__all__ = ["pod_request", "validate_pod"]

_REQUESTS = "pod.spec.containers[*].resources.requests"


def _labels(pod: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return ((pod or {}).get("metadata") or {}).get("labels") or {}


def _quantity(raw: Any, where: str) -> int:
    try:
        return parse_quantity(raw).milli_value()
    except QuantityError as exc:
        raise ValueError(f"{where}: {exc}") from None


def container_requests(spec: Mapping[str, Any], field: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(path, requests) of each container of ``spec[field]``; ``ValueError`` naming a malformed one."""
    containers = spec.get(field) or []
    if not isinstance(containers, list):
        raise ValueError(f"spec.{field}: must be a list")
    out = []
    for i, c in enumerate(containers):
        where = f"spec.{field}[{i}]"
        if not isinstance(c, Mapping):
            raise ValueError(f"{where}: must be an object")
        resources = c.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise ValueError(f"{where}.resources: must be an object")
        requests = resources.get("requests") or {}
        if not isinstance(requests, Mapping):
            raise ValueError(f"{where}.resources.requests: must be an object")
        out.append((f"{where}.resources.requests", requests))
    return out


def pod_request(pod: Mapping[str, Any]) -> dict[str, int]:
    """``util.GetPodRequest`` in milli units: the containers' requests summed, each resource raised to the
    largest init container's request, plus the overhead."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for where, requests in container_requests(spec, "containers"):
        for name, raw in requests.items():
            total[name] = total.get(name, 0) + _quantity(raw, f"{where}.{name}")
    for where, requests in container_requests(spec, "initContainers"):
        for name, raw in requests.items():
            total[name] = max(total.get(name, 0), _quantity(raw, f"{where}.{name}"))
    overhead = spec.get("overhead") or {}
    if not isinstance(overhead, Mapping):
        raise ValueError("spec.overhead: must be an object")
    for name, raw in overhead.items():
        total[name] = total.get(name, 0) + _quantity(raw, f"spec.overhead.{name}")
    return total


def _immutable(new: object, old: object, field: str) -> list[str]:
    if new == old:
        return []
    return [f"{field}: Invalid value: {_go_quote(new)}: field is immutable"]


def _go_quote(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _forbid(pod: Mapping[str, Any], qos: QoSClass, classes: tuple[PriorityClass, ...]) -> list[str]:
    if qos_class_raw(_labels(pod)) is not qos:
        return []
    pc = priority_class_raw(pod)
    if pc in classes:
        return [
            f"Pod: Forbidden: {LABEL_QOS_CLASS}={qos.value} and priorityClass={pc.value} "
            "cannot be used in combination"
        ]
    return []


def validate_pod(
    operation: str, pod: Mapping[str, Any], old: Mapping[str, Any] | None, *, skip_priority: bool = False
) -> list[str]:
    """Every rule ``pod`` breaks (empty: allowed)."""
    errs: list[str] = []
    if operation == "UPDATE" and old is not None:
        errs += _immutable(
            qos_class_raw(_labels(pod)).value, qos_class_raw(_labels(old)).value, f"labels.{LABEL_QOS_CLASS}"
        )
        errs += _immutable(priority_class_raw(pod).value, priority_class_raw(old).value, "spec.priority")
        if not skip_priority:
            errs += _immutable(
                _labels(pod).get(LABEL_PRIORITY, ""),
                _labels(old).get(LABEL_PRIORITY, ""),
                f"labels.{LABEL_PRIORITY}",
            )
    requests = pod_request(pod)
    if (requests.get("kubernetes.io/batch-cpu", 0) or requests.get("kubernetes.io/batch-memory", 0)) and (
        qos_class_raw(_labels(pod)) is not QoSClass.BE
    ):
        errs.append(
            f"labels.{LABEL_QOS_CLASS}: Required value: must specify koordinator QoS BE with koordinator "
            "colocation resources"
        )
    errs += _forbid(pod, QoSClass.BE, (PriorityClass.NONE, PriorityClass.PROD))
    errs += _forbid(
        pod, QoSClass.LSR, (PriorityClass.NONE, PriorityClass.MID, PriorityClass.BATCH, PriorityClass.FREE)
    )
    qos = qos_class_raw(_labels(pod))
    if qos in (QoSClass.LSR, QoSClass.LSE):
        cpu = requests.get("cpu", 0)
        if cpu == 0:
            errs.append(f"{_REQUESTS}: Required value: LSR Pod must declare the requested CPUs")
        elif cpu % 1000:
            errs.append(
                f"{_REQUESTS}: Invalid value: {_go_quote(str(parse_quantity(f'{cpu}m')))}: "
                "the requested CPUs of LSR Pod must be integer"
            )
    return errs
