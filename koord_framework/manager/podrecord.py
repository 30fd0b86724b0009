"""``PodRecord``: a pod as koord-manager's node-resource calculators read it.

The scheduler's ``PodInfo`` keeps some thirty fields (containers, affinity, tolerations, ports, times ...)
and building one for each of a large cluster's pods was most of the manager's first pass. A calculator reads
far less: who the pod is, its phase, its Koordinator QoS and priority classes and its summed requests. This
record keeps exactly that, built straight from the manifest; the labels and annotations are the manifest's
own dicts (read-only), and ``manifest`` is the pod itself for a calculator that needs more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from koord_framework.api import qos as qoslib
from koord_framework.api.constants import LABEL_PRIORITY_CLASS, LABEL_QOS_CLASS
from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.api.resources import CPU, add, max_each, parse_resource_list

__all__ = ["ACTIVE_PHASES", "PodRecord"]

ACTIVE_PHASES: Final = frozenset({"Running", "Pending"})
"""Phases whose pods hold their requests on the node (Koordinator's calculators skip the others)."""

_EMPTY: Final[Mapping[str, Any]] = {}


@dataclass(slots=True, eq=False)
class PodRecord:
    """What the node-resource calculators read of a pod (treat as read-only).

    ``requests`` is Kubernetes' ``PodRequests`` (app containers, sidecar and init containers, overhead; a
    missing request defaults to its limit) in canonical integers, as ``PodInfo.requests``;
    ``qos_class`` / ``priority_class`` are Koordinator's classes with their defaults, as ``PodInfo``'s.
    """

    namespace: str
    name: str
    key: str
    """``namespace/name``."""
    uid: str
    node_name: str
    phase: str
    terminating: bool
    """``metadata.deletionTimestamp`` is set."""
    qos_class: qoslib.QoSClass
    priority_class: qoslib.PriorityClass
    priority: int | None
    """``spec.priority`` (None when unset)."""
    requests: Mapping[str, int]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    resource_version: str
    manifest: Mapping[str, Any]

    @property
    def active(self) -> bool:
        """Running or Pending."""
        return self.phase in ACTIVE_PHASES

    @classmethod
    def from_manifest(cls, pod: Mapping[str, Any]) -> PodRecord:
        """The record of ``pod``; a malformed quantity raises ``QuantityError`` (a ``ValueError``) naming
        the field."""
        # Hot: every pod of the cluster passes here on the manager's first pass. Positional arguments and
        # no helper calls on the common path (each costs as much as the field it fills).
        meta = pod.get("metadata") or _EMPTY
        spec = pod.get("spec") or _EMPTY
        labels = meta.get("labels") or _EMPTY
        priority = spec.get("priority")
        if priority is not None:
            priority = int(priority)
        requests = _requests(spec)  # first: its errors name the field
        try:
            classes = _CLASSES.get(
                (labels.get(LABEL_QOS_CLASS), labels.get(LABEL_PRIORITY_CLASS, _ABSENT), priority)
            )
        except TypeError:  # an unhashable label value
            classes = None
        if classes is None:
            classes = _classes(pod, labels, priority)
        namespace = meta.get("namespace") or "default"
        name = meta.get("name") or ""
        if type(namespace) is not str or type(name) is not str:
            namespace, name = str(namespace), str(name)
        return cls(
            namespace,
            name,
            f"{namespace}/{name}",
            str(meta.get("uid") or ""),
            str(spec.get("nodeName") or ""),
            str((pod.get("status") or _EMPTY).get("phase") or "Pending"),
            meta.get("deletionTimestamp") is not None,
            classes[0],
            classes[1],
            priority,
            requests,
            labels,
            meta.get("annotations") or _EMPTY,
            str(meta.get("resourceVersion") or ""),
            pod,
        )


_ABSENT: Final = object()
# (QoS class, priority class) by (qosClass label, priority-class label, spec.priority) for pods whose label
# names a QoS class (the Kubernetes QoS is then never read): the classes of a cluster's pods come from a
# handful of label combinations. Bounded: cleared when full.
_CLASSES: dict[tuple[Any, Any, int | None], tuple[qoslib.QoSClass, qoslib.PriorityClass]] = {}
_MAX_CLASSES: Final = 1024


def _classes(
    pod: Mapping[str, Any], labels: Mapping[str, Any], priority: int | None
) -> tuple[qoslib.QoSClass, qoslib.PriorityClass]:
    """``classes_of`` with the Kubernetes QoS derived only when no qosClass label names a class (the
    memo's miss path: ``from_manifest`` looks the memo up itself)."""
    key: tuple[Any, Any, int | None] | None = (
        labels.get(LABEL_QOS_CLASS),
        labels.get(LABEL_PRIORITY_CLASS, _ABSENT),
        priority,
    )
    try:
        hash(key)
    except TypeError:  # an unhashable label value: not memoised
        key = None
    if qoslib.qos_class_raw(labels) is qoslib.QoSClass.NONE:
        # The class follows the containers (or a recorded status.qosClass): derived per pod.
        return qoslib.classes_of(labels, priority, qoslib.kube_qos(pod))
    found = qoslib.classes_of(labels, priority, qoslib.KubeQoS.BURSTABLE)  # the Kubernetes QoS is unread
    if key is not None:
        if len(_CLASSES) >= _MAX_CLASSES:
            _CLASSES.clear()
        _CLASSES[key] = found
    return found


# Requests of single-container pods by the container's requests and limits as given: replicas repeat a
# few shapes. The dicts are shared by every record with that shape (read-only). Bounded: cleared when full.
_SINGLE: dict[tuple[Any, Any], dict[str, int]] = {}
_MAX_SINGLE: Final = 4096


def _requests(spec: Mapping[str, Any]) -> Mapping[str, int]:
    """``pod_requests``, memoised for the common pod: one container, no init containers, no overhead."""
    if "initContainers" in spec or "overhead" in spec:
        return pod_requests(spec)
    containers = spec.get("containers")
    if type(containers) is not list or len(containers) != 1 or type(containers[0]) is not dict:
        return pod_requests(spec)
    res = containers[0].get("resources") or _EMPTY  # none: a best-effort container
    if type(res) is not dict and res is not _EMPTY:
        return pod_requests(spec)
    req, lim = res.get("requests"), res.get("limits")
    try:
        key = (
            tuple(req.items()) if type(req) is dict else req,
            tuple(lim.items()) if type(lim) is dict else lim,
        )
        found = _SINGLE.get(key)
    except TypeError:  # unhashable values: let the full parse judge them
        return pod_requests(spec)
    if found is None:
        found = pod_requests(spec)
        # Only text quantities are remembered: a key of ints could equal one of bools (True == 1), which
        # must still be refused; a text key equals no key of another type.
        if all(type(v) is str for part in key if part for _, v in part):
            if len(_SINGLE) >= _MAX_SINGLE:
                _SINGLE.clear()
            _SINGLE[key] = found
    return found


# Parsed quantities by (is cpu, text): pods repeat a handful of request values, and a dict lookup is
# cheaper than the quantity's integer conversion. Bounded: cleared when full.
_VALUES: dict[tuple[bool, str], int] = {}
_MAX_VALUES: Final = 4096


def _resource_list(raw: Any, path: str) -> dict[str, int]:
    """``parse_resource_list`` of one container's requests or limits, memoised per quantity text."""
    if not raw:
        return {}
    if not isinstance(raw, dict):
        return parse_resource_list(raw, path=path)  # reports what is wrong
    out: dict[str, int] = {}
    for name, text in raw.items():
        if not isinstance(text, str) or not isinstance(name, str) or not name:
            return parse_resource_list(raw, path=path)
        key = (name == CPU, text)
        value = _VALUES.get(key)
        if value is None:
            try:
                q = Quantity.parse(text)
            except QuantityError as err:
                raise QuantityError(f"{path}.{name}: {err}") from err
            value = q.milli_value() if key[0] else q.value()
            if len(_VALUES) >= _MAX_VALUES:
                _VALUES.clear()
            _VALUES[key] = value
        out[name] = value
    return out


def _container_requests(c: Any, path: str) -> dict[str, int]:
    if not isinstance(c, Mapping):
        raise QuantityError(f"{path}: expected an object, got {type(c).__name__}")
    res = c.get("resources") or _EMPTY
    requests = _resource_list(res.get("requests"), f"{path}.resources.requests")
    limits = res.get("limits")
    if limits:
        # The API server defaults a missing request to its limit (SetDefaults_Pod).
        for name, value in _resource_list(limits, f"{path}.resources.limits").items():
            requests.setdefault(name, value)
    return requests


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Kubernetes ``PodRequests`` of a pod spec: max(app + sidecars, each init + sidecars started before
    it) + overhead (the same sums as ``koord_framework.api.objects.pod_requests``)."""
    reqs: dict[str, int] = {}
    for i, c in enumerate(spec.get("containers") or ()):
        for name, value in _container_requests(c, f"spec.containers[{i}]").items():
            reqs[name] = reqs.get(name, 0) + value
    inits = spec.get("initContainers")
    if inits:
        init_max: dict[str, int] = {}
        sidecars: dict[str, int] = {}
        for i, c in enumerate(inits):
            requests = _container_requests(c, f"spec.initContainers[{i}]")
            if c.get("restartPolicy") == "Always":
                reqs = add(reqs, requests)
                sidecars = add(sidecars, requests)
                init_max = max_each(init_max, sidecars)
            else:
                init_max = max_each(init_max, add(requests, sidecars))
        reqs = max_each(reqs, init_max)
    overhead = spec.get("overhead")
    if overhead:
        reqs = add(reqs, parse_resource_list(overhead, path="spec.overhead"))
    return reqs
