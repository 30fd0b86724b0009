"""``GangCache``: every gang and gang group, kept from Pod and PodGroup events (Koordinator's ``GangCache``).

Fed by the shared informer (``subscribe``) or directly in tests (``on_pod_add(manifest)`` ...). One
re-entrant lock guards the whole model: informer events, scheduling cycles and (in a live scheduler)
binding threads all reach it, and every operation is short.

When an event makes a gang *worth requeueing* (initialised and with at least its minimum of members), the
cache asks ``activate`` to move a member pod back to the active queue: the pod that completed the gang, or
some pending member when a PodGroup arrives after its pods. In a live scheduler a member's PreEnqueue can run
before this cache has seen the member (both follow the same watch), and that activation is what admits it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import parse_time
from koord_plugin_coscheduling.args import CoschedulingArgs
from koord_plugin_coscheduling.constants import MATCH_POLICY_ONCE_SATISFIED, POD_GROUP_LABEL
from koord_plugin_coscheduling.gang import (
    Gang,
    GangGroupInfo,
    MemberPod,
    gang_group_id,
    gang_id,
    gang_name_of,
)

log = logging.getLogger(__name__)

__all__ = ["GangCache", "member_from_manifest"]

Activate = Callable[[MemberPod], None]


def member_from_manifest(obj: Mapping[str, Any]) -> tuple[MemberPod, Mapping[str, str], Mapping[str, str]]:
    """The slim member record of a pod manifest, and its labels and annotations."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owners = tuple(
        str(r.get("name", "")) for r in meta.get("ownerReferences") or () if isinstance(r, Mapping)
    )
    try:
        created = parse_time(meta.get("creationTimestamp"))
    except (TypeError, ValueError):
        created = None
    pod = MemberPod(
        str(meta.get("namespace") or "default"),
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        str(spec.get("nodeName") or ""),
        str(status.get("phase") or "Pending"),
        owners,
        created,
    )
    return pod, meta.get("labels") or {}, meta.get("annotations") or {}


class GangCache:
    """Gangs by id and gang groups by group id."""

    def __init__(self, args: CoschedulingArgs, now: Callable[[], float] | None = None) -> None:
        self.args = args
        self.lock = threading.RLock()
        self.gangs: dict[str, Gang] = {}
        self.group_infos: dict[str, GangGroupInfo] = {}
        self._now = now
        self.activate: Activate | None = None
        """Called (never with the lock held) with a member pod that should get another scheduling chance."""

    # --- lookups ------------------------------------------------------------------------------------
    def get_gang(self, gid: str, create: bool = False) -> Gang | None:
        with self.lock:
            gang = self.gangs.get(gid)
            if gang is None and create:
                gang = Gang(gid, self._now() if self._now is not None else None)
                self.gangs[gid] = gang
            return gang

    def gang_of(
        self, namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]
    ) -> Gang | None:
        name = gang_name_of(labels, annotations)
        if not name:
            return None
        return self.gangs.get(gang_id(namespace, name))

    def _group_info(self, gid: str, group: list[str]) -> GangGroupInfo:
        info = self.group_infos.get(gid)
        if info is None:
            info = GangGroupInfo(gid, list(group), initialized=True)
            self.group_infos[gid] = info
        return info

    def waiting_pods(self, group: Iterable[str]) -> list[MemberPod]:
        out: list[MemberPod] = []
        with self.lock:
            for g in group:
                gang = self.gangs.get(g)
                if gang is not None:
                    out.extend(gang.waiting_for_bind_children.values())
        return out

    # --- pods ---------------------------------------------------------------------------------------
    def on_pod_add(self, obj: Mapping[str, Any]) -> None:
        self._on_pod(obj, created=True)

    def on_pod_update(self, _old: Mapping[str, Any], obj: Mapping[str, Any]) -> None:
        status = obj.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return  # Koordinator ignores updates of terminated pods
        self._on_pod(obj, created=False)

    def _on_pod(self, obj: Mapping[str, Any], *, created: bool) -> None:
        meta = obj.get("metadata") or {}
        if not gang_name_of(meta.get("labels") or {}, meta.get("annotations") or {}):
            return  # most pods belong to no gang: no member record (5,000 of them at start-up)
        pod, labels, annotations = member_from_manifest(obj)
        self._ingest(pod, labels, annotations, created=created)

    def ensure_member(self, info: PodInfo) -> None:
        """Count a pod the scheduler is about to judge even if its watch event has not reached this cache yet
        (the scheduler's queue and this cache follow the same watch, in that order)."""
        name = gang_name_of(info.labels, info.annotations)
        if not name:
            return
        with self.lock:
            gang = self.gangs.get(gang_id(info.namespace, name))
            if gang is not None and info.key in gang.children:
                return
        owners = tuple(r.name for r in info.owner_refs)
        pod = MemberPod(
            info.namespace, info.name, info.uid, info.node_name, info.phase, owners, info.creation_time
        )
        self._ingest(pod, info.labels, info.annotations, created=False)

    def _ingest(
        self, pod: MemberPod, labels: Mapping[str, str], annotations: Mapping[str, str], *, created: bool
    ) -> None:
        name = gang_name_of(labels, annotations)
        if not name:
            return
        to_activate: list[MemberPod] = []
        with self.lock:
            gang = self.get_gang(gang_id(pod.namespace, name), create=True)
            assert gang is not None
            if not labels.get(POD_GROUP_LABEL):
                # The lightweight form: the first member with readable annotations defines the gang.
                gang.try_init_by_pod_config(pod.key, labels, annotations, self.args, pod.creation_time)
                group = gang.gang_group
                gang.set_group_info(self._group_info(gang_group_id(group), group))
            before = len(gang.children)
            gang.set_child(pod)
            if pod.node_name:
                to_activate = self.mark_bound(gang, pod)
            elif created and gang.is_worth_requeue():
                if before < gang.min_required <= len(gang.children):
                    # This pod completed the gang: every member held back so far may go now (Koordinator
                    # activates only this pod; if it is held back elsewhere, the others would wait for the
                    # queue's five-minute flush).
                    to_activate = list(gang.pending_children.values())
                else:
                    to_activate = [pod]
        self._activate_all(to_activate)

    def mark_bound(self, gang: Gang, pod: MemberPod) -> list[MemberPod]:
        """Count ``pod`` bound (lock held); returns the members to activate when that made the group
        once-satisfied under the once-satisfied policy (they no longer need to pass as a block)."""
        was = gang.once_resource_satisfied
        gang.add_bound_pod(pod)
        if was or gang.match_policy != MATCH_POLICY_ONCE_SATISFIED:
            return []
        out: list[MemberPod] = []
        for member_id in gang.gang_group:
            member = self.gangs.get(member_id)
            if member is not None:
                out.extend(member.pending_children.values())
        return out

    def _activate_all(self, pods: Iterable[MemberPod]) -> None:
        # Outside the lock: activation runs PreEnqueue under the queue's lock, which takes this lock.
        if self.activate is None:
            return
        for pod in pods:
            self.activate(pod)

    def on_pod_delete(self, obj: Mapping[str, Any]) -> None:
        pod, labels, annotations = member_from_manifest(obj)
        name = gang_name_of(labels, annotations)
        if not name:
            return
        gid = gang_id(pod.namespace, name)
        with self.lock:
            gang = self.gangs.get(gid)
            if gang is None:
                return
            if gang.delete_pod(pod.key):
                del self.gangs[gid]
                self._drop_group_if_unused(gang)

    # --- PodGroups ----------------------------------------------------------------------------------
    def on_pod_group_add(self, pg: Mapping[str, Any]) -> None:
        meta = pg.get("metadata") or {}
        gid = gang_id(str(meta.get("namespace") or "default"), str(meta.get("name", "")))
        with self.lock:
            gang = self.get_gang(gid, create=True)
            assert gang is not None
            gang.try_init_by_pod_group(pg, self.args)
            some = self._some_child(gang)
            gang.set_group_info(self._group_info(gang_group_id(gang.gang_group), gang.gang_group))
        self._activate_all(some)

    def on_pod_group_update(self, _old: Mapping[str, Any], pg: Mapping[str, Any]) -> None:
        meta = pg.get("metadata") or {}
        gid = gang_id(str(meta.get("namespace") or "default"), str(meta.get("name", "")))
        with self.lock:
            gang = self.gangs.get(gid)
            if gang is None:
                log.error("PodGroup %s updated but its gang is unknown", gid)
                return
            old_meta = _old.get("metadata") or {}
            if _old.get("spec") == pg.get("spec") and old_meta.get("annotations") == meta.get("annotations"):
                return  # a status update (the controller's): nothing the gang reads changed
            before = gang.is_worth_requeue()
            gang.try_init_by_pod_group(pg, self.args)
            some = [] if before else self._some_child(gang)
            gang.set_group_info(self._group_info(gang_group_id(gang.gang_group), gang.gang_group))
        self._activate_all(some)

    def on_pod_group_delete(self, pg: Mapping[str, Any]) -> None:
        meta = pg.get("metadata") or {}
        gid = gang_id(str(meta.get("namespace") or "default"), str(meta.get("name", "")))
        with self.lock:
            gang = self.gangs.pop(gid, None)
            if gang is None:
                return
            gang.group_info.remove_waiting_gang(gid)
            self._drop_group_if_unused(gang)

    def _some_child(self, gang: Gang) -> list[MemberPod]:
        if gang.is_worth_requeue():
            child = gang.pick_some_child()
            if child is not None:
                return [child]
        return []

    def _drop_group_if_unused(self, gang: Gang) -> None:
        if all(g not in self.gangs for g in gang.gang_group):
            self.group_infos.pop(gang.group_info.gang_group_id, None)
