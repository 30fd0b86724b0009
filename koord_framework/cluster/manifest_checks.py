"""Strict validation of manifests of the kinds the platform knows, naming the field of every problem.

What the API server would refuse is refused here too, so that a simulation never runs on objects a real
cluster would not hold: the apiVersion served for the kind, metadata (names as DNS-1123 where Kubernetes
requires it), the type of every field the platform reads, quantities that parse (container resources, node
capacity and allocatable, NodeMetric usage, quotas, devices), enumerations (phases, taint effects,
aggregation types), and cross-field rules (a request above its limit; a PodDisruptionBudget with both
minAvailable and maxUnavailable). Fields the platform never reads are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.api.resources import to_int
from koord_framework.cluster.clock import parse_time
from koord_framework.cluster.kinds import KindInfo, KindProblem, KindValidator, installed_kinds, unknown_kind
from koord_framework.cluster.yaml_io import join_path
from koord_framework.errors import ManifestError

__all__ = ["builtin_validator", "describe_type", "validate_object"]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PERCENT = re.compile(r"^[0-9]+%$")
_GO_DURATION = re.compile(r"^[-+]?(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$")

_SUBDOMAIN_NAMED = ("Pod", "Node", "NodeMetric", "NodeSLO", "NodeResourceTopology")
"""Kinds whose names must be DNS-1123 subdomains here (a contributed kind checks its own, as Device's
validator does)."""

_POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_CONDITION_STATUSES = ("True", "False", "Unknown")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")


def describe_type(value: Any) -> str:
    """The JSON type name of a value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


class _Checker:
    """Field checks that raise ``ManifestError`` with the field's full path."""

    def __init__(self, file: str, doc: int | None, prefix: str) -> None:
        self.file, self.doc, self.prefix = file, doc, prefix

    def fail(self, path: str, message: str) -> Exception:
        """The error to raise for ``path`` (a ``ManifestError`` naming file, document and field)."""
        return ManifestError(self.file, self.doc, self.prefix + path, message)

    def mapping(self, value: Any, path: str, *, required: bool = False) -> dict[str, Any]:
        """A mapping, or ``{}`` for an absent or ``null`` optional one."""
        if value is None:
            if required:
                raise self.fail(path, "required field is missing")
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"expected a mapping, got {describe_type(value)}")
        return value

    def items(self, value: Any, path: str, *, required: bool = False) -> list[tuple[str, dict[str, Any]]]:
        """(path, mapping) of each element of a list of mappings."""
        if value is None:
            if required:
                raise self.fail(path, "required field is missing")
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {describe_type(value)}")
        out = []
        for i, item in enumerate(value):
            out.append((f"{path}[{i}]", self.mapping(item, f"{path}[{i}]", required=True)))
        return out

    def string(
        self, value: Any, path: str, *, required: bool = False, choices: Sequence[str] | None = None
    ) -> str | None:
        if value is None:
            if required:
                raise self.fail(path, "required field is missing")
            return None
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {describe_type(value)}")
        if required and not value:
            raise self.fail(path, "must not be empty")
        if choices is not None and value not in choices:
            raise self.fail(path, f"unsupported value {value!r}; expected one of {', '.join(choices)}")
        return value

    def strings(self, value: Any, path: str) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list of strings, got {describe_type(value)}")
        for i, item in enumerate(value):
            self.string(item, f"{path}[{i}]", required=True)

    def integer(
        self, value: Any, path: str, *, minimum: int | None = None, maximum: int | None = None
    ) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {describe_type(value)}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"must be greater than or equal to {minimum}")
        if maximum is not None and value > maximum:
            raise self.fail(path, f"must be less than or equal to {maximum}")

    def boolean(self, value: Any, path: str) -> None:
        if value is not None and not isinstance(value, bool):
            raise self.fail(path, f"expected true or false, got {describe_type(value)}")

    def string_map(self, value: Any, path: str) -> None:
        for key, item in self.mapping(value, path).items():
            if not isinstance(item, str):
                raise self.fail(join_path(path, key), f"expected a string value, got {describe_type(item)}")

    def time(self, value: Any, path: str) -> None:
        text = self.string(value, path)
        if text:
            try:
                parse_time(text)
            except ValueError:
                raise self.fail(path, f"invalid RFC 3339 time {text!r}") from None

    def duration(self, value: Any, path: str) -> None:
        text = self.string(value, path)
        if text is not None and not _GO_DURATION.fullmatch(text):
            raise self.fail(path, f"invalid duration {text!r} (expected e.g. 300s, 5m, 1h30m)")

    def quantity(self, value: Any, path: str) -> None:
        if value is None:
            return
        try:
            Quantity.parse(value)
        except QuantityError as err:
            raise self.fail(path, str(err)) from None

    def resources(self, value: Any, path: str) -> dict[str, int]:
        """A ResourceList; returns it parsed (cpu in milli-cores, the rest by ``Value()``)."""
        out: dict[str, int] = {}
        for name, raw in self.mapping(value, path).items():
            if not name:
                raise self.fail(path, "resource name must not be empty")
            if raw is None:
                out[name] = 0
                continue
            try:
                out[name] = to_int(name, raw)
            except QuantityError as err:
                raise self.fail(join_path(path, name), str(err)) from None
        return out

    def int_or_percent(self, value: Any, path: str) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise self.fail(
                path, f"expected an integer or a percentage like '50%', got {describe_type(value)}"
            )
        if isinstance(value, int) and value < 0:
            raise self.fail(path, "must be greater than or equal to 0")
        if isinstance(value, str):
            if not _PERCENT.fullmatch(value):
                raise self.fail(path, f"invalid value {value!r}: a string must be a percentage like '50%'")
            if int(value[:-1]) > 100:
                raise self.fail(path, "must not be greater than 100%")

    def selector(self, value: Any, path: str) -> None:
        sel = self.mapping(value, path)
        self.string_map(sel.get("matchLabels"), f"{path}.matchLabels")
        for p, expr in self.items(sel.get("matchExpressions"), f"{path}.matchExpressions"):
            self.string(expr.get("key"), f"{p}.key", required=True)
            op = self.string(
                expr.get("operator"),
                f"{p}.operator",
                required=True,
                choices=("In", "NotIn", "Exists", "DoesNotExist"),
            )
            self.strings(expr.get("values"), f"{p}.values")
            values = expr.get("values") or []
            if op in ("In", "NotIn") and not values:
                raise self.fail(f"{p}.values", f"must be specified when operator is {op}")
            if op in ("Exists", "DoesNotExist") and values:
                raise self.fail(f"{p}.values", f"may not be specified when operator is {op}")

    def resource_map(self, value: Any, path: str) -> None:
        """Koordinator's ``ResourceMap``: ``{"resources": ResourceList, "devices": [...]}``."""
        rmap = self.mapping(value, path)
        self.resources(rmap.get("resources"), f"{path}.resources")
        for p, dev in self.items(rmap.get("devices"), f"{path}.devices"):
            self.resources(dev.get("resources"), f"{p}.resources")


def _check_metadata(c: _Checker, obj: dict[str, Any], info: KindInfo) -> None:
    meta = c.mapping(obj.get("metadata"), "metadata", required=True)
    name = c.string(meta.get("name"), "metadata.name", required=True)
    assert name is not None
    if info.kind in _SUBDOMAIN_NAMED:
        if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
            raise c.fail(
                "metadata.name",
                f"{name!r} is not a valid DNS-1123 subdomain (lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit, at most 253 characters)",
            )
    elif info.kind == "Namespace":
        if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
            raise c.fail("metadata.name", f"{name!r} is not a valid DNS-1123 label")
    elif name in (".", "..") or "/" in name or "%" in name:
        raise c.fail("metadata.name", f"{name!r} may not be '.', '..' or contain '/' or '%'")
    if info.namespaced:
        namespace = c.string(meta.get("namespace"), "metadata.namespace")
        if namespace is not None and (len(namespace) > 63 or not _DNS1123_LABEL.fullmatch(namespace)):
            raise c.fail("metadata.namespace", f"{namespace!r} is not a valid DNS-1123 label")
    c.string_map(meta.get("labels"), "metadata.labels")
    c.string_map(meta.get("annotations"), "metadata.annotations")
    for key in ("uid", "resourceVersion", "generateName"):
        c.string(meta.get(key), f"metadata.{key}")
    c.integer(meta.get("generation"), "metadata.generation", minimum=0)
    c.time(meta.get("creationTimestamp"), "metadata.creationTimestamp")
    c.time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")
    for p, ref in c.items(meta.get("ownerReferences"), "metadata.ownerReferences"):
        for key in ("apiVersion", "kind", "name", "uid"):
            c.string(ref.get(key), f"{p}.{key}")
        c.boolean(ref.get("controller"), f"{p}.controller")
        c.boolean(ref.get("blockOwnerDeletion"), f"{p}.blockOwnerDeletion")
    c.strings(meta.get("finalizers"), "metadata.finalizers")


def _check_container(c: _Checker, container: dict[str, Any], path: str) -> None:
    c.string(container.get("name"), f"{path}.name", required=True)
    c.string(container.get("image"), f"{path}.image")
    c.string(container.get("restartPolicy"), f"{path}.restartPolicy", choices=("Always",))
    res = c.mapping(container.get("resources"), f"{path}.resources")
    requests = c.resources(res.get("requests"), f"{path}.resources.requests")
    limits = c.resources(res.get("limits"), f"{path}.resources.limits")
    for name, request in requests.items():
        if name in limits and request > limits[name]:
            raise c.fail(
                join_path(f"{path}.resources.requests", name),
                f"must be less than or equal to the {name} limit",
            )
    for p, port in c.items(container.get("ports"), f"{path}.ports"):
        c.integer(port.get("containerPort"), f"{p}.containerPort", minimum=1, maximum=65535)
        c.integer(port.get("hostPort"), f"{p}.hostPort", minimum=0, maximum=65535)
        c.string(port.get("protocol"), f"{p}.protocol", choices=("TCP", "UDP", "SCTP"))
        c.string(port.get("hostIP"), f"{p}.hostIP")
    c.strings(container.get("command"), f"{path}.command")
    c.strings(container.get("args"), f"{path}.args")


def _check_pod_spec(c: _Checker, spec: dict[str, Any], path: str) -> None:
    containers = c.items(spec.get("containers"), f"{path}.containers", required=True)
    if not containers:
        raise c.fail(f"{path}.containers", "a pod needs at least one container")
    for p, container in containers:
        _check_container(c, container, p)
    for p, container in c.items(spec.get("initContainers"), f"{path}.initContainers"):
        _check_container(c, container, p)
    for key in ("nodeName", "schedulerName", "priorityClassName", "serviceAccountName", "runtimeClassName"):
        c.string(spec.get(key), f"{path}.{key}")
    c.integer(spec.get("priority"), f"{path}.priority")
    c.string(
        spec.get("preemptionPolicy"), f"{path}.preemptionPolicy", choices=("PreemptLowerPriority", "Never")
    )
    c.string(spec.get("restartPolicy"), f"{path}.restartPolicy", choices=("Always", "OnFailure", "Never"))
    c.boolean(spec.get("hostNetwork"), f"{path}.hostNetwork")
    c.integer(spec.get("terminationGracePeriodSeconds"), f"{path}.terminationGracePeriodSeconds", minimum=0)
    c.string_map(spec.get("nodeSelector"), f"{path}.nodeSelector")
    c.resources(spec.get("overhead"), f"{path}.overhead")
    c.mapping(spec.get("affinity"), f"{path}.affinity")
    for p, tol in c.items(spec.get("tolerations"), f"{path}.tolerations"):
        c.string(tol.get("key"), f"{p}.key")
        c.string(tol.get("value"), f"{p}.value")
        c.string(tol.get("operator"), f"{p}.operator", choices=("Exists", "Equal"))
        if tol.get("effect"):
            c.string(tol.get("effect"), f"{p}.effect", choices=_TAINT_EFFECTS)
        c.integer(tol.get("tolerationSeconds"), f"{p}.tolerationSeconds")
    for p, tsc in c.items(spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints"):
        c.integer(tsc.get("maxSkew"), f"{p}.maxSkew", minimum=1)
        c.string(tsc.get("topologyKey"), f"{p}.topologyKey", required=True)
        c.string(
            tsc.get("whenUnsatisfiable"),
            f"{p}.whenUnsatisfiable",
            required=True,
            choices=("DoNotSchedule", "ScheduleAnyway"),
        )
        c.selector(tsc.get("labelSelector"), f"{p}.labelSelector")
        c.integer(tsc.get("minDomains"), f"{p}.minDomains", minimum=1)
    for p, gate in c.items(spec.get("schedulingGates"), f"{path}.schedulingGates"):
        c.string(gate.get("name"), f"{p}.name", required=True)
    for p, volume in c.items(spec.get("volumes"), f"{path}.volumes"):
        c.string(volume.get("name"), f"{p}.name", required=True)


def _check_conditions(c: _Checker, value: Any, path: str) -> None:
    for p, cond in c.items(value, path):
        c.string(cond.get("type"), f"{p}.type", required=True)
        c.string(cond.get("status"), f"{p}.status", required=True, choices=_CONDITION_STATUSES)
        c.time(cond.get("lastTransitionTime"), f"{p}.lastTransitionTime")
        c.time(cond.get("lastProbeTime"), f"{p}.lastProbeTime")
        c.time(cond.get("lastHeartbeatTime"), f"{p}.lastHeartbeatTime")


def _check_pod(c: _Checker, obj: dict[str, Any]) -> None:
    _check_pod_spec(c, c.mapping(obj.get("spec"), "spec", required=True), "spec")
    status = c.mapping(obj.get("status"), "status")
    c.string(status.get("phase"), "status.phase", choices=_POD_PHASES)
    c.string(status.get("nominatedNodeName"), "status.nominatedNodeName")
    c.string(status.get("qosClass"), "status.qosClass", choices=("Guaranteed", "Burstable", "BestEffort"))
    c.time(status.get("startTime"), "status.startTime")
    _check_conditions(c, status.get("conditions"), "status.conditions")
    for key in ("containerStatuses", "initContainerStatuses"):
        for p, cs in c.items(status.get(key), f"status.{key}"):
            c.string(cs.get("name"), f"{p}.name", required=True)
            c.string(cs.get("containerID"), f"{p}.containerID")
            c.boolean(cs.get("ready"), f"{p}.ready")
            c.integer(cs.get("restartCount"), f"{p}.restartCount", minimum=0)


def _check_node(c: _Checker, obj: dict[str, Any]) -> None:
    spec = c.mapping(obj.get("spec"), "spec")
    c.boolean(spec.get("unschedulable"), "spec.unschedulable")
    for p, taint in c.items(spec.get("taints"), "spec.taints"):
        c.string(taint.get("key"), f"{p}.key", required=True)
        c.string(taint.get("value"), f"{p}.value")
        c.string(taint.get("effect"), f"{p}.effect", required=True, choices=_TAINT_EFFECTS)
        c.time(taint.get("timeAdded"), f"{p}.timeAdded")
    status = c.mapping(obj.get("status"), "status")
    c.resources(status.get("capacity"), "status.capacity")
    c.resources(status.get("allocatable"), "status.allocatable")
    _check_conditions(c, status.get("conditions"), "status.conditions")


def _check_aggregated(c: _Checker, value: Any, path: str) -> None:
    for p, agg in c.items(value, path):
        usage = c.mapping(agg.get("usage"), f"{p}.usage")
        for agg_type, rmap in usage.items():
            if agg_type not in _AGGREGATION_TYPES:
                raise c.fail(
                    join_path(f"{p}.usage", agg_type),
                    f"unknown aggregation type {agg_type!r}; expected one of {', '.join(_AGGREGATION_TYPES)}",
                )
            c.resource_map(rmap, join_path(f"{p}.usage", agg_type))
        c.duration(agg.get("duration"), f"{p}.duration")


def _check_node_metric(c: _Checker, obj: dict[str, Any]) -> None:
    spec = c.mapping(obj.get("spec"), "spec")
    policy = c.mapping(spec.get("metricCollectPolicy"), "spec.metricCollectPolicy")
    base = "spec.metricCollectPolicy"
    c.integer(policy.get("aggregateDurationSeconds"), f"{base}.aggregateDurationSeconds", minimum=0)
    c.integer(policy.get("reportIntervalSeconds"), f"{base}.reportIntervalSeconds", minimum=0)
    durations = c.mapping(policy.get("nodeAggregatePolicy"), f"{base}.nodeAggregatePolicy").get("durations")
    if durations is not None:
        if not isinstance(durations, list):
            raise c.fail(
                f"{base}.nodeAggregatePolicy.durations", f"expected a list, got {describe_type(durations)}"
            )
        for i, d in enumerate(durations):
            c.duration(d, f"{base}.nodeAggregatePolicy.durations[{i}]")
    c.string(
        policy.get("nodeMemoryCollectPolicy"),
        f"{base}.nodeMemoryCollectPolicy",
        choices=("usageWithHotPageCache", "usageWithoutPageCache", "usageWithPageCache"),
    )
    status = c.mapping(obj.get("status"), "status")
    c.time(status.get("updateTime"), "status.updateTime")
    info = c.mapping(status.get("nodeMetric"), "status.nodeMetric")
    c.resource_map(info.get("nodeUsage"), "status.nodeMetric.nodeUsage")
    c.resource_map(info.get("systemUsage"), "status.nodeMetric.systemUsage")
    _check_aggregated(c, info.get("aggregatedNodeUsages"), "status.nodeMetric.aggregatedNodeUsages")
    _check_aggregated(c, info.get("aggregatedSystemUsages"), "status.nodeMetric.aggregatedSystemUsages")
    for p, numa in c.items(info.get("numaUsages"), "status.nodeMetric.numaUsages"):
        c.integer(numa.get("numaNodeID"), f"{p}.numaNodeID", minimum=0)
        c.resource_map(numa.get("nodeUsage"), f"{p}.nodeUsage")
        c.resource_map(numa.get("systemUsage"), f"{p}.systemUsage")
    for p, pm in c.items(status.get("podsMetric"), "status.podsMetric"):
        c.string(pm.get("name"), f"{p}.name", required=True)
        c.string(pm.get("namespace"), f"{p}.namespace")
        c.string(pm.get("priority"), f"{p}.priority")
        c.string(pm.get("qos"), f"{p}.qos")
        c.resource_map(pm.get("podUsage"), f"{p}.podUsage")
    for p, app in c.items(status.get("hostApplicationMetric"), "status.hostApplicationMetric"):
        c.string(app.get("name"), f"{p}.name", required=True)
        c.resource_map(app.get("usage"), f"{p}.usage")
    for key in ("prodReclaimableMetric", "prodPeakMetric"):
        c.resource_map(c.mapping(status.get(key), f"status.{key}").get("resource"), f"status.{key}.resource")


def _check_pdb(c: _Checker, obj: dict[str, Any]) -> None:
    spec = c.mapping(obj.get("spec"), "spec")
    c.selector(spec.get("selector"), "spec.selector")
    c.int_or_percent(spec.get("minAvailable"), "spec.minAvailable")
    c.int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable")
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        raise c.fail("spec", "minAvailable and maxUnavailable cannot be both set")
    c.string(
        spec.get("unhealthyPodEvictionPolicy"),
        "spec.unhealthyPodEvictionPolicy",
        choices=("IfHealthyBudget", "AlwaysAllow"),
    )


def _check_workload(c: _Checker, obj: dict[str, Any]) -> None:
    spec = c.mapping(obj.get("spec"), "spec")
    c.integer(spec.get("replicas"), "spec.replicas", minimum=0)
    c.selector(spec.get("selector"), "spec.selector")
    template = c.mapping(spec.get("template"), "spec.template")
    meta = c.mapping(template.get("metadata"), "spec.template.metadata")
    c.string_map(meta.get("labels"), "spec.template.metadata.labels")
    c.string_map(meta.get("annotations"), "spec.template.metadata.annotations")
    if template.get("spec") is not None:
        _check_pod_spec(c, c.mapping(template.get("spec"), "spec.template.spec"), "spec.template.spec")


def _check_pod_migration_job(c: _Checker, obj: dict[str, Any]) -> None:
    spec = c.mapping(obj.get("spec"), "spec", required=True)
    ref = c.mapping(spec.get("podRef"), "spec.podRef", required=True)
    c.string(ref.get("name"), "spec.podRef.name", required=True)
    c.string(ref.get("namespace"), "spec.podRef.namespace")
    c.string(spec.get("mode"), "spec.mode", choices=("ReservationFirst", "EvictDirectly"))
    c.duration(spec.get("ttl"), "spec.ttl")
    c.boolean(spec.get("paused"), "spec.paused")


def _check_topology(c: _Checker, obj: dict[str, Any]) -> None:
    c.strings(obj.get("topologyPolicies"), "topologyPolicies")
    for p, zone in c.items(obj.get("zones"), "zones"):
        c.string(zone.get("name"), f"{p}.name", required=True)
        c.string(zone.get("type"), f"{p}.type")
        for rp, res in c.items(zone.get("resources"), f"{p}.resources"):
            c.string(res.get("name"), f"{rp}.name", required=True)
            for key in ("capacity", "allocatable", "available"):
                c.quantity(res.get(key), f"{rp}.{key}")


def _check_priority_class(c: _Checker, obj: dict[str, Any]) -> None:
    if obj.get("value") is None:
        raise c.fail("value", "required field is missing")
    c.integer(obj.get("value"), "value")
    c.boolean(obj.get("globalDefault"), "globalDefault")
    c.string(obj.get("preemptionPolicy"), "preemptionPolicy", choices=("PreemptLowerPriority", "Never"))


def _check_config_map(c: _Checker, obj: dict[str, Any]) -> None:
    c.string_map(obj.get("data"), "data")
    c.string_map(obj.get("binaryData"), "binaryData")


def _check_mapping_spec(c: _Checker, obj: dict[str, Any]) -> None:
    c.mapping(obj.get("spec"), "spec")
    c.mapping(obj.get("status"), "status")


_KIND_CHECKS: dict[str, Callable[[_Checker, dict[str, Any]], None]] = {
    "Pod": _check_pod,
    "Node": _check_node,
    "NodeMetric": _check_node_metric,
    "PodDisruptionBudget": _check_pdb,
    "Deployment": _check_workload,
    "ReplicaSet": _check_workload,
    "StatefulSet": _check_workload,
    "DaemonSet": _check_workload,
    "Job": _check_workload,
    "PodMigrationJob": _check_pod_migration_job,
    "NodeResourceTopology": _check_topology,
    "PriorityClass": _check_priority_class,
    "ConfigMap": _check_config_map,
}


def builtin_validator(kind: str) -> KindValidator | None:
    """The validator of a custom kind the framework still checks itself (Koordinator's kinds, until their
    plugins contribute them: ADR 0004), as a ``KindValidator`` registered with the kind."""
    check = _KIND_CHECKS.get(kind)
    if check is None:
        return None
    found = check

    def validate(obj: Mapping[str, Any]) -> None:
        try:
            found(_Checker("", None, ""), dict(obj))
        except ManifestError as err:
            raise KindProblem(err.path, err.message) from None

    return validate


def validate_object(
    obj: Any,
    file: str = "<object>",
    doc: int | None = 0,
    prefix: str = "",
    kinds: Mapping[str, KindInfo] | None = None,
) -> dict[str, Any]:
    """Validate one object of a known kind and return it normalised as the cluster stores it.

    ``kinds`` are the kinds known (a cluster's ``KindRegistry``; default: the built-in ones). A kind with a
    validator is checked by it (after metadata and the ``spec``/``status`` shapes); the core kinds by the
    checks below.

    The only normalisation is the namespace: defaulted to ``default`` for namespaced kinds (as
    ``kubectl apply`` does without ``-n``) and dropped for cluster-scoped ones (the API server ignores it).
    """
    known = kinds if kinds is not None else installed_kinds()
    c = _Checker(file, doc, prefix)
    if not isinstance(obj, dict):
        raise c.fail("", f"expected an object (mapping), got {describe_type(obj)}")
    kind = c.string(obj.get("kind"), "kind", required=True)
    api_version = c.string(obj.get("apiVersion"), "apiVersion", required=True)
    assert kind is not None and api_version is not None
    info = known.get(kind)
    if info is None:
        raise c.fail("kind", unknown_kind(kind, [*known, "List"]))
    if not info.accepts_api_version(api_version):
        raise c.fail("apiVersion", f"{kind} is not served as {api_version!r}; use {info.api_version!r}")
    _check_metadata(c, obj, info)
    if info.validator is not None:
        if kind not in _KIND_CHECKS:  # a contributed kind: the shapes every custom resource has first
            _check_mapping_spec(c, obj)
        try:
            info.validator(obj)
        except KindProblem as problem:
            raise c.fail(problem.field, problem.message) from None
    else:
        check = _KIND_CHECKS.get(kind, _check_mapping_spec)
        check(c, obj)
    meta = dict(obj["metadata"])
    if info.namespaced:
        meta["namespace"] = meta.get("namespace") or "default"
    else:
        meta.pop("namespace", None)
    out = dict(obj)
    out["metadata"] = meta
    return out
