"""``NodeResourceAmplificationPlugin``: the node-status mutating webhook that amplifies the node's allocatable
cpu and memory by ``node.koordinator.sh/resource-amplification-ratio`` (Koordinator's
``pkg/webhook/node/plugins/resourceamplification``, served at ``/mutate-node-status``, gate
``NodeMutatingWebhook``, off by default).

On an UPDATE of ``nodes/status`` (kubelet's status reports):

* no ratio annotation: ``node.koordinator.sh/raw-allocatable`` is removed (the feature was turned off);
* otherwise the raw (un-amplified) cpu / memory allocatable is recorded in ``raw-allocatable`` when it is
  absent or when the update changed them (kubelet's new values), else read back from it;
* each of cpu / memory with a ratio above 1 and a raw value becomes ``raw * ratio``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from koord_framework.api.constants import (
    ANNOTATION_NODE_AMPLIFICATION_RATIO,
    ANNOTATION_NODE_RAW_ALLOCATABLE,
)
from koord_framework.api.resources import format_resource_list, parse_resource_list
from koord_framework.manager.webhook.admission import AdmissionHandler, AdmissionRequest, FailurePolicy
from koord_framework.plugin import NoArgs

__all__ = ["NodeResourceAmplificationPlugin"]

SUPPORTED: Final = ("cpu", "memory")
"""Only cpu and memory are amplified."""


def _supported(allocatable: Mapping[str, Any] | None, where: str) -> dict[str, int]:
    parsed = parse_resource_list(dict(allocatable or {}), path=where)
    return {k: v for k, v in parsed.items() if k in SUPPORTED and k in (allocatable or {})}


class NodeResourceAmplificationPlugin(AdmissionHandler[NoArgs]):
    """Amplifies a node's allocatable cpu / memory by its resource amplification ratios."""

    name = "NodeResourceAmplificationPlugin"
    Args = NoArgs
    path: ClassVar[str] = "/mutate-node-status"
    mutating: ClassVar[bool] = True
    failure_policy: ClassVar[FailurePolicy] = "Ignore"  # failurePolicy=ignore in the marker
    order: ClassVar[int] = 10
    resources: ClassVar[tuple[str, ...]] = ("nodes",)
    gate: ClassVar[str] = "NodeMutatingWebhook"

    def handles(self, request: AdmissionRequest) -> bool:
        """Only ``nodes/status`` (``shouldIgnoreIfNotNodeStatus``)."""
        return request.resource.resource == "nodes" and request.sub_resource == "status"

    def admit(self, request: AdmissionRequest, obj: dict[str, Any]) -> None:
        if request.operation != "UPDATE":
            return
        self.amplify(dict(request.old_object) if request.old_object is not None else None, obj)

    def amplify(self, old: Mapping[str, Any] | None, node: dict[str, Any]) -> None:
        """``handleUpdate``: mutate ``node`` in place; ``ValueError`` naming the node and annotation for
        annotations it cannot read."""
        meta = node.setdefault("metadata", {})
        name = meta.get("name", "")
        annotations = meta.get("annotations") or {}
        if not annotations.get(ANNOTATION_NODE_AMPLIFICATION_RATIO):
            if ANNOTATION_NODE_RAW_ALLOCATABLE in annotations:
                meta["annotations"] = {
                    k: v for k, v in annotations.items() if k != ANNOTATION_NODE_RAW_ALLOCATABLE
                }
            return
        status = node.get("status") or {}
        allocatable = status.get("allocatable")
        if allocatable is None:
            return
        where = f"node {name}"
        current = _supported(allocatable, f"{where}.status.allocatable")
        if ANNOTATION_NODE_RAW_ALLOCATABLE not in annotations or self._changed(old, current, where):
            original = current
            if original:
                meta["annotations"] = {
                    **annotations,
                    ANNOTATION_NODE_RAW_ALLOCATABLE: json.dumps(
                        format_resource_list(original), separators=(",", ":"), sort_keys=True
                    ),
                }
        else:
            original = self._raw(annotations, where)
        ratios = self._ratios(annotations, where)
        new_allocatable = dict(allocatable)
        for resource in SUPPORTED:
            ratio = ratios.get(resource)
            if ratio is None or ratio <= 1 or resource not in original:
                continue
            # util.MultiplyMilliQuant: milli-units times the ratio, truncated
            milli = int(original[resource] * (1 if resource == "cpu" else 1000) * ratio)
            value = milli if resource == "cpu" else -(-milli // 1000)  # memory: Value() rounds up
            new_allocatable[resource] = format_resource_list({resource: value})[resource]
        node["status"] = {**status, "allocatable": new_allocatable}

    @staticmethod
    def _changed(old: Mapping[str, Any] | None, current: Mapping[str, int], where: str) -> bool:
        """``isSupportedResourceChanged``: the update changed the cpu / memory allocatable."""
        if old is None:
            return False
        before = _supported((old.get("status") or {}).get("allocatable"), f"{where} (old).status.allocatable")
        return before != dict(current)

    @staticmethod
    def _raw(annotations: Mapping[str, str], where: str) -> dict[str, int]:
        text = annotations[ANNOTATION_NODE_RAW_ALLOCATABLE]
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{where}: annotation {ANNOTATION_NODE_RAW_ALLOCATABLE}: not JSON: {exc}"
            ) from exc
        if not isinstance(data, Mapping):
            raise ValueError(f"{where}: annotation {ANNOTATION_NODE_RAW_ALLOCATABLE}: must be an object")
        return parse_resource_list(dict(data), path=f"{where}: annotation {ANNOTATION_NODE_RAW_ALLOCATABLE}")

    @staticmethod
    def _ratios(annotations: Mapping[str, str], where: str) -> dict[str, float]:
        text = annotations[ANNOTATION_NODE_AMPLIFICATION_RATIO]
        what = f"{where}: annotation {ANNOTATION_NODE_AMPLIFICATION_RATIO}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{what}: not JSON: {exc}") from exc
        if not isinstance(data, Mapping):
            raise ValueError(f"{what}: must be an object")
        out: dict[str, float] = {}
        for k, v in data.items():
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise ValueError(f"{what}: ratio of {k} must be a number")
            out[str(k)] = float(v)
        return out
