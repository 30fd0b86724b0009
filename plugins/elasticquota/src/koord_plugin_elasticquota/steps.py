"""Drive a ``GroupQuotaManager`` with the step lists of the spec's ElasticQuota vectors.

A vector's ``inputs.steps`` is a list of ``{"op": ..., ...}`` re-expressing Koordinator's Go test calls;
``run_steps`` applies them in order and checks every inline expectation, raising ``StepFailure`` (with the
step's index and what differed) at the first mismatch. Ops:

* ``UpdateClusterTotalResource`` ``{delta}`` — add node allocatable to the tree total;
* ``AddQuota`` / ``UpdateQuota`` ``{quota}`` — an ElasticQuota manifest (UpdateQuota); ``DeleteQuota``
  ``{quota}`` (a manifest or a name);
* ``UpdateGroupDeltaRequest`` / ``UpdateGroupDeltaUsed`` ``{quota, delta[, nonPreemptible]}`` — add to the
  quota's own request/used sum and propagate upward;
* ``OnPodAdd`` / ``OnPodDelete`` / ``ReservePod`` / ``UnreservePod`` ``{quota, pod}``; ``OnPodUpdate``
  ``{quota, oldQuota?, pod, oldPod}``;
* ``RefreshRuntime`` ``{quota[, expect][, expectCPUCores]}`` — the runtime masked to max names;
* ``Expect<Field>`` ``{quota, expect}`` — a CalculateInfo field (``ExpectAutoScaleMin``, ``ExpectRequest``,
  ``ExpectUsed``, ``ExpectChildRequest``, ``ExpectRuntime``, ``ExpectMin``, ``ExpectMax``,
  ``ExpectSharedWeight``, ``ExpectNonPreemptibleRequest``, ``ExpectNonPreemptibleUsed``, ...).

Quantities are Kubernetes quantity strings (cpu in cores), compared in canonical units.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import parse_resource_list
from koord_plugin_elasticquota.manager import GroupQuotaManager

__all__ = ["StepFailure", "run_step", "run_steps"]


class StepFailure(AssertionError):
    pass


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _pod(raw: Mapping[str, Any]) -> PodInfo:
    return PodInfo.from_manifest(raw)


def _quota_name(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    return str((raw.get("metadata") or {}).get("name") or "")


def _same(got: Mapping[str, int], expect: Mapping[str, Any]) -> bool:
    want = parse_resource_list(expect)
    # Zero entries are equal to absent ones (Go's quotav1.Equals on lists built by Add/Subtract keeps zeros).
    return {k: v for k, v in got.items() if v} == {k: v for k, v in want.items() if v}


def run_step(mgr: GroupQuotaManager, step: Mapping[str, Any], index: int = 0) -> None:
    op = str(step.get("op") or "")
    quota = step.get("quota")
    if op == "UpdateClusterTotalResource":
        mgr.update_cluster_total_resource(parse_resource_list(step["delta"]))
    elif op in ("AddQuota", "UpdateQuota"):
        mgr.update_quota(step["quota"])
    elif op == "DeleteQuota":
        mgr.delete_quota(_quota_name(quota))
    elif op == "UpdateGroupDeltaRequest":
        mgr.add_pod_request_delta(
            _quota_name(quota),
            parse_resource_list(step["delta"]),
            parse_resource_list(step.get("nonPreemptible")),
        )
    elif op == "UpdateGroupDeltaUsed":
        mgr.add_used_delta(
            _quota_name(quota),
            parse_resource_list(step["delta"]),
            parse_resource_list(step.get("nonPreemptible")),
        )
    elif op == "OnPodAdd":
        mgr.on_pod_add(_quota_name(quota), _pod(step["pod"]))
    elif op == "OnPodDelete":
        mgr.on_pod_delete(_quota_name(quota), _pod(step["pod"]))
    elif op == "OnPodUpdate":
        old_quota = _quota_name(step.get("oldQuota") or quota)
        mgr.on_pod_update(_quota_name(quota), old_quota, _pod(step["pod"]), _pod(step["oldPod"]))
    elif op == "ReservePod":
        mgr.reserve_pod(_quota_name(quota), _pod(step["pod"]))
    elif op == "UnreservePod":
        mgr.unreserve_pod(_quota_name(quota), _pod(step["pod"]))
    elif op == "RefreshRuntime":
        runtime = mgr.refresh_runtime(_quota_name(quota)) or {}
        if "expect" in step and not _same(runtime, step["expect"]):
            raise StepFailure(f"step {index} RefreshRuntime({quota}): got {runtime}, want {step['expect']}")
        if "expectCPUCores" in step and runtime.get("cpu", 0) != int(step["expectCPUCores"]) * 1000:
            raise StepFailure(
                f"step {index} RefreshRuntime({quota}): got cpu {runtime.get('cpu', 0)}m, "
                f"want {step['expectCPUCores']} cores"
            )
    elif op.startswith("Expect"):
        info = mgr.get_quota_info(_quota_name(quota))
        if info is None:
            raise StepFailure(f"step {index} {op}: no quota {quota!r}")
        field = _snake(op[len("Expect") :])
        got = getattr(info.calc, field, None)
        if not isinstance(got, dict):
            raise StepFailure(f"step {index}: unknown field in op {op!r}")
        if not _same(got, step["expect"]):
            raise StepFailure(f"step {index} {op}({quota}): got {got}, want {step['expect']}")
    else:
        raise StepFailure(f"step {index}: unknown op {op!r}")


def run_steps(mgr: GroupQuotaManager, steps: Iterable[Mapping[str, Any]]) -> None:
    for i, step in enumerate(steps):
        run_step(mgr, step, i)
