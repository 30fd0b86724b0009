"""Koordinator v1.3-v1.5 scheduler configurations (``kubescheduler.config.k8s.io/v1beta2`` and ``v1beta3``),
converted to ``v1`` as kube-scheduler converts an older version it still reads.

What changes, each said in a note the commands print:

- ``apiVersion`` (of the configuration and of every ``pluginConfig`` args) becomes ``v1``; the fields are the
  same in the three versions for everything koord reads.
- v1beta2's own default plugin set: the score weights of kube-scheduler 1.22-1.24 (TaintToleration,
  NodeAffinity and InterPodAffinity 1; PodTopologySpread 2) instead of v1beta3/v1's (3, 2, 2, 2).
  SelectorSpread, in v1beta2's defaults, has no koord plugin and is a skipped default as in v1.
- Koordinator up to v1.6 sorted the queue with ``Coscheduling`` (its ``Less``); since v1.7 Coscheduling has
  no QueueSort and Koordinator's ConfigMap enables ``PrioritySort`` there, so a ``queueSort`` naming
  Coscheduling names PrioritySort.
- ``BatchResourceFit``, named by v1.3/v1.4's ConfigMap but registered by no koord-scheduler release (the
  batch resources are fitted by NodeResourcesFit with their names in its scoring resources), is dropped.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["LEGACY_SCHEDULER_VERSIONS", "convert_scheduler"]

GROUP = "kubescheduler.config.k8s.io"
V1 = f"{GROUP}/v1"
LEGACY_SCHEDULER_VERSIONS = (f"{GROUP}/v1beta2", f"{GROUP}/v1beta3")

V1BETA2_SCORE_WEIGHTS: dict[str, int] = {
    "TaintToleration": 1,
    "NodeAffinity": 1,
    "InterPodAffinity": 1,
    "PodTopologySpread": 2,
}
"""kube-scheduler v1beta2's default score weights where they differ from v1's."""
DROPPED = {
    "BatchResourceFit": "registered by no koord-scheduler release; NodeResourcesFit fits batch resources"
}


def convert_scheduler(data: Any) -> tuple[Any, list[str]]:
    """``data`` converted to v1 when it is a v1beta2/v1beta3 configuration, with one note per change; other
    data is returned as is (and validated as it is)."""
    if not isinstance(data, dict) or data.get("apiVersion") not in LEGACY_SCHEDULER_VERSIONS:
        return data, []
    old = str(data["apiVersion"])
    out = copy.deepcopy(data)
    out["apiVersion"] = V1
    notes = [f"converted from {old} to {V1}, as kube-scheduler reads an older version"]
    profiles = out.get("profiles")
    for i, profile in enumerate(profiles if isinstance(profiles, list) else []):
        if isinstance(profile, dict):
            _convert_profile(profile, i, old, notes)
    return out, notes


def v1beta2(data: Any) -> bool:
    return isinstance(data, dict) and data.get("apiVersion") == LEGACY_SCHEDULER_VERSIONS[0]


def _convert_profile(profile: dict[str, Any], i: int, old: str, notes: list[str]) -> None:
    for entry in profile.get("pluginConfig") or []:
        args = entry.get("args") if isinstance(entry, dict) else None
        if isinstance(args, dict) and args.get("apiVersion") == old:
            args["apiVersion"] = V1
    plugins = profile.get("plugins")
    if not isinstance(plugins, dict):
        return
    queue_sort = plugins.get("queueSort")
    if isinstance(queue_sort, dict) and isinstance(queue_sort.get("enabled"), list):
        for ref in queue_sort["enabled"]:
            if isinstance(ref, dict) and ref.get("name") == "Coscheduling":
                ref["name"] = "PrioritySort"
                notes.append(
                    f"profiles[{i}].plugins.queueSort: Coscheduling -> PrioritySort (Coscheduling has no"
                    " QueueSort since Koordinator v1.7; PrioritySort is what its ConfigMap enables)"
                )
    for key, point in plugins.items():
        if not isinstance(point, dict) or not isinstance(point.get("enabled"), list):
            continue
        kept = []
        for ref in point["enabled"]:
            name = ref.get("name") if isinstance(ref, dict) else None
            if name in DROPPED:
                notes.append(f"profiles[{i}].plugins.{key}: {name} dropped ({DROPPED[name]})")
                continue
            kept.append(ref)
        point["enabled"] = kept
