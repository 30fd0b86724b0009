"""The reservation controller: expiry, allocateOnce completion, status (allocated, currentOwners), GC.

Koordinator runs it inside the scheduler (``plugins/reservation/controller``); here the plugin drives it:
``sync_due`` at the start of scheduling cycles (at most every ``resyncIntervalSeconds``, or sooner when a
reservation is due to expire) and ``sync_one`` when a reservation's owners change. It is level-triggered and
idempotent: every pass recomputes the status from the objects (the Reservation and the bound pods that
carry its ``reservation-allocated`` annotation) and writes only what differs, so a restart loses nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from koord_framework.api.resources import format_resource_list
from koord_framework.cluster.clock import Clock, format_time
from koord_framework.cluster.port import ClusterPort, EventRecord
from koord_framework.errors import ClusterError, NotFoundError
from koord_plugin_reservation.args import ReservationArgs
from koord_plugin_reservation.cache import ReservationCache
from koord_plugin_reservation.model import (
    COND_READY,
    PHASE_AVAILABLE,
    PHASE_FAILED,
    PHASE_SUCCEEDED,
    REASON_EXPIRED,
    REASON_SUCCEEDED,
    ParsedReservation,
)

log = logging.getLogger(__name__)
COMPONENT = "koord-scheduler"


def expired_conditions(conditions: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """``SetReservationExpired``: Ready=False with reason Expired (transition time moves only if it was
    Ready)."""
    out = [dict(c) for c in conditions]
    for c in out:
        if c.get("type") == COND_READY:
            was_ready = c.get("status") == "True"
            c["status"] = "False"
            c["reason"] = REASON_EXPIRED
            c["lastProbeTime"] = now
            if was_ready:
                c["lastTransitionTime"] = now
            return out
    out.append(
        {
            "type": COND_READY,
            "status": "False",
            "reason": REASON_EXPIRED,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )
    return out


def succeeded_conditions(conditions: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """``SetReservationSucceeded``: Ready=False with reason Succeeded."""
    out = [dict(c) for c in conditions]
    for c in out:
        if c.get("type") == COND_READY:
            c["status"] = "False"
            c["reason"] = REASON_SUCCEEDED
            c["lastProbeTime"] = now
            return out
    out.append(
        {
            "type": COND_READY,
            "status": "False",
            "reason": REASON_SUCCEEDED,
            "lastProbeTime": now,
            "lastTransitionTime": now,
        }
    )
    return out


class ReservationController:
    """Keeps every Reservation's status true; see the module docstring."""

    def __init__(
        self,
        cluster: ClusterPort,
        clock: Clock,
        cache: ReservationCache,
        args: ReservationArgs,
        node_exists: Callable[[str], bool],
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.cache = cache
        self.args = args
        self.node_exists = node_exists
        self._lock = threading.Lock()
        self._last_resync = float("-inf")
        self._last_gc = float("-inf")

    # --- scheduling -------------------------------------------------------------------------------
    def next_due(self) -> float:
        """When the next pass must run: the resync interval, or the earliest expiry, whichever is first."""
        due = self._last_resync + float(self.args.resync_interval_seconds or 60)
        return min(due, self.cache.earliest_expiry)

    def sync_due(self) -> int:
        """Run a full pass if one is due; returns the number of writes."""
        now = self.clock.now()
        if now < self.next_due():
            return 0
        return self.sync_all()

    def sync_all(self) -> int:
        with self._lock:
            now = self.clock.now()
            self._last_resync = now
            writes = 0
            earliest = float("inf")
            for entry in self.cache.snapshot():
                writes += self._sync(entry.r, now)
                at = None if entry.r.is_terminal else entry.r.expiry()
                if at is not None and now < at < earliest:
                    earliest = at
            # Reservations expired by this pass are terminal now; those updates lowered nothing.
            self.cache.earliest_expiry = earliest
            if not self.args.disable_garbage_collection and now - self._last_gc >= self.args.gc_interval:
                self._last_gc = now
                writes += self._gc(now)
            return writes

    def sync_one(self, uid: str) -> int:
        entry = self.cache.entries.get(uid)
        if entry is None:
            return 0
        with self._lock:
            return self._sync(entry.r, self.clock.now())

    # --- one reservation --------------------------------------------------------------------------
    def _sync(self, r: ParsedReservation, now: float) -> int:
        if r.is_terminal:
            return 0
        at = r.expiry()
        if (at is not None and now >= at) or (r.node_name and not self.node_exists(r.node_name)):
            return self._write(
                r,
                {"phase": PHASE_FAILED, "conditions": expired_conditions(r.conditions, format_time(now))},
                "ReservationExpired",
                f"reservation {r.name} expired",
            )
        if not r.node_name or r.phase != PHASE_AVAILABLE:
            return 0
        owners = self.cache.owners_of(r.uid)
        actual_owners = sorted(
            (
                {"namespace": o.key.split("/", 1)[0], "name": o.key.split("/", 1)[1], "uid": uid}
                for uid, o in owners.items()
                if "/" in o.key
            ),
            key=lambda o: o["uid"],
        )
        allocated: dict[str, int] = {}
        for o in owners.values():
            for k, v in o.requests.items():
                if k in r.allocatable:
                    allocated[k] = allocated.get(k, 0) + v
        status = r.obj.get("status") or {}
        current_owners = sorted(
            (
                {
                    "namespace": str(o.get("namespace", "")),
                    "name": str(o.get("name", "")),
                    "uid": str(o.get("uid", "")),
                }
                for o in status.get("currentOwners") or []
            ),
            key=lambda o: o["uid"],
        )
        current_allocated = {k: v for k, v in self._parse(status.get("allocated")).items() if v}
        if actual_owners == current_owners and {k: v for k, v in allocated.items() if v} == current_allocated:
            return 0
        patch: dict[str, Any] = {
            "allocated": format_resource_list(allocated) if allocated else None,
            "currentOwners": actual_owners or None,
        }
        if r.allocate_once and actual_owners:
            patch["phase"] = PHASE_SUCCEEDED
            patch["conditions"] = succeeded_conditions(r.conditions, format_time(now))
        return self._write(r, patch, "", "")

    @staticmethod
    def _parse(value: Any) -> dict[str, int]:
        from koord_framework.api.resources import parse_resource_list

        try:
            return parse_resource_list(value or {})
        except ValueError:
            return {}

    def _write(self, r: ParsedReservation, status: dict[str, Any], reason: str, message: str) -> int:
        try:
            self.cluster.patch("Reservation", r.name, "", {"status": status}, status=True)
        except NotFoundError:
            return 0
        except ClusterError as exc:
            log.warning("could not update the status of reservation %s: %s", r.name, exc)
            return 0
        if reason:
            self._event(r, reason, message)
        return 1

    def _event(self, r: ParsedReservation, reason: str, message: str) -> None:
        with contextlib.suppress(ClusterError):
            self.cluster.record_event(
                EventRecord("Reservation", "", r.name, reason, message, "Normal", COMPONENT, self.clock.now())
            )

    # --- garbage collection -----------------------------------------------------------------------
    def _gc(self, now: float) -> int:
        """Delete reservations that expired or succeeded more than ``gcDurationSeconds`` ago, or whose node
        is gone (Koordinator's ``gcReservations``)."""
        deleted = 0
        for entry in self.cache.snapshot():
            r = entry.r
            expired = r.phase == PHASE_FAILED and any(c.get("reason") == REASON_EXPIRED for c in r.conditions)
            succeeded = r.phase == PHASE_SUCCEEDED
            if not expired and not succeeded:
                continue
            since = (
                self._reason_time(r, REASON_EXPIRED, "lastTransitionTime")
                if expired
                else self._reason_time(r, REASON_SUCCEEDED, "lastProbeTime")
            )
            missing = bool(r.node_name) and not self.node_exists(r.node_name)
            if missing or (since is not None and now - since > self.args.gc_duration):
                try:
                    self.cluster.delete("Reservation", r.name)
                    deleted += 1
                    self._event(r, "ReservationDeleted", f"reservation {r.name} garbage-collected")
                except ClusterError as exc:
                    log.warning("could not garbage-collect reservation %s: %s", r.name, exc)
        return deleted

    @staticmethod
    def _reason_time(r: ParsedReservation, reason: str, field: str) -> float | None:
        from koord_framework.cluster.clock import parse_time

        for c in r.conditions:
            if c.get("reason") == reason:
                value = c.get(field)
                return parse_time(value) if isinstance(value, str) else None
        return None


__all__ = ["ReservationController", "expired_conditions", "succeeded_conditions"]
