"""The node webhooks (Koordinator's ``pkg/webhook/node``; alpha gates, off by default).

* ``/validate-node`` (``NodeValidatingWebhook``), plugin ``SLOControllerConfigConflict``: a node whose labels
  change so that two node strategies of one key of ``slo-controller-config`` select it is refused on UPDATE
  (on CREATE it is only logged, as Koordinator does);
* ``/mutate-node-status`` (``NodeMutatingWebhook``), plugin ``NodeResourceAmplificationPlugin``: on a status
  UPDATE of a node annotated ``node.koordinator.sh/resource-amplification-ratio``, cpu and memory
  allocatable become the raw allocatable (kept in ``node.koordinator.sh/raw-allocatable``, refreshed when
  the kubelet changes them) times each ratio above 1; without the ratio annotation the raw annotation is
  dropped.

Koordinator has both in its core webhook, so they live in the framework beside the ConfigMap check whose
selector logic the first one shares.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from koord_framework.api.constants import ANNOTATION_NODE_AMPLIFICATION_RATIO, ANNOTATION_NODE_RAW_ALLOCATABLE
from koord_framework.api.quantity import Quantity, QuantityError
from koord_framework.manager.sloconfig import CONFIG_MAP_NAME, DEFAULT_CONFIG_NAMESPACE
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, Denied
from koord_framework.manager.webhook.configmap import existing_node_conflict
from koord_framework.plugin import NoArgs, PluginArgs

__all__ = ["NodeResourceAmplification", "NodeSLOConfigConflict", "amplify_node", "supported_changed"]

log = logging.getLogger("koord.manager.webhook")

SUPPORTED_RESOURCES = ("cpu", "memory")
"""The resources amplified (Koordinator's ``supportedResources``)."""


class NodeSLOConfigConflictArgs(PluginArgs):
    """Args of the node label check."""

    config_namespace: str = DEFAULT_CONFIG_NAMESPACE
    """Namespace of ``slo-controller-config`` (Koordinator's ``sloconfig.ConfigNameSpace``)."""


class NodeSLOConfigConflict(AdmissionHandler[NodeSLOConfigConflictArgs]):
    """Refuses node label changes that make two node strategies of one ``slo-controller-config`` key
    select the node."""

    name = "SLOControllerConfigConflict"
    Args = NodeSLOConfigConflictArgs
    path: ClassVar[str] = "/validate-node"
    resources: ClassVar[tuple[str, ...]] = ("nodes",)
    watches: ClassVar[tuple[str, ...]] = ("ConfigMap",)
    gate: ClassVar[str] = "NodeValidatingWebhook"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation not in ("CREATE", "UPDATE"):
            return
        old = request.old_object if request.operation == "UPDATE" else None
        if old is not None and _labels(old) == _labels(obj):
            return  # Koordinator's needCheck: only a label change can create a conflict
        config = self.lister.get("ConfigMap", CONFIG_MAP_NAME, self.args.config_namespace)
        if config is None:
            log.error("node webhook: %s/%s not found", self.args.config_namespace, CONFIG_MAP_NAME)
            return
        data = config.get("data") or {}
        try:
            existing_node_conflict(data if isinstance(data, Mapping) else {}, obj)
        except Denied as exc:
            if request.operation == "UPDATE":
                raise
            log.error("config conflict for %s config, err: %s", CONFIG_MAP_NAME, exc.reason)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _allocatable(node: Mapping[str, Any] | None) -> dict[str, Quantity]:
    """The node's supported allocatable, parsed (``ValueError`` naming the field)."""
    status = (node or {}).get("status") or {}
    alloc = status.get("allocatable") if isinstance(status, Mapping) else None
    out: dict[str, Quantity] = {}
    if not isinstance(alloc, Mapping):
        return out
    for name in SUPPORTED_RESOURCES:
        if name in alloc:
            try:
                out[name] = Quantity.parse(alloc[name])
            except (QuantityError, TypeError) as exc:
                raise ValueError(f"status.allocatable[{name}]: {exc}") from None
    return out


def supported_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """``isSupportedResourceChanged``: cpu / memory allocatable added, removed or changed in value."""
    if old is None or new is None:
        return False
    a, b = _allocatable(old), _allocatable(new)
    return a.keys() != b.keys() or any(a[k] != b[k] for k in a)


def _ratios(text: str) -> dict[str, float]:
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise Denied(f"failed to unmarshal node resource amplification ratio: {exc}", 500) from None
    if not isinstance(raw, Mapping) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in raw.values()
    ):
        raise Denied(
            f"failed to unmarshal node resource amplification ratio: {text!r} is not an object of numbers",
            500,
        )
    return {str(k): float(v) for k, v in raw.items()}


def _raw_allocatable(text: str) -> dict[str, Quantity]:
    try:
        raw = json.loads(text)
        if not isinstance(raw, Mapping):
            raise ValueError("not an object")
        return {str(k): Quantity.parse(v) for k, v in raw.items()}
    except (ValueError, TypeError) as exc:
        raise Denied(f"failed to unmarshal node raw allocatable: {exc}", 500) from None


def amplify_node(node: dict[str, Any], old: Mapping[str, Any] | None) -> None:
    """``handleUpdate`` on ``node`` (in place)."""
    meta = node.setdefault("metadata", {})
    annotations = meta.get("annotations") or {}
    if not annotations.get(ANNOTATION_NODE_AMPLIFICATION_RATIO):
        # The feature is off for the node: the saved raw allocatable goes.
        if ANNOTATION_NODE_RAW_ALLOCATABLE in annotations:
            del meta["annotations"][ANNOTATION_NODE_RAW_ALLOCATABLE]
        return
    status = node.get("status") or {}
    allocatable = status.get("allocatable") if isinstance(status, Mapping) else None
    if not isinstance(allocatable, dict):
        return
    if ANNOTATION_NODE_RAW_ALLOCATABLE not in annotations or supported_changed(old, node):
        # The kubelet set (or changed) allocatable: that is the raw value from now on.
        original = _allocatable(node)
        if original:
            meta["annotations"] = {
                **annotations,
                ANNOTATION_NODE_RAW_ALLOCATABLE: json.dumps(
                    {k: str(v) for k, v in sorted(original.items())}, separators=(",", ":")
                ),
            }
    else:
        original = _raw_allocatable(annotations[ANNOTATION_NODE_RAW_ALLOCATABLE])
    ratios = _ratios(annotations[ANNOTATION_NODE_AMPLIFICATION_RATIO])
    for name in SUPPORTED_RESOURCES:
        ratio = ratios.get(name)
        if ratio is None or ratio <= 1 or name not in original:
            continue
        quantity = original[name]
        # MultiplyMilliQuant: milli value times the ratio, truncated, in the original's format.
        milli = int(float(quantity.milli_value()) * ratio)
        allocatable[name] = str(Quantity.from_nano(milli * 1_000_000, quantity.format))


class NodeResourceAmplification(AdmissionHandler[NoArgs]):
    """Amplifies a node's cpu / memory allocatable by its resource-amplification-ratio annotation."""

    name = "NodeResourceAmplificationPlugin"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-node-status"
    mutating: ClassVar[bool] = True
    resources: ClassVar[tuple[str, ...]] = ("nodes",)
    gate: ClassVar[str] = "NodeMutatingWebhook"

    def handles(self, request: AdmissionRequest) -> bool:
        # Koordinator's shouldIgnoreIfNotNodeStatus: only the status subresource of nodes.
        return request.resource.resource == "nodes" and request.sub_resource == "status"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation != "UPDATE":
            return
        amplify_node(obj, request.old_object)
