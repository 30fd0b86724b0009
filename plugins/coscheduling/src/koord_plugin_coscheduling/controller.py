"""The PodGroup controller: keeps ``PodGroup.status`` (phase and counts) in step with the gang's pods.

Koordinator's ``controller/podgroup.go``, as a level-triggered reconciler: ``next_status`` is the pure
transition of one sync (one phase step per sync, as Koordinator's); ``PodGroupController.flush`` runs the
steps of each PodGroup whose pods or spec changed until they settle and patches the settled ``status`` (the
status subresource) once, only when it changed.

Phases: "" → Pending; Pending → PreScheduling once the gang has ``minMember`` (> 0) pods; from then on the
counts decide: Scheduling while fewer than ``minMember`` members are bound, else Scheduled; Running when
running + succeeded ≥ minMember; Failed when some failed and failed + running + succeeded ≥ minMember;
Finished when succeeded ≥ minMember. A PodGroup whose pods are all gone goes back to Pending.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from koord_framework.cluster.clock import format_time
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import ClusterError
from koord_plugin_coscheduling.cache import GangCache
from koord_plugin_coscheduling.constants import (
    PHASE_FAILED,
    PHASE_FINISHED,
    PHASE_PENDING,
    PHASE_PRE_SCHEDULING,
    PHASE_RUNNING,
    PHASE_SCHEDULED,
    PHASE_SCHEDULING,
)
from koord_plugin_coscheduling.gang import MemberPod, gang_id

log = logging.getLogger(__name__)

__all__ = ["PodGroupController", "next_status"]

_MAX_STEPS = 8
"""Syncs of one PodGroup per flush; the phase machine settles in at most four."""


def next_status(
    pg: Mapping[str, Any], pods: Sequence[MemberPod], scheduled: int, now: float
) -> dict[str, Any]:
    """The PodGroup status after one sync of Koordinator's controller (``syncHandler``)."""
    spec = pg.get("spec") or {}
    status = dict(pg.get("status") or {})
    min_member = spec.get("minMember", 0)
    if isinstance(min_member, bool) or not isinstance(min_member, int):
        min_member = 0
    phase = status.get("phase") or ""
    if phase == "":
        status["phase"] = PHASE_PENDING
        return status
    if phase == PHASE_PENDING:
        if len(pods) >= min_member and min_member > 0:
            status["phase"] = PHASE_PRE_SCHEDULING
            refs = sorted(f"{pods[0].namespace}/{owner}" for owner in pods[0].owner_names)
            if refs:
                status["occupiedBy"] = ",".join(refs)
        return status
    if not pods:
        status["phase"] = PHASE_PENDING
        return status
    running = sum(1 for p in pods if p.phase == "Running")
    succeeded = sum(1 for p in pods if p.phase == "Succeeded")
    failed = sum(1 for p in pods if p.phase == "Failed")
    status["failed"] = failed
    status["succeeded"] = succeeded
    status["running"] = running
    status["scheduled"] = scheduled
    if scheduled < min_member:
        status["phase"] = PHASE_SCHEDULING
        if not status.get("scheduleStartTime"):
            status["scheduleStartTime"] = format_time(now)
    else:
        status["phase"] = PHASE_SCHEDULED
    if succeeded + running >= min_member and status["phase"] == PHASE_SCHEDULED:
        status["phase"] = PHASE_RUNNING
    if failed != 0 and failed + running + succeeded >= min_member:
        status["phase"] = PHASE_FAILED
    if succeeded >= min_member:
        status["phase"] = PHASE_FINISHED
    return status


class PodGroupController:
    """Syncs the status of PodGroups marked dirty by Pod and PodGroup events."""

    def __init__(
        self,
        cache: GangCache,
        cluster: ClusterPort,
        get_pod_group: Callable[[str, str], Mapping[str, Any] | None],
        get_pod: Callable[[str, str], Mapping[str, Any] | None],
        now: Callable[[], float],
    ) -> None:
        self.cache = cache
        self.cluster = cluster
        self._get = get_pod_group
        self._get_pod = get_pod
        self._now = now
        self._lock = threading.Lock()
        self._dirty: dict[str, None] = {}

    def mark(self, namespace: str, name: str) -> None:
        with self._lock:
            self._dirty[gang_id(namespace, name)] = None

    def on_pod_group(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self.mark(str(meta.get("namespace") or "default"), str(meta.get("name", "")))

    def flush(self) -> int:
        """Sync every dirty PodGroup until it settles; returns how many status patches were written."""
        with self._lock:
            keys = list(self._dirty)
            self._dirty.clear()
        patches = 0
        for key in keys:
            namespace, _, name = key.partition("/")
            pg = self._get(namespace, name)
            if pg is None:
                continue
            with self.cache.lock:
                gang = self.cache.gangs.get(key)
                pods = list(gang.children.values()) if gang is not None else []
                scheduled = len(gang.bound_children) if gang is not None else 0
            current = self._current(pods)
            old = dict(pg.get("status") or {})
            # Koordinator's controller moves one phase per sync and is requeued by its own update; the
            # steps are run here until they settle and only the settled status is written (one patch).
            status = old
            for _ in range(_MAX_STEPS):
                new = next_status({**pg, "status": status}, current, scheduled, self._now())
                if new == status:
                    break
                status = new
            if status == old:
                continue
            try:
                self.cluster.patch("PodGroup", name, namespace, {"status": status}, status=True)
            except ClusterError as exc:
                log.warning("could not update the status of PodGroup %s: %s", key, exc)
                continue
            patches += 1
        return patches

    def _current(self, pods: Sequence[MemberPod]) -> list[MemberPod]:
        """The members with their phase as the cluster has it now (the gang cache skips terminal updates)."""
        out: list[MemberPod] = []
        for p in pods:
            obj = self._get_pod(p.namespace, p.name)
            if obj is None:
                continue
            phase = str((obj.get("status") or {}).get("phase") or "Pending")
            out.append(
                MemberPod(p.namespace, p.name, p.uid, p.node_name, phase, p.owner_names, p.creation_time)
            )
        return out
