"""``--anonymize``: names, namespaces, identifying label/annotation values and images as stable hashes.

One function hashes every identifying string: ``word(s)`` is ``x`` and the first 16 hex digits of
SHA-256(salt, s). Because a node name, the ``kubernetes.io/hostname`` label that repeats it, a PodGroup name
and the gang label naming it, a namespace and the ElasticQuota named after it all go through the same
function, every equality between them survives: references stay consistent without a table of who refers to
whom. The output is a valid DNS-1123 label and label value, so the snapshot still loads. Same input and salt,
same output.

Kept as they are, because they carry meaning rather than identity:

* label and annotation keys; values of keys in Koordinator's domains (``*.koordinator.sh``,
  ``scheduling.sigs.k8s.io``) except those that name objects (``NAME_VALUED``, hashed with ``word``) or hold
  JSON naming objects (``JSON_NAMING``: the names inside are hashed); ``kubernetes.io/os``/``arch``; empty
  values;
* Kubernetes' and Koordinator's own namespaces and priority classes (``KEPT_NAMES``: ``default``,
  ``kube-system``, ``koordinator-system``, ``koord-prod``...), and the components' ConfigMaps but for the
  names in them that refer to hashed objects (``anonymize_config``);
* quantities, numbers, QoS classes, scheduler names, timestamps, uids, container names, NUMA zone names.

Dropped, because they identify and no ``--cluster`` command reads them: container ``command``/``args``/
``env``/``envFrom``, pod and node IPs and addresses, ``providerID``, ``podCIDR(s)``, node ``machineID``/
``systemUUID``/``bootID``, container ids, ``generateName``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from koord_framework.snapshot.anonymize_config import anonymize_config_map

__all__ = ["JSON_NAMING", "KEPT_NAMES", "NAME_VALUED", "Anonymizer"]

Obj = dict[str, Any]

KEPT_NAMES: frozenset[str] = frozenset(
    {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "koordinator-system",
        "koord-prod",
        "koord-mid",
        "koord-batch",
        "koord-free",
        "system-cluster-critical",
        "system-node-critical",
        "koord-scheduler-config",
        "koord-descheduler-config",
        "slo-controller-config",
    }
)
"""Names and namespaces that are Kubernetes' or Koordinator's, not the cluster owner's (``--config-namespace``
is kept too)."""

_SEMANTIC_DOMAINS = ("koordinator.sh", "scheduling.sigs.k8s.io")
_KEPT_VALUE_KEYS = frozenset(
    {"kubernetes.io/os", "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch"}
)

NAME_VALUED: frozenset[str] = frozenset(
    {
        "quota.scheduling.koordinator.sh/name",
        "quota.scheduling.koordinator.sh/parent",
        "quota.scheduling.koordinator.sh/tree-id",
        "gang.scheduling.koordinator.sh/name",
        "pod-group.scheduling.sigs.k8s.io",
        "pod-group.scheduling.sigs.k8s.io/name",
        "scheduling.koordinator.sh/reservation-name",
        "scheduling.koordinator.sh/reservation-node",
        "koordinator.sh/job-created-by",
    }
)
"""Koordinator's label/annotation keys whose value is an object's name: hashed like the name itself."""

JSON_NAMING: frozenset[str] = frozenset(
    {
        "gang.scheduling.koordinator.sh/groups",
        "quota.scheduling.koordinator.sh/namespaces",
        "scheduling.koordinator.sh/reservation-allocated",
        "scheduling.koordinator.sh/reservation-affinity",
        "scheduling.koordinator.sh/scheduling-hint",
        "internal.scheduling.koordinator.sh/scheduling-hint",
        "scheduling.koordinator.sh/bind-gang-group-id",
        "internal.scheduling.koordinator.sh/bind-gang-group-id",
    }
)
"""Koordinator's annotations holding JSON (or ``ns/name`` text) that names objects: those names are hashed."""

_JSON_NAME_FIELDS = frozenset({"name", "namespace", "nodeName", "node", "podName", "podNamespace"})
_JSON_SELECTOR_FIELDS = frozenset({"reservationSelector", "nodeSelector", "matchLabels"})

_POD_SPEC_NAME_FIELDS = ("nodeName", "serviceAccountName", "serviceAccount", "hostname", "subdomain")
_DROPPED_CONTAINER_FIELDS = ("command", "args", "env", "envFrom")
_KEPT_VOLUME_FIELDS = frozenset({"medium", "sizeLimit", "type", "readOnly", "defaultMode", "fsType"})


def _semantic(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in _SEMANTIC_DOMAINS)


class Anonymizer:
    """Rewrites cluster objects in place (``anonymize(obj)``), the same way for the same ``salt``."""

    def __init__(self, salt: str = "", *, kept_names: Iterable[str] = ()) -> None:
        self.salt = salt.encode()
        self.kept = KEPT_NAMES | frozenset(kept_names)
        self._cache: dict[str, str] = {}

    # --- the hash -------------------------------------------------------------------------------------
    def word(self, value: str) -> str:
        """The stable replacement of an identifying string (empty and kept names stay)."""
        if not value or value in self.kept:
            return value
        found = self._cache.get(value)
        if found is None:
            digest = hashlib.sha256(self.salt + b"\0" + value.encode()).hexdigest()[:16]
            found = "x" + digest
            if len(self._cache) < 50_000:  # bounded: a cache, not a copy of the cluster
                self._cache[value] = found
        return found

    def image(self, value: str) -> str:
        return f"image-{self.word(value)}" if value else value

    def label_value(self, key: str, value: str) -> str:
        """A label (or selector) value under ``key``."""
        if not value or key in _KEPT_VALUE_KEYS:
            return value
        if key in NAME_VALUED or not _semantic(key):
            return self.word(value)
        return value

    def annotation_value(self, key: str, value: str) -> str:
        if key in JSON_NAMING:
            return self._json_naming(value)
        return self.label_value(key, value)

    # --- pieces ---------------------------------------------------------------------------------------
    def _json_naming(self, text: str) -> str:
        try:
            data = json.loads(text)
        except ValueError:
            return self._path(text)  # "ns/name" or a bare name
        return json.dumps(self._names_in(data), separators=(",", ":"))

    def _path(self, text: str) -> str:
        return "/".join(self.word(part) for part in text.split("/"))

    def _names_in(self, data: Any, field: str = "") -> Any:
        if isinstance(data, dict):
            if field in _JSON_SELECTOR_FIELDS:
                return {k: self.label_value(k, v) if isinstance(v, str) else v for k, v in data.items()}
            return {k: self._names_in(v, k) for k, v in data.items()}
        if isinstance(data, list):
            return [self._names_in(v, field) for v in data]
        if isinstance(data, str):
            if field in _JSON_NAME_FIELDS:
                return self.word(data)
            if not field:  # a bare string in a list: a name or "ns/name"
                return self._path(data)
        return data

    def _labels(self, labels: Any) -> Any:
        if not isinstance(labels, dict):
            return labels
        return {k: self.label_value(k, v) if isinstance(v, str) else v for k, v in labels.items()}

    def _annotations(self, annotations: Any) -> Any:
        if not isinstance(annotations, dict):
            return annotations
        return {k: self.annotation_value(k, v) if isinstance(v, str) else v for k, v in annotations.items()}

    def selector(self, sel: Any) -> Any:
        """A ``LabelSelector`` (``matchLabels``/``matchExpressions``) or a node selector term."""
        if not isinstance(sel, dict):
            return sel
        out = dict(sel)
        if "matchLabels" in out:
            out["matchLabels"] = self._labels(out["matchLabels"])
        for field in ("matchExpressions", "matchFields"):
            exprs = out.get(field)
            if isinstance(exprs, list):
                out[field] = [self._expression(e, by_name=field == "matchFields") for e in exprs]
        return out

    def _expression(self, expr: Any, *, by_name: bool) -> Any:
        if not isinstance(expr, dict) or not isinstance(expr.get("values"), list):
            return expr
        key = str(expr.get("key") or "")
        rewrite: Callable[[str], str] = self.word if by_name else (lambda v: self.label_value(key, v))
        return {**expr, "values": [rewrite(v) if isinstance(v, str) else v for v in expr["values"]]}

    def metadata(self, meta: Any) -> None:
        if not isinstance(meta, dict):
            return
        for field in ("name", "namespace"):
            if isinstance(meta.get(field), str):
                meta[field] = self.word(meta[field])
        meta.pop("generateName", None)
        if "labels" in meta:
            meta["labels"] = self._labels(meta["labels"])
        if "annotations" in meta:
            meta["annotations"] = self._annotations(meta["annotations"])
        for ref in meta.get("ownerReferences") or ():
            if isinstance(ref, dict) and isinstance(ref.get("name"), str):
                ref["name"] = self.word(ref["name"])

    def _affinity(self, affinity: Any) -> None:
        if not isinstance(affinity, dict):
            return
        node = affinity.get("nodeAffinity")
        if isinstance(node, dict):
            required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
            if isinstance(required, dict) and isinstance(required.get("nodeSelectorTerms"), list):
                required["nodeSelectorTerms"] = [self.selector(t) for t in required["nodeSelectorTerms"]]
            for pref in node.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
                if isinstance(pref, dict):
                    pref["preference"] = self.selector(pref.get("preference"))
        for kind in ("podAffinity", "podAntiAffinity"):
            block = affinity.get(kind)
            if not isinstance(block, dict):
                continue
            for term in block.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
                self._pod_affinity_term(term)
            for weighted in block.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
                if isinstance(weighted, dict):
                    self._pod_affinity_term(weighted.get("podAffinityTerm"))

    def _pod_affinity_term(self, term: Any) -> None:
        if not isinstance(term, dict):
            return
        for field in ("labelSelector", "namespaceSelector"):
            if field in term:
                term[field] = self.selector(term[field])
        if isinstance(term.get("namespaces"), list):
            term["namespaces"] = [self.word(n) if isinstance(n, str) else n for n in term["namespaces"]]

    def _taints(self, items: Any) -> None:
        for item in items or ():
            if isinstance(item, dict) and isinstance(item.get("value"), str):
                item["value"] = self.label_value(str(item.get("key") or ""), item["value"])

    def _container(self, container: Any) -> None:
        if not isinstance(container, dict):
            return
        for field in _DROPPED_CONTAINER_FIELDS:
            container.pop(field, None)
        if isinstance(container.get("image"), str):
            container["image"] = self.image(container["image"])
        for mount in container.get("volumeMounts") or ():
            if isinstance(mount, dict):
                if isinstance(mount.get("name"), str):
                    mount["name"] = self.word(mount["name"])
                for field in ("mountPath", "subPath"):
                    if isinstance(mount.get(field), str):
                        mount[field] = "/" + self.word(mount[field])

    def _volume(self, volume: Any) -> None:
        if not isinstance(volume, dict):
            return
        for key, source in list(volume.items()):
            if key == "name" and isinstance(source, str):
                volume[key] = self.word(source)
            elif isinstance(source, dict):
                volume[key] = {
                    k: v if k in _KEPT_VOLUME_FIELDS or not isinstance(v, str) else self.word(v)
                    for k, v in source.items()
                    if not isinstance(v, (list, dict))
                }

    def pod_spec(self, spec: Any) -> None:
        if not isinstance(spec, dict):
            return
        for field in _POD_SPEC_NAME_FIELDS:
            if isinstance(spec.get(field), str):
                spec[field] = self.word(spec[field])
        if isinstance(spec.get("priorityClassName"), str):
            spec["priorityClassName"] = self.word(spec["priorityClassName"])
        for field in ("containers", "initContainers", "ephemeralContainers"):
            for container in spec.get(field) or ():
                self._container(container)
        for volume in spec.get("volumes") or ():
            self._volume(volume)
        for secret in spec.get("imagePullSecrets") or ():
            if isinstance(secret, dict) and isinstance(secret.get("name"), str):
                secret["name"] = self.word(secret["name"])
        if "nodeSelector" in spec:
            spec["nodeSelector"] = self._labels(spec["nodeSelector"])
        self._affinity(spec.get("affinity"))
        self._taints(spec.get("tolerations"))
        for constraint in spec.get("topologySpreadConstraints") or ():
            if isinstance(constraint, dict) and "labelSelector" in constraint:
                constraint["labelSelector"] = self.selector(constraint["labelSelector"])
        spec.pop("hostAliases", None)

    def pod_template(self, template: Any) -> None:
        if isinstance(template, dict):
            self.metadata(template.get("metadata"))
            self.pod_spec(template.get("spec"))

    def _pod_status(self, status: Any) -> None:
        if not isinstance(status, dict):
            return
        for field in ("hostIP", "hostIPs", "podIP", "podIPs"):
            status.pop(field, None)
        if isinstance(status.get("nominatedNodeName"), str):
            status["nominatedNodeName"] = self.word(status["nominatedNodeName"])
        for field in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
            for cs in status.get(field) or ():
                if isinstance(cs, dict):
                    cs.pop("imageID", None)
                    cs.pop("containerID", None)
                    if isinstance(cs.get("image"), str):
                        cs["image"] = self.image(cs["image"])

    def _node(self, obj: Obj) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            for field in ("providerID", "podCIDR", "podCIDRs", "externalID"):
                spec.pop(field, None)
            self._taints(spec.get("taints"))
        status = obj.get("status")
        if isinstance(status, dict):
            status.pop("addresses", None)
            info = status.get("nodeInfo")
            if isinstance(info, dict):
                for field in ("machineID", "systemUUID", "bootID"):
                    info.pop(field, None)
            for image in status.get("images") or ():
                if isinstance(image, dict) and isinstance(image.get("names"), list):
                    image["names"] = [self.image(n) for n in image["names"] if isinstance(n, str)]
            if isinstance(status.get("volumesInUse"), list):
                status.pop("volumesInUse")
                status.pop("volumesAttached", None)

    def _refs(self, data: Any, field: str = "") -> Any:
        """Object references anywhere below a spec/status (``podRef``, ``reservationRef``, ``owners``...):
        their ``name``/``namespace`` and every ``nodeName`` are hashed."""
        if isinstance(data, dict):
            for key, value in list(data.items()):
                if key == "template":
                    self.pod_template(value)
                elif key in ("selector", "labelSelector", "namespaceSelector", "podSelector"):
                    data[key] = self.selector(value)
                elif isinstance(value, str) and (
                    key in ("nodeName", "node") or (key in ("name", "namespace") and _is_ref(field))
                ):
                    data[key] = self.word(value)
                else:
                    self._refs(value, key)
        elif isinstance(data, list):
            for item in data:
                self._refs(item, field)
        return data

    # --- objects --------------------------------------------------------------------------------------
    def anonymize(self, obj: Obj) -> Obj:
        """``obj`` rewritten in place (and returned)."""
        kind = obj.get("kind")
        if kind == "ConfigMap":
            # the components' configuration: kept but for the names it shares with hashed objects
            return anonymize_config_map(self, obj)
        self.metadata(obj.get("metadata"))
        spec, status = obj.get("spec"), obj.get("status")
        if kind == "Pod":
            self.pod_spec(spec)
            self._pod_status(status)
        elif kind == "Node":
            self._node(obj)
        elif kind == "NodeMetric":
            for pod in (status or {}).get("podsMetric") or () if isinstance(status, dict) else ():
                if isinstance(pod, dict):
                    for field in ("name", "namespace"):
                        if isinstance(pod.get(field), str):
                            pod[field] = self.word(pod[field])
        elif kind == "Device":
            for device in (spec or {}).get("devices") or () if isinstance(spec, dict) else ():
                if isinstance(device, dict) and isinstance(device.get("uuid"), str):
                    device["uuid"] = self.word(device["uuid"])
        elif kind == "PodDisruptionBudget":
            if isinstance(spec, dict) and "selector" in spec:
                spec["selector"] = self.selector(spec["selector"])
            if isinstance(status, dict) and isinstance(status.get("disruptedPods"), dict):
                status["disruptedPods"] = {self.word(k): v for k, v in status["disruptedPods"].items()}
        elif kind == "PriorityClass":
            pass  # the name is all there is (kept when it is one of Kubernetes'/Koordinator's)
        elif kind == "ClusterColocationProfile":
            if isinstance(spec, dict):
                for field in ("namespaceSelector", "selector"):
                    if field in spec:
                        spec[field] = self.selector(spec[field])
                if "labels" in spec:
                    spec["labels"] = self._labels(spec["labels"])
                if "annotations" in spec:
                    spec["annotations"] = self._annotations(spec["annotations"])
                if isinstance(spec.get("priorityClassName"), str):
                    spec["priorityClassName"] = self.word(spec["priorityClassName"])
        elif kind in ("NodeSLO", "NodeResourceTopology", "ElasticQuota", "PodGroup"):
            pass  # named after their node / by metadata only: nothing else identifies
        else:  # workloads, Reservation, PodMigrationJob and contributed kinds
            if isinstance(spec, dict):
                if isinstance(spec.get("serviceName"), str):
                    spec["serviceName"] = self.word(spec["serviceName"])
                self._refs(spec)
            if isinstance(status, dict):
                self._refs(status)
        return obj


def _is_ref(field: str) -> bool:
    lowered = field.lower()
    return lowered.endswith(("ref", "refs", "owners", "object", "controller")) or lowered in (
        "currentowners",
        "preemptedpodsref",
    )
