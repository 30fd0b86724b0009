"""Controllers ElasticQuota runs in the scheduler process (``controller.go``, ``quota_overuse_revoke.go``).

* ``QuotaStatusWriter`` — every second, writes each ElasticQuota's runtime, request, child-request,
  guaranteed, allocated and non-preemptible request/used as annotations (JSON ResourceLists) and its used as
  ``status.used``, only when they changed (zeros ignored in the comparison, as upstream); every 10 s it
  refreshes the runtime of every leaf quota, so that runtimes follow demand without pods being scheduled.
* ``QuotaOverUsedRevokeController`` — only with ``monitorAllQuotas`` and ``enableRuntimeQuota``: a quota whose
  used has stayed above its runtime for longer than ``delayEvictTime`` gives pods back, least important
  first (non-preemptible pods never), the fewest that bring it within runtime; they are evicted through the
  cluster port with a recorded reason.

Neither keeps state that a restart would lose: both read the quota manager, which the plugin rebuilds from
the ElasticQuota objects and the pods (the over-use timers restart, as upstream's do).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from koord_framework.api.objects import PodInfo
from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import (
    add,
    format_resource_list,
    mask,
    parse_resource_list,
    subtract,
    within,
)
from koord_framework.errors import ClusterError, NotFoundError
from koord_framework.scheduler.interface import BackgroundController
from koord_plugin_elasticquota.manager import GroupQuotaManager, quota_pod_requests
from koord_plugin_elasticquota.preempt import importance_key
from koord_plugin_elasticquota.quota_object import (
    ANNOTATION_ALLOCATED,
    ANNOTATION_CHILD_REQUEST,
    ANNOTATION_GUARANTEED,
    ANNOTATION_NON_PREEMPTIBLE_REQUEST,
    ANNOTATION_NON_PREEMPTIBLE_USED,
    ANNOTATION_REQUEST,
    ANNOTATION_RUNTIME,
    LABEL_QUOTA_IS_PARENT,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    is_pod_non_preemptible,
)

if TYPE_CHECKING:
    from koord_plugin_elasticquota.plugin import ElasticQuota

__all__ = [
    "QuotaControllers",
    "QuotaOverUsedRevokeController",
    "QuotaStatusWriter",
    "revoke_list",
    "status_patch",
]

log = logging.getLogger(__name__)

STATUS_INTERVAL: Final = 1.0
RUNTIME_INTERVAL: Final = 10.0
REQUESTED_BY: Final = "koord-scheduler/ElasticQuota"

_ANNOTATION_FIELDS: Final = (
    (ANNOTATION_RUNTIME, "runtime"),
    (ANNOTATION_REQUEST, "request"),
    (ANNOTATION_CHILD_REQUEST, "childRequest"),
    (ANNOTATION_GUARANTEED, "guaranteed"),
    (ANNOTATION_ALLOCATED, "allocated"),
    (ANNOTATION_NON_PREEMPTIBLE_REQUEST, "nonPreemptibleRequest"),
    (ANNOTATION_NON_PREEMPTIBLE_USED, "nonPreemptibleUsed"),
)


def _non_zero(d: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v != 0}


def _encode(d: Mapping[str, int]) -> str:
    # Go's json.Marshal of a ResourceList: keys sorted, quantities as their canonical strings.
    return json.dumps(format_resource_list(d), sort_keys=True, separators=(",", ":"))


def status_patch(
    obj: Mapping[str, Any], summary: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, str] | None]:
    """What to write on one quota: changed annotations, and ``status.used`` if it changed (else None)."""
    annotations: Mapping[str, str] = (obj.get("metadata") or {}).get("annotations") or {}
    changed: dict[str, str] = {}
    for key, field in _ANNOTATION_FIELDS:
        value: Mapping[str, int] = summary[field]
        current: dict[str, int] = {}
        raw = annotations.get(key, "")
        if raw:
            try:
                current = parse_resource_list(json.loads(raw))
            except (ValueError, QuantityError):
                current = {}
        if _non_zero(current) != _non_zero(value):
            changed[key] = _encode(value)
    used: Mapping[str, int] = summary["used"]
    try:
        current_used = parse_resource_list((obj.get("status") or {}).get("used") or {})
    except QuantityError:
        current_used = {}
    new_used = format_resource_list(used) if _non_zero(current_used) != _non_zero(used) else None
    return changed, new_used


class QuotaStatusWriter:
    def __init__(self, plugin: ElasticQuota) -> None:
        self.plugin = plugin
        self.writes = 0

    def _objects(self) -> list[dict[str, Any]]:
        try:
            return self.plugin.handle.informer.list("ElasticQuota")
        except ClusterError as err:
            log.warning("cannot list ElasticQuotas: %s", err)
            return []

    def refresh_runtimes(self) -> None:
        quotas = self.plugin.quotas
        with quotas.lock:
            for obj in self._objects():
                labels = (obj.get("metadata") or {}).get("labels") or {}
                if labels.get(LABEL_QUOTA_IS_PARENT) == "true":
                    continue
                name = str((obj.get("metadata") or {}).get("name") or "")
                quotas.manager_for_quota(name).refresh_runtime(name)

    def sync(self) -> None:
        quotas = self.plugin.quotas
        cluster = self.plugin.handle.cluster
        for obj in self._objects():
            meta = obj.get("metadata") or {}
            name, ns = str(meta.get("name") or ""), str(meta.get("namespace") or "")
            with quotas.lock:
                summary = quotas.manager_for_quota(name).summary(name)
            if summary is None:
                continue
            annotations, used = status_patch(obj, summary)
            if not annotations and used is None:
                continue
            # One merge patch of the object, as upstream: Koordinator's CRD has no status subresource, so
            # status.used travels with the annotations. A cluster that keeps ElasticQuota status apart gets a
            # status patch too.
            patch: dict[str, Any] = {}
            if annotations:
                patch["metadata"] = {"annotations": annotations}
            if used is not None:
                patch["status"] = {"used": used}
            try:
                stored = cluster.patch("ElasticQuota", name, ns, patch)
                self.writes += 1
                if used is not None and (stored.get("status") or {}).get("used") != used:
                    cluster.patch("ElasticQuota", name, ns, {"status": {"used": used}}, status=True)
            except NotFoundError:
                continue
            except ClusterError as err:
                log.warning("failed to patch ElasticQuota %s/%s: %s", ns, name, err)


def revoke_list(
    runtime: Mapping[str, int],
    used: Mapping[str, int],
    assigned: list[PodInfo],
    ignore_overhead: bool = False,
) -> list[PodInfo]:
    """getToRevokePodList: take pods away from the least important up until used <= runtime (never a
    non-preemptible one), then give back from the most important taken, keeping those that no longer fit."""
    pods = sorted(assigned, key=importance_key, reverse=True)
    current = dict(used)
    taken: list[PodInfo] = []
    for pod in pods:
        if within(current, runtime):
            break
        if is_pod_non_preemptible(pod):
            continue
        # Upstream masks to the pod's request names here, dropping what the pod does not request.
        req = quota_pod_requests(pod, ignore_overhead)
        current = mask(subtract(current, req), req)
        taken.append(pod)
    if not within(current, runtime):
        return taken
    revoked: list[PodInfo] = []
    for pod in reversed(taken):
        req = quota_pod_requests(pod, ignore_overhead)
        current = mask(add(current, req), req)
        if not within(current, runtime):
            current = subtract(current, req)
            revoked.append(pod)
    return revoked


class _Monitor:
    __slots__ = ("last_under_used",)

    def __init__(self, now: float) -> None:
        self.last_under_used = now


class QuotaOverUsedRevokeController:
    def __init__(self, plugin: ElasticQuota) -> None:
        self.plugin = plugin
        self.delay = float(plugin.eq_args.delay_evict_time)
        self.monitors: dict[str, _Monitor] = {}
        self.evicted: list[tuple[str, str]] = []
        """(pod key, reason) of every eviction asked for, in order."""

    @property
    def enabled(self) -> bool:
        args = self.plugin.eq_args
        return args.monitor_all_quotas and args.enable_runtime_quota

    def _sync(self, now: float) -> dict[str, GroupQuotaManager]:
        owners: dict[str, GroupQuotaManager] = {}
        for mgr in self.plugin.quotas.managers():
            for name in mgr.quota_names():
                if name in (SYSTEM_QUOTA_NAME, ROOT_QUOTA_NAME):
                    continue
                owners[name] = mgr
                self.monitors.setdefault(name, _Monitor(now))
        for name in list(self.monitors):
            if name not in owners:
                del self.monitors[name]
        return owners

    def to_revoke(self, now: float) -> list[tuple[str, PodInfo, str]]:
        """(quota, pod, reason) for every pod to evict now."""
        out: list[tuple[str, PodInfo, str]] = []
        with self.plugin.quotas.lock:
            owners = self._sync(now)
            for name in sorted(owners):
                info = owners[name].get_quota_info(name)
                monitor = self.monitors[name]
                if info is None:
                    continue
                runtime, used = dict(info.calc.runtime), dict(info.calc.used)
                if within(used, runtime):
                    monitor.last_under_used = now
                    continue
                if now - monitor.last_under_used <= self.delay:
                    continue
                monitor.last_under_used = now
                reason = (
                    f"quota {name} over-used for more than {self.delay:g}s: "
                    f"used {_encode(used)} > runtime {_encode(runtime)}"
                )
                out.extend(
                    (name, pod, reason)
                    for pod in revoke_list(
                        runtime, used, info.assigned_pods(), self.plugin.quotas.ignore_pod_overhead
                    )
                )
        return out

    def run(self, now: float) -> None:
        cluster = self.plugin.handle.cluster
        for _quota, pod, reason in self.to_revoke(now):
            try:
                cluster.evict(pod.namespace, pod.name, reason=reason, requested_by=REQUESTED_BY, uid=pod.uid)
            except ClusterError as err:
                log.warning("failed to revoke pod %s due to quota over-use: %s", pod.key, err)
                continue
            self.evicted.append((pod.key, reason))


class QuotaControllers(BackgroundController):
    """Both controllers behind the framework's controller seam, each on its own period.

    ``concurrent``: the status patches wait behind the client's rate limit (one per changed quota every
    second); on the scheduling loop they slowed scheduling to that rate. Every read of the quota set here
    holds its lock, as the extension points' do, so the live scheduler may tick this on its own thread.
    """

    concurrent = True

    def __init__(self, plugin: ElasticQuota) -> None:
        self.plugin = plugin
        self.status = QuotaStatusWriter(plugin)
        self.revoke = QuotaOverUsedRevokeController(plugin)
        self._due: dict[str, float] = {}

    def _periods(self) -> dict[str, float]:
        # Runtimes first, so that the status written in the same tick is current.
        periods: dict[str, float] = {}
        if self.plugin.eq_args.enable_runtime_quota:
            periods["runtime"] = RUNTIME_INTERVAL
        periods["status"] = STATUS_INTERVAL
        if self.revoke.enabled:
            periods["revoke"] = max(float(self.plugin.eq_args.revoke_pod_interval), 0.001)
        return periods

    def tick(self, now: float) -> float | None:
        periods = self._periods()
        for name, period in periods.items():
            due = self._due.get(name)
            if due is not None and now < due:
                continue
            if name == "runtime":
                self.status.refresh_runtimes()
            elif name == "status":
                self.status.sync()
            else:
                self.revoke.run(now)
            self._due[name] = now + period
        return min(self._due[name] for name in periods)
