"""The plugin's view of every Reservation and of the pods consuming them, rebuilt from the objects.

Nothing here is only in memory: a reservation's state comes from its object (phase, node, allocatable), and
what it has given away comes from the bound pods whose ``reservation-allocated`` annotation names it, so a
restarted scheduler rebuilds exactly the same state from the informer's replay. The only in-memory part is
what the scheduler assumed in Reserve and has not seen bound yet, which a restart drops with the assumption.

Counting on the node. An Available reservation is counted on its node as its reserve pod requesting what
the reservation still holds, ``max(allocatable - allocated, 0)`` per reserved resource; owner pods are counted
as themselves. So a node's requested total is other pods + owners + what reservations still hold, never
the double count of Koordinator's cache (which counts the full reserve pod and subtracts owners per cycle).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from koord_framework.api.objects import PodInfo
from koord_framework.scheduler.frameworkext import ReservationInfo
from koord_plugin_reservation.model import (
    PHASE_AVAILABLE,
    ParsedReservation,
    ReservationError,
    holding,
    parse_reservation,
    reserve_pod,
)

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Owner:
    key: str
    requests: dict[str, int]


@dataclass(slots=True)
class Entry:
    r: ParsedReservation
    pod: PodInfo
    """The reserve pod as the template gives it (node set once scheduled)."""
    assumed_node: str = ""
    """Node a reserve pod was assumed on in Reserve, before its Bind made the reservation Available."""
    counted: PodInfo | None = None
    info: ReservationInfo | None = None
    """Cached view for the hooks; dropped whenever the entry or its owners change."""


@dataclass(slots=True)
class Changes:
    """What the scheduler must hear after a cache update."""

    enqueue: list[PodInfo] = field(default_factory=list)
    dequeue: list[str] = field(default_factory=list)
    count: list[PodInfo] = field(default_factory=list)
    uncount: list[PodInfo] = field(default_factory=list)


class ReservationCache:
    """Reservations by uid, by node and by owner key; owners by reservation. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.entries: dict[str, Entry] = {}
        self.by_name: dict[str, str] = {}
        self.by_node: dict[str, set[str]] = {}
        self.owner_index: dict[tuple[str, str, str], set[str]] = {}
        self.unindexed: set[str] = set()
        self.owners: dict[str, dict[str, Owner]] = {}
        """Reservation uid -> owner pod uid -> owner (bound pods that carry the annotation)."""
        self.assumed: dict[str, dict[str, Owner]] = {}
        """Reservation uid -> pod uid -> owner assumed in Reserve and not yet seen bound."""
        self.pod_owner: dict[str, str] = {}
        """Owner pod uid -> reservation uid (bound or assumed)."""
        self.earliest_expiry = float("inf")
        """No reservation expires before this (it may be earlier than the truth after a change: the
        controller then runs a pass and sets it exactly)."""
        self.errors: dict[str, ReservationError] = {}
        """Reservation name -> why it is unusable (shown by ``koord simulate`` and in events)."""

    # --- reservations -----------------------------------------------------------------------------
    def upsert(self, obj: Mapping[str, object]) -> Changes:
        changes = Changes()
        meta = obj.get("metadata")
        name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
        if self._status_only(name, obj):
            return changes
        try:
            r = parse_reservation(obj)
        except ReservationError as exc:
            log.warning("ignoring unusable reservation: %s", exc)
            with self._lock:
                self.errors[name] = exc
                uid = self.by_name.get(name)
                if uid is not None:
                    self._drop(uid, changes)
            return changes
        at = None if r.is_terminal else r.expiry()
        with self._lock:
            if at is not None and at < self.earliest_expiry:
                self.earliest_expiry = at
            self.errors.pop(r.name, None)
            old = self.entries.get(r.uid)
            if old is not None and _same_scheduling(old.r, r):
                # Only the status the controller keeps (allocated, currentOwners) changed: nothing that
                # matching or counting reads, so the entry stays and just refers to the new object.
                old.r = r
                old.info = None
                return changes
            if old is not None:
                self._unindex(old)
            elif r.name in self.by_name and self.by_name[r.name] != r.uid:
                self._drop(self.by_name[r.name], changes)  # re-created under the same name
            entry = Entry(r, reserve_pod(r))
            if old is not None:
                entry.assumed_node = old.assumed_node if not r.node_name else ""
            self.entries[r.uid] = entry
            self.by_name[r.name] = r.uid
            if r.is_pending:
                changes.enqueue.append(entry.pod)
                if old is not None and old.counted is not None:
                    changes.uncount.append(old.counted)
            elif r.is_available:
                self._index(entry)
                entry.counted = self._holding(entry)
                changes.count.append(entry.counted)
                changes.dequeue.append(r.uid)
            else:
                changes.dequeue.append(r.uid)
                if old is not None and old.counted is not None:
                    changes.uncount.append(old.counted)
        return changes

    def _status_only(self, name: str, obj: Mapping[str, object]) -> bool:
        """Whether ``obj`` differs from the entry of its reservation only in status bookkeeping (allocated,
        currentOwners, conditions): the controller writes that on every owner change, and re-validating
        the whole object each time would cost more than the scheduling it informs. The entry then just
        refers to the new object."""
        with self._lock:
            uid = self.by_name.get(name)
            entry = self.entries.get(uid) if uid else None
            if entry is None:
                return False
            old = entry.r.obj
            old_meta, new_meta = old.get("metadata") or {}, obj.get("metadata") or {}
            old_status, new_status = old.get("status") or {}, obj.get("status") or {}
            if not (
                isinstance(new_meta, Mapping)
                and isinstance(new_status, Mapping)
                and new_meta.get("uid") == old_meta.get("uid")
                and new_meta.get("labels") == old_meta.get("labels")
                and new_meta.get("annotations") == old_meta.get("annotations")
                and obj.get("spec") == old.get("spec")
                and all(new_status.get(k) == old_status.get(k) for k in ("phase", "nodeName", "allocatable"))
            ):
                return False
            entry.r.obj = obj
            entry.r.conditions = [
                dict(c) for c in new_status.get("conditions") or [] if isinstance(c, Mapping)
            ]
            entry.info = None
            return True

    def delete(self, obj: Mapping[str, object]) -> Changes:
        changes = Changes()
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            return changes
        name = str(meta.get("name", ""))
        with self._lock:
            self.errors.pop(name, None)
            uid = str(meta.get("uid") or "") or self.by_name.get(name, "")
            if uid in self.entries:
                self._drop(uid, changes)
        return changes

    def _drop(self, uid: str, changes: Changes) -> None:
        entry = self.entries.pop(uid, None)
        if entry is None:
            return
        if self.by_name.get(entry.r.name) == uid:
            del self.by_name[entry.r.name]
        self._unindex(entry)
        changes.dequeue.append(uid)
        if entry.counted is not None:
            changes.uncount.append(entry.counted)

    def _index(self, entry: Entry) -> None:
        uid = entry.r.uid
        self.by_node.setdefault(entry.r.node_name, set()).add(uid)
        keys = [m.index_key() for m in entry.r.owners]
        if any(k is None for k in keys):
            self.unindexed.add(uid)
            return
        for k in keys:
            assert k is not None
            self.owner_index.setdefault(k, set()).add(uid)

    def _unindex(self, entry: Entry) -> None:
        uid = entry.r.uid
        on_node = self.by_node.get(entry.r.node_name)
        if on_node is not None:
            on_node.discard(uid)
            if not on_node:
                del self.by_node[entry.r.node_name]
        self.unindexed.discard(uid)
        for m in entry.r.owners:
            k = m.index_key()
            if k is not None and k in self.owner_index:
                self.owner_index[k].discard(uid)
                if not self.owner_index[k]:
                    del self.owner_index[k]

    # --- owners -----------------------------------------------------------------------------------
    def allocated(self, uid: str) -> dict[str, int]:
        """Sum of the owners' requests on the reservation's resources."""
        with self._lock:
            entry = self.entries.get(uid)
            names = set(entry.r.allocatable) if entry is not None else None
            total: dict[str, int] = {}
            for group in (self.owners.get(uid, {}), self.assumed.get(uid, {})):
                for owner in group.values():
                    for k, v in owner.requests.items():
                        if names is None or k in names:
                            total[k] = total.get(k, 0) + v
            return total

    def owner_count(self, uid: str) -> int:
        with self._lock:
            return len(self.owners.get(uid, {})) + len(self.assumed.get(uid, {}))

    def _holding(self, entry: Entry) -> PodInfo:
        allocated = self.allocated(entry.r.uid)
        remaining = {k: max(v - allocated.get(k, 0), 0) for k, v in entry.r.allocatable.items()}
        return holding(entry.pod, remaining)

    def _recount(self, uid: str, changes: Changes) -> None:
        entry = self.entries.get(uid)
        entry_info_reset(entry)
        if entry is None or entry.counted is None:
            return
        fresh = self._holding(entry)
        if fresh.requests != entry.counted.requests:
            entry.counted = fresh
            changes.count.append(fresh)

    def set_bound_owner(self, pod: PodInfo, reservation_uid: str | None) -> Changes:
        """A pod event: ``reservation_uid`` is what its annotation names while it is bound and running
        (None when it names nothing, is not bound, finished or is gone)."""
        changes = Changes()
        with self._lock:
            previous = self.pod_owner.get(pod.uid)
            if previous is not None and previous != reservation_uid:
                self.owners.get(previous, {}).pop(pod.uid, None)
                self.assumed.get(previous, {}).pop(pod.uid, None)
                del self.pod_owner[pod.uid]
                self._recount(previous, changes)
            if reservation_uid is not None:
                self.assumed.get(reservation_uid, {}).pop(pod.uid, None)
                self.owners.setdefault(reservation_uid, {})[pod.uid] = Owner(pod.key, dict(pod.requests))
                self.pod_owner[pod.uid] = reservation_uid
                self._recount(reservation_uid, changes)
        return changes

    def assume(self, reservation_uid: str, pod: PodInfo) -> Changes:
        changes = Changes()
        with self._lock:
            if reservation_uid not in self.entries:
                raise KeyError(f"reservation {reservation_uid} is gone")
            self.assumed.setdefault(reservation_uid, {})[pod.uid] = Owner(pod.key, dict(pod.requests))
            self.pod_owner[pod.uid] = reservation_uid
            self._recount(reservation_uid, changes)
        return changes

    def forget(self, reservation_uid: str, pod: PodInfo) -> Changes:
        changes = Changes()
        with self._lock:
            if self.assumed.get(reservation_uid, {}).pop(pod.uid, None) is not None:
                if self.pod_owner.get(pod.uid) == reservation_uid:
                    del self.pod_owner[pod.uid]
                self._recount(reservation_uid, changes)
        return changes

    def set_allocated_for_test(self, uid: str, requests: Mapping[str, int]) -> None:
        """Inject an owner total (what Koordinator's unit tests set on ``ReservationInfo.Allocated``)."""
        with self._lock:
            self.owners[uid] = {"__injected__": Owner("injected", dict(requests))} if requests else {}
            entry_info_reset(self.entries.get(uid))

    # --- queries ----------------------------------------------------------------------------------
    def info(self, uid: str) -> ReservationInfo | None:
        with self._lock:
            entry = self.entries.get(uid)
            if entry is None:
                return None
            if entry.info is None:
                entry.info = self._make_info(entry)
            return entry.info

    def _make_info(self, entry: Entry) -> ReservationInfo:
        r = entry.r
        pods = {
            u: o.key
            for group in (self.owners.get(r.uid, {}), self.assumed.get(r.uid, {}))
            for u, o in group.items()
        }
        return ReservationInfo(
            name=r.name,
            uid=r.uid,
            node_name=r.node_name or entry.assumed_node,
            phase=r.phase or "Pending",
            allocatable=dict(r.allocatable),
            allocated=self.allocated(r.uid),
            reserved=dict(r.reserved),
            resource_names=r.resource_names,
            allocated_pods=pods,
            allocate_once=r.allocate_once,
            allocate_policy=r.allocate_policy,
            unschedulable=r.unschedulable,
            labels=r.labels,
            annotations=r.annotations,
            taints=r.taints,
            reserve_pod=entry.counted,
        )

    def matchable_on_node(self, node: str) -> list[Entry]:
        """Available reservations on ``node`` a pod could consume (allocateOnce ones only while unused)."""
        with self._lock:
            out = []
            for uid in sorted(self.by_node.get(node, ())):
                e = self.entries[uid]
                if e.r.allocate_once and self.owner_count(uid) > 0:
                    continue
                out.append(e)
            return out

    def candidates_for(self, pod: PodInfo) -> list[Entry]:
        """Available reservations whose owner index keys this pod could match (a superset of the matches)."""
        with self._lock:
            uids: set[str] = set(self.unindexed)
            index = self.owner_index
            if index:
                found = index.get(("uid", pod.uid, ""))
                if found:
                    uids |= found
                for ref in pod.owner_refs:
                    found = index.get(("owner", ref.uid, ""))
                    if found:
                        uids |= found
                for k, v in pod.labels.items():
                    found = index.get(("label", k, v))
                    if found:
                        uids |= found
            out = []
            for uid in sorted(uids):
                e = self.entries.get(uid)
                if e is None or not e.r.is_available:
                    continue
                if e.r.allocate_once and self.owner_count(uid) > 0:
                    continue
                out.append(e)
            return out

    def all_available(self) -> list[Entry]:
        with self._lock:
            return [e for e in self.entries.values() if e.r.is_available]

    def on_node(self, node: str) -> list[Entry]:
        """Every Available or assumed reservation on ``node`` (allocate-policy conflicts)."""
        with self._lock:
            out = [self.entries[u] for u in sorted(self.by_node.get(node, ()))]
            out += [e for e in self.entries.values() if e.assumed_node == node and not e.r.node_name]
            return out

    def by_reservation_name(self, name: str) -> Entry | None:
        with self._lock:
            uid = self.by_name.get(name)
            return self.entries.get(uid) if uid else None

    def assume_reservation(self, uid: str, node: str) -> None:
        with self._lock:
            entry = self.entries.get(uid)
            if entry is not None:
                entry.assumed_node = node
                entry.info = None

    def forget_reservation(self, uid: str) -> None:
        with self._lock:
            entry = self.entries.get(uid)
            if entry is not None:
                entry.assumed_node = ""
                entry.info = None

    def owners_of(self, uid: str) -> dict[str, Owner]:
        with self._lock:
            return dict(self.owners.get(uid, {}))

    def snapshot(self) -> list[Entry]:
        with self._lock:
            return list(self.entries.values())


def _same_scheduling(a: ParsedReservation, b: ParsedReservation) -> bool:
    """Whether two versions of a reservation schedule and count the same (status bookkeeping aside)."""
    return (
        a.phase == b.phase
        and a.node_name == b.node_name
        and a.allocatable == b.allocatable
        and a.labels == b.labels
        and a.annotations == b.annotations
        and (a.obj.get("spec") or {}) == (b.obj.get("spec") or {})
    )


def entry_info_reset(entry: Entry | None) -> None:
    if entry is not None:
        entry.info = None


__all__ = ["PHASE_AVAILABLE", "Changes", "Entry", "Owner", "ReservationCache"]
