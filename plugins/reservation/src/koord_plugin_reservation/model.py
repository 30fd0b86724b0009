"""The Reservation object as the plugin reads it: validation, owners, reserve pods, reservation affinity.

Everything read from a Reservation or a pod annotation is checked here, and a problem raises
``ReservationError`` naming the object and the field (``reservation r1: spec.owners[0].labelSelector: ...``),
so that one bad object never breaks the cycle of another. Semantics follow Koordinator's
``pkg/util/reservation`` (``NewReservePod``, ``ValidateReservation``, owner matchers,
``RequiredReservationAffinity``) and ``frameworkext.NewReservationInfo``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.objects import ContainerInfo, PodInfo, pod_requests
from koord_framework.api.resources import parse_resource_list
from koord_framework.api.selectors import (
    LabelSelector,
    NodeSelector,
    SelectorError,
    find_untolerated_taint,
    parse_label_selector,
    parse_node_selector,
    selector_from_set,
    tolerations_tolerate_taint,
)
from koord_framework.cluster.clock import parse_time
from koord_framework.config.common import DurationError, parse_duration_ns
from koord_framework.scheduler.frameworkext import (
    ANNOTATION_IS_PRE_ALLOCATION,
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESERVATION_NAME,
    ANNOTATION_RESERVATION_NODE,
    ANNOTATION_RESERVE_POD,
    LABEL_RESERVATION_IGNORED,
    ReservationInfo,
)

MAX_INT32 = 2**31 - 1
LABEL_POD_PRIORITY = "koordinator.sh/priority"
ANNOTATION_RESIZE_ALLOCATABLE = "scheduling.koordinator.sh/reservation-resize-allocatable"
ANNOTATION_RESTRICTED_OPTIONS = "scheduling.koordinator.sh/reservation-restricted-options"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_EXACT_MATCH = "scheduling.koordinator.sh/exact-match-reservation"
FAKE_CONTAINER = "__internal_fake_container__"

PHASE_PENDING = "Pending"
PHASE_AVAILABLE = "Available"
PHASE_WAITING = "Waiting"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
ALLOCATE_POLICIES = ("", "Aligned", "Restricted")

COND_SCHEDULED = "Scheduled"
COND_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_AVAILABLE = "Available"
REASON_EXPIRED = "Expired"
REASON_SUCCEEDED = "Succeeded"
REASON_UNSCHEDULABLE = "Unschedulable"

PRE_ALLOCATION_MODE_DEFAULT = "Default"
PRE_ALLOCATION_MODE_CLUSTER = "Cluster"
LABEL_PRE_ALLOCATION_REQUIRED = "scheduling.koordinator.sh/pre-allocation-required"
"""On a Reservation (and so its reserve pod): it may only be placed by pre-allocating a running pod."""
LABEL_POD_PRE_ALLOCATABLE = "pod.koordinator.sh/is-pre-allocatable"
"""On a running pod: ``"true"`` makes it a candidate of Cluster-mode pre-allocation (key configurable)."""
ANNOTATION_POD_PRE_ALLOCATABLE_PRIORITY = "pod.koordinator.sh/pre-allocatable-priority"
"""On a Cluster-mode candidate: an integer, higher is pre-allocated first (key configurable)."""

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


class ReservationError(ValueError):
    """A Reservation (or a pod's reservation annotation) that cannot be used, with the object and field."""

    def __init__(self, obj: str, path: str, message: str) -> None:
        super().__init__(f"{obj}: {path}: {message}")
        self.obj = obj
        self.path = path


@dataclass(frozen=True, slots=True)
class OwnerMatcher:
    """One ``spec.owners`` entry: every part that is set must match (entries are ORed)."""

    object: Mapping[str, Any] | None = None
    controller: Mapping[str, Any] | None = None
    selector: LabelSelector | None = None

    def matches(self, pod: PodInfo) -> bool:
        ref = self.object
        if ref is not None:
            for key, have in (("uid", pod.uid), ("name", pod.name), ("namespace", pod.namespace)):
                want = ref.get(key)
                if want and want != have:
                    return False
            api_version = ref.get("apiVersion")
            if api_version and api_version != "v1":
                return False
        ctrl = self.controller
        if ctrl is not None:
            ns = ctrl.get("namespace")
            if ns and ns != pod.namespace:
                return False
            found = False
            for owner in pod.owner_refs:
                want_ctrl = ctrl.get("controller")
                if want_ctrl is not None and bool(want_ctrl) != owner.controller:
                    continue
                if ctrl.get("uid") and ctrl["uid"] != owner.uid:
                    continue
                if ctrl.get("name") and ctrl["name"] != owner.name:
                    continue
                if ctrl.get("kind") and ctrl["kind"] != owner.kind:
                    continue
                found = True
                break
            if not found:
                return False
        return self.selector is None or self.selector.matches(pod.labels)

    def index_key(self) -> tuple[str, str, str] | None:
        """A key that every pod this entry matches must have, for the owner index; None when there is
        none cheap to compute (the entry is then tried on every pod)."""
        if self.object is not None and self.object.get("uid"):
            return ("uid", str(self.object["uid"]), "")
        if self.controller is not None and self.controller.get("uid"):
            return ("owner", str(self.controller["uid"]), "")
        if self.selector is not None:
            for req in self.selector.requirements:
                if req.operator in ("Equals", "In", "DoubleEquals") and len(req.values) == 1:
                    return ("label", req.key, next(iter(req.values)))
        return None


@dataclass(slots=True)
class ParsedReservation:
    """A validated Reservation: what the scheduler and the controller need, parsed once."""

    name: str
    uid: str
    obj: Mapping[str, Any]
    owners: tuple[OwnerMatcher, ...]
    template_requests: dict[str, int]
    allocatable: dict[str, int]
    """``status.allocatable`` when Available, else the template's requests (``ReservationRequests``)."""
    resource_names: tuple[str, ...]
    reserved: dict[str, int]
    allocate_once: bool
    allocate_policy: str
    unschedulable: bool
    taints: tuple[Mapping[str, Any], ...]
    phase: str
    node_name: str
    ttl_seconds: float | None
    expires: float | None
    creation_time: float | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    scheduler_name: str
    pre_allocation: bool
    pre_allocation_mode: str = PRE_ALLOCATION_MODE_DEFAULT
    """``spec.preAllocationPolicy.mode``: ``Default`` (candidates are the owners) or ``Cluster``."""
    pre_allocation_multiple: bool = False
    """``spec.preAllocationPolicy.enableMultiple``: several running pods may make up the reservation."""
    conditions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_available(self) -> bool:
        return bool(self.node_name) and self.phase == PHASE_AVAILABLE

    @property
    def is_pending(self) -> bool:
        return self.phase in ("", PHASE_PENDING) and not self.node_name

    @property
    def is_terminal(self) -> bool:
        return self.phase in (PHASE_SUCCEEDED, PHASE_FAILED)

    def expiry(self) -> float | None:
        """When the reservation expires (``expires``, else creation + ``ttl``; ttl 0 never expires)."""
        if self.expires is not None:
            return self.expires
        if self.ttl_seconds is not None and self.ttl_seconds > 0 and self.creation_time is not None:
            return self.creation_time + self.ttl_seconds
        return None


def _mapping(value: Any, obj: str, path: str, *, required: bool = False) -> Mapping[str, Any]:
    if value is None:
        if required:
            raise ReservationError(obj, path, "is required")
        return {}
    if not isinstance(value, Mapping):
        raise ReservationError(obj, path, f"must be an object, not {type(value).__name__}")
    return value


def _resources(value: Any, obj: str, path: str) -> dict[str, int]:
    try:
        return parse_resource_list(value or {}, path=path)
    except ValueError as exc:
        raise ReservationError(obj, path, str(exc)) from None


def _template_requests(spec: Mapping[str, Any], obj: str) -> dict[str, int]:
    """Pod requests of the template's spec (containers, init containers and overhead), by PodRequests."""
    containers: list[ContainerInfo] = []
    for kind, key in (("app", "containers"), ("init", "initContainers")):
        items = spec.get(key) or []
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise ReservationError(obj, f"spec.template.spec.{key}", "must be a list")
        for i, c in enumerate(items):
            path = f"spec.template.spec.{key}[{i}].resources.requests"
            c = _mapping(c, obj, f"spec.template.spec.{key}[{i}]")
            resources = _mapping(c.get("resources"), obj, f"spec.template.spec.{key}[{i}].resources")
            requests = _resources(resources.get("requests"), obj, path)
            ckind = "sidecar" if kind == "init" and c.get("restartPolicy") == "Always" else kind
            containers.append(ContainerInfo(str(c.get("name", "")), requests, {}, ckind))
    overhead = _resources(spec.get("overhead"), obj, "spec.template.spec.overhead")
    return pod_requests(tuple(containers), overhead)


def parse_reservation(obj: Mapping[str, Any], *, strict: bool = True) -> ParsedReservation:
    """Validate a Reservation (``ValidateReservation`` and every field the plugin reads).

    ``strict=False`` skips the checks a scheduled reservation needs but a bare ``ReservationInfo`` does
    not (owners, expiration, uid): Koordinator's ``NewReservationInfo`` builds one from any object.
    """
    meta = _mapping(obj.get("metadata"), "reservation", "metadata", required=True)
    name = str(meta.get("name") or "")
    label = f"reservation {name or '<unnamed>'}"
    if not name:
        raise ReservationError(label, "metadata.name", "is required")
    uid = str(meta.get("uid") or "")
    if not uid and strict:
        raise ReservationError(label, "metadata.uid", "is required")
    spec = _mapping(obj.get("spec"), label, "spec", required=True)
    template = _mapping(spec.get("template"), label, "spec.template", required=True)
    tspec = _mapping(template.get("spec"), label, "spec.template.spec", required=True)
    tmeta = _mapping(template.get("metadata"), label, "spec.template.metadata")
    for key in ("labels", "annotations"):
        values = _mapping(tmeta.get(key), label, f"spec.template.metadata.{key}")
        for k, v in values.items():
            if not isinstance(v, str):
                raise ReservationError(label, f"spec.template.metadata.{key}[{k}]", "must be a string")
    template_requests = _template_requests(tspec, label)
    raw_owners = spec.get("owners")
    if strict and (
        raw_owners is None
        or (isinstance(raw_owners, Sequence) and not isinstance(raw_owners, str) and not raw_owners)
    ):
        raise ReservationError(label, "spec.owners", "the reservation misses the owner spec")
    raw_owners = raw_owners or []
    if not isinstance(raw_owners, Sequence) or isinstance(raw_owners, str):
        raise ReservationError(label, "spec.owners", "must be a list")
    owners: list[OwnerMatcher] = []
    for i, raw in enumerate(raw_owners):
        path = f"spec.owners[{i}]"
        owner = _mapping(raw, label, path)
        ref = owner.get("object")
        ctrl = owner.get("controller")
        sel = owner.get("labelSelector")
        if ref is None and ctrl is None and sel is None:
            raise ReservationError(label, path, "needs object, controller or labelSelector")
        selector: LabelSelector | None = None
        if sel is not None:
            try:
                selector = parse_label_selector(
                    _mapping(sel, label, f"{path}.labelSelector"), f"{path}.labelSelector"
                )
            except SelectorError as exc:
                raise ReservationError(label, f"{path}.labelSelector", str(exc)) from None
        owners.append(
            OwnerMatcher(
                dict(_mapping(ref, label, f"{path}.object")) if ref is not None else None,
                dict(_mapping(ctrl, label, f"{path}.controller")) if ctrl is not None else None,
                selector,
            )
        )
    ttl_raw, expires_raw = spec.get("ttl"), spec.get("expires")
    if strict and ttl_raw is None and expires_raw is None:
        raise ReservationError(
            label, "spec.ttl", "the reservation misses the expiration spec (ttl or expires)"
        )
    ttl: float | None = None
    if ttl_raw is not None:
        try:
            ttl = parse_duration_ns(str(ttl_raw)) / 1e9
        except DurationError as exc:
            raise ReservationError(label, "spec.ttl", str(exc)) from None
    expires: float | None = None
    if expires_raw is not None:
        expires = parse_time(str(expires_raw)) if isinstance(expires_raw, str) else None
        if expires is None:
            raise ReservationError(label, "spec.expires", f"invalid time {expires_raw!r}")
    allocate_once = spec.get("allocateOnce", True)
    if allocate_once is None:
        allocate_once = True
    if not isinstance(allocate_once, bool):
        raise ReservationError(label, "spec.allocateOnce", "must be a boolean")
    policy = spec.get("allocatePolicy") or ""
    if policy == "Default":
        policy = ""
    if policy not in ALLOCATE_POLICIES:
        raise ReservationError(
            label, "spec.allocatePolicy", f"unknown policy {policy!r} (Aligned, Restricted)"
        )
    unschedulable = bool(spec.get("unschedulable") or False)
    taints_raw = spec.get("taints") or []
    if not isinstance(taints_raw, Sequence) or isinstance(taints_raw, str):
        raise ReservationError(label, "spec.taints", "must be a list")
    taints = tuple(_mapping(t, label, f"spec.taints[{i}]") for i, t in enumerate(taints_raw))
    status = _mapping(obj.get("status"), label, "status")
    phase = str(status.get("phase") or "")
    node_name = str(status.get("nodeName") or "")
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels"), label, "metadata.labels").items()}
    annotations = {
        str(k): str(v) for k, v in _mapping(meta.get("annotations"), label, "metadata.annotations").items()
    }
    if node_name and phase == PHASE_AVAILABLE:
        allocatable = _resources(status.get("allocatable"), label, "status.allocatable")
    else:
        allocatable = dict(template_requests)
    names = sorted(allocatable)
    if policy == "Restricted" and annotations.get(ANNOTATION_RESTRICTED_OPTIONS):
        try:
            options = json.loads(annotations[ANNOTATION_RESTRICTED_OPTIONS])
            restricted = [str(r) for r in (options.get("resources") or [])]
        except (ValueError, AttributeError) as exc:
            raise ReservationError(
                label, f"metadata.annotations[{ANNOTATION_RESTRICTED_OPTIONS}]", str(exc)
            ) from None
        narrowed = [n for n in names if n in restricted]
        names = narrowed or names
    reserved: dict[str, int] = {}
    if annotations.get(ANNOTATION_NODE_RESERVATION):
        try:
            raw_reserved = json.loads(annotations[ANNOTATION_NODE_RESERVATION]).get("resources") or {}
        except (ValueError, AttributeError) as exc:
            raise ReservationError(
                label, f"metadata.annotations[{ANNOTATION_NODE_RESERVATION}]", str(exc)
            ) from None
        reserved = _resources(raw_reserved, label, f"metadata.annotations[{ANNOTATION_NODE_RESERVATION}]")
    conditions = [dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    pre_allocation, mode, multiple = _pre_allocation(spec, label)
    return ParsedReservation(
        name=name,
        uid=uid,
        obj=obj,
        owners=tuple(owners),
        template_requests=template_requests,
        allocatable=allocatable,
        resource_names=tuple(names),
        reserved=reserved,
        allocate_once=allocate_once,
        allocate_policy=str(policy),
        unschedulable=unschedulable,
        taints=taints,
        phase=phase,
        node_name=node_name,
        ttl_seconds=ttl,
        expires=expires,
        creation_time=parse_time(meta.get("creationTimestamp")) if meta.get("creationTimestamp") else None,
        labels=labels,
        annotations=annotations,
        scheduler_name=str(tspec.get("schedulerName") or "default-scheduler"),
        pre_allocation=pre_allocation,
        pre_allocation_mode=mode,
        pre_allocation_multiple=multiple,
        conditions=conditions,
    )


def _pre_allocation(spec: Mapping[str, Any], obj: str) -> tuple[bool, str, bool]:
    """``spec.preAllocation`` and ``spec.preAllocationPolicy`` (mode defaults to ``Default``)."""
    enabled = spec.get("preAllocation")
    if enabled is None:
        enabled = False
    if not isinstance(enabled, bool):
        raise ReservationError(obj, "spec.preAllocation", f"must be a boolean, not {enabled!r}")
    policy = _mapping(spec.get("preAllocationPolicy"), obj, "spec.preAllocationPolicy")
    mode = policy.get("mode") or PRE_ALLOCATION_MODE_DEFAULT
    if mode not in (PRE_ALLOCATION_MODE_DEFAULT, PRE_ALLOCATION_MODE_CLUSTER):
        raise ReservationError(
            obj, "spec.preAllocationPolicy.mode", f"unknown mode {mode!r} (Default, Cluster)"
        )
    multiple = policy.get("enableMultiple")
    if multiple is None:
        multiple = False
    if not isinstance(multiple, bool):
        raise ReservationError(
            obj, "spec.preAllocationPolicy.enableMultiple", f"must be a boolean, not {multiple!r}"
        )
    return enabled, str(mode), multiple


def reserve_pod_manifest(r: ParsedReservation) -> dict[str, Any]:
    """The reserve pod of a reservation (Koordinator's ``NewReservePod``), as a pod manifest."""
    template = r.obj["spec"]["template"]
    tmeta = dict(template.get("metadata") or {})
    spec = json.loads(json.dumps(template.get("spec") or {}))
    labels = {**(tmeta.get("labels") or {}), **r.labels}
    annotations = {**(tmeta.get("annotations") or {}), **r.annotations}
    annotations[ANNOTATION_RESERVE_POD] = "true"
    annotations[ANNOTATION_RESERVATION_NAME] = r.name
    if r.pre_allocation:
        annotations[ANNOTATION_IS_PRE_ALLOCATION] = "true"
    if spec.get("nodeName"):
        annotations[ANNOTATION_RESERVATION_NODE] = spec["nodeName"]
        spec["nodeName"] = ""
    if r.node_name:
        spec["nodeName"] = r.node_name
    if spec.get("priority") is None:
        raw = r.labels.get(LABEL_POD_PRIORITY, "")
        try:
            value = int(raw)
            if -(2**31) <= value <= MAX_INT32:
                spec["priority"] = value
        except ValueError:
            pass
    if spec.get("priority") is None:
        spec["priority"] = MAX_INT32
    spec["schedulerName"] = r.scheduler_name
    phase = "Pending"
    if r.phase == PHASE_SUCCEEDED:
        phase = "Succeeded"
    elif r.phase == PHASE_FAILED:
        phase = "Failed"
    elif r.node_name:
        phase = "Running"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": r.uid,
            "namespace": tmeta.get("namespace") or "default",
            "uid": r.uid,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def reserve_pod(r: ParsedReservation) -> PodInfo:
    return PodInfo.from_manifest(reserve_pod_manifest(r))


def holding(pod: PodInfo, requests: Mapping[str, int]) -> PodInfo:
    """``pod`` requesting exactly ``requests`` (one fake container), as Koordinator rewrites an Available
    reserve pod whose allocatable differs from its template."""
    import dataclasses

    container = ContainerInfo(FAKE_CONTAINER, dict(requests), dict(requests), "app")
    return dataclasses.replace(
        pod,
        containers=(container,),
        requests=dict(requests),
        limits=dict(requests),
        overhead={},
        non_zero=None,
    )


# --- the pod side -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReservationAffinity:
    """A pod's ``reservation-affinity`` annotation (``RequiredReservationAffinity``)."""

    name: str = ""
    selector: LabelSelector | None = None
    node_selector: NodeSelector | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()

    @property
    def tolerates_unschedulable(self) -> bool:
        return bool(self.tolerations) and tolerations_tolerate_taint(self.tolerations, UNSCHEDULABLE_TAINT)

    def untolerated_taint(self, taints: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        found = find_untolerated_taint(taints, list(self.tolerations))
        return found if isinstance(found, Mapping) else None

    def matches(self, reservation_name: str, labels: Mapping[str, str]) -> bool:
        """Affinity against a fake node named after the reservation, with node and reservation labels."""
        if self.selector is not None and not self.selector.matches(labels):
            return False
        if self.node_selector is not None:
            return self.node_selector.matches(labels, reservation_name)
        return True


def parse_reservation_affinity(pod: PodInfo) -> ReservationAffinity | None:
    """The pod's reservation affinity, None without the annotation; ``ReservationError`` if malformed."""
    raw = pod.annotations.get(ANNOTATION_RESERVATION_AFFINITY)
    if not raw:
        return None
    obj = f"pod {pod.key}"
    path = f"metadata.annotations[{ANNOTATION_RESERVATION_AFFINITY}]"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ReservationError(obj, path, f"invalid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise ReservationError(obj, path, "must be a JSON object")
    selector: LabelSelector | None = None
    rs = data.get("reservationSelector")
    if rs:
        if not isinstance(rs, Mapping) or not all(isinstance(v, str) for v in rs.values()):
            raise ReservationError(obj, f"{path}.reservationSelector", "must map label keys to strings")
        selector = selector_from_set({str(k): v for k, v in rs.items()})
    node_selector: NodeSelector | None = None
    req = data.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        if not isinstance(req, Mapping):
            raise ReservationError(
                obj, f"{path}.requiredDuringSchedulingIgnoredDuringExecution", "must be an object"
            )
        terms = req.get("reservationSelectorTerms") or []
        try:
            node_selector = parse_node_selector(
                {"nodeSelectorTerms": terms},
                f"{path}.requiredDuringSchedulingIgnoredDuringExecution",
                strict=True,
            )
        except SelectorError as exc:
            raise ReservationError(obj, path, str(exc)) from None
    tolerations = data.get("tolerations") or []
    if not isinstance(tolerations, Sequence) or not all(isinstance(t, Mapping) for t in tolerations):
        raise ReservationError(obj, f"{path}.tolerations", "must be a list of tolerations")
    name = data.get("name") or ""
    if not isinstance(name, str):
        raise ReservationError(obj, f"{path}.name", "must be a string")
    return ReservationAffinity(name, selector, node_selector, tuple(tolerations))


def is_reservation_ignored(pod: PodInfo) -> bool:
    return pod.labels.get(LABEL_RESERVATION_IGNORED) == "true"


def exact_match_spec(pod: PodInfo) -> list[str] | None:
    """The ``exact-match-reservation`` annotation: resource names the reservation must equal the pod on."""
    raw = pod.annotations.get(ANNOTATION_EXACT_MATCH)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        names = [str(n) for n in (data.get("resourceNames") or [])]
    except (ValueError, AttributeError) as exc:
        raise ReservationError(
            f"pod {pod.key}", f"metadata.annotations[{ANNOTATION_EXACT_MATCH}]", str(exc)
        ) from None
    return names


def exact_match(
    pod_requests: Mapping[str, int], allocatable: Mapping[str, int], names: list[str] | None
) -> bool:
    """``ExactMatchReservation``: on each named resource, the pod requests exactly what is reserved."""
    if not names:
        return True
    return all(pod_requests.get(n, 0) == allocatable.get(n, 0) for n in names)


__all__ = [
    "OwnerMatcher",
    "ParsedReservation",
    "ReservationAffinity",
    "ReservationError",
    "exact_match",
    "exact_match_spec",
    "holding",
    "info_from_object",
    "is_reservation_ignored",
    "parse_reservation",
    "parse_reservation_affinity",
    "reserve_pod",
    "reserve_pod_manifest",
]


def info_from_object(
    obj: Mapping[str, Any],
    allocated: Mapping[str, int] | None = None,
    allocated_pods: Mapping[str, str] | None = None,
) -> ReservationInfo:
    """A ``ReservationInfo`` straight from an object (``NewReservationInfo``), for tests and tools:
    ``allocated`` and ``allocated_pods`` stand for the owners the scheduler would have counted."""
    r = parse_reservation(obj, strict=False)
    return ReservationInfo(
        name=r.name,
        uid=r.uid,
        node_name=r.node_name,
        phase=r.phase or "Pending",
        allocatable=dict(r.allocatable),
        allocated=dict(allocated or {}),
        reserved=dict(r.reserved),
        resource_names=r.resource_names,
        allocated_pods=dict(allocated_pods or {}),
        allocate_once=r.allocate_once,
        allocate_policy=r.allocate_policy,
        unschedulable=r.unschedulable,
        labels=r.labels,
        annotations=r.annotations,
        taints=r.taints,
    )
