"""SchedulingHint (Koordinator): a pod's hint annotation restricts and orders the candidate nodes.

The annotation ``internal.scheduling.koordinator.sh/scheduling-hint`` (or the deprecated
``scheduling.koordinator.sh/scheduling-hint``) holds ``{"nodeNames": [...], "preferredNodeNames": [...],
"extensions": {...}}``. Koordinator parses it in a BeforePreFilter transformer and stores it in the cycle
state under ``SchedulingHintState`` for other plugins; PreFilter then narrows the nodes to ``nodeNames``.
This framework has no transformer stage, so PreFilter does both (profiles list SchedulingHint first, as the
shipped ConfigMap does). ``prefer_nodes`` is Koordinator's PreferNodes: the preferred nodes (at most
``maxHintNodes``) that survived PreFilter, or Skip.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.events import BAD_ANNOTATIONS
from koord_framework.scheduler.interface import (
    CycleState,
    Handle,
    NodeInfo,
    PreFilterPlugin,
    PreFilterResult,
    SchedulerPlugin,
)
from koord_framework.scheduler.status import Status
from koord_plugin_kubernetes.args import SchedulingHintArgs

ANNOTATION_SCHEDULING_HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
DEPRECATED_ANNOTATION_SCHEDULING_HINT = "scheduling.koordinator.sh/scheduling-hint"
STATE_KEY = "SchedulingHintState"


@dataclass(frozen=True, slots=True)
class Hint:
    """The ``scheduling-hint`` annotation of a pod, parsed."""

    node_names: tuple[str, ...] = ()
    preferred_node_names: tuple[str, ...] = ()
    extensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SchedulingHintState:
    """The hint's nodes for this cycle (CycleState)."""

    pre_filter_nodes: list[str]
    preferred_nodes: list[str]
    extensions: Mapping[str, Any]

    def clone(self) -> SchedulingHintState:
        return SchedulingHintState(self.pre_filter_nodes, self.preferred_nodes, self.extensions)


def _names(doc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: cannot unmarshal {type(value).__name__} into []string")
    return tuple(value)


def get_scheduling_hint(pod: PodInfo) -> Hint | None:
    """``extension.GetSchedulingHint``: the current annotation wins; an empty value counts as absent."""
    text = pod.annotations.get(ANNOTATION_SCHEDULING_HINT) or pod.annotations.get(
        DEPRECATED_ANNOTATION_SCHEDULING_HINT
    )
    if not text:
        return None
    doc = json.loads(text)
    if doc is None:
        return Hint()
    if not isinstance(doc, dict):
        raise ValueError(f"cannot unmarshal {type(doc).__name__} into SchedulingHint")
    ext = doc.get("extensions")
    if ext is not None and not isinstance(ext, dict):
        raise ValueError("extensions: cannot unmarshal into map[string]interface{}")
    return Hint(_names(doc, "nodeNames"), _names(doc, "preferredNodeNames"), ext or {})


class SchedulingHint(SchedulerPlugin[SchedulingHintArgs], PreFilterPlugin):
    name = "SchedulingHint"
    Args = SchedulingHintArgs

    def __init__(self, args: SchedulingHintArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        self.max_hint_nodes = args.max_hint_nodes

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        try:
            hint = get_scheduling_hint(pod)
        except ValueError as err:  # json.JSONDecodeError is a ValueError
            annotation = (
                ANNOTATION_SCHEDULING_HINT
                if pod.annotations.get(ANNOTATION_SCHEDULING_HINT)
                else DEPRECATED_ANNOTATION_SCHEDULING_HINT
            )
            # The pod fails every attempt (its FailedScheduling event says why); the log says it once.
            BAD_ANNOTATIONS.report("pod", pod.key, pod.uid, annotation, pod.annotations[annotation], err)
            return None, Status.as_error(f"annotation {annotation}: {err}")
        if hint is not None:
            state.write(
                STATE_KEY,
                SchedulingHintState(
                    list(hint.node_names), list(hint.preferred_node_names), dict(hint.extensions)
                ),
            )
        hint_state: SchedulingHintState | None = state.get(STATE_KEY)
        if hint_state is None or not hint_state.pre_filter_nodes:
            return None, Status.success()
        return PreFilterResult(set(hint_state.pre_filter_nodes)), Status.success()

    def prefer_nodes(
        self, state: CycleState, pod: PodInfo, result: PreFilterResult | None
    ) -> tuple[list[str], Status]:
        hint_state: SchedulingHintState | None = state.get(STATE_KEY)
        if hint_state is None or not hint_state.preferred_nodes:
            return [], Status.skip()
        preferred = hint_state.preferred_nodes[: self.max_hint_nodes]
        if result is not None and result.node_names is not None:
            kept = [n for n in preferred if n in result.node_names]
            if not kept:
                return [], Status.skip()
            return kept, Status.success()
        return list(preferred), Status.success()
