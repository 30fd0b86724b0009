"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` package does it.

Two replicas of the scheduler (or descheduler) run; exactly one acts. Each replica tries to write its
identity into the Lease; writes are conditional on the Lease's resourceVersion, so of two concurrent
attempts one gets a 409 and loses. The holder renews every ``retry_period``; a replica that has not
managed to renew within ``renew_deadline`` stops acting (its callback's stop event is set) and, in the
commands, exits. A waiting replica takes over once it has seen the same Lease record unchanged for
``lease_duration`` measured on *its own* monotonic clock, never by comparing its clock with the holder's
``renewTime``: clocks of two machines may disagree, their rates may not.

Defaults are kube-scheduler's: lease 15 s, renew deadline 10 s, retry period 2 s. With
``release_on_cancel`` a leader that stops cleanly hands the Lease over at once (holder emptied, duration
1 s), so fail-over after a clean stop takes one retry period instead of a lease duration.

The elector talks to a ``ClusterPort``, so the same code runs against the embedded cluster in unit tests.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from koord_framework.cluster.port import ClusterPort, Obj
from koord_framework.errors import ClusterError, NotFoundError

__all__ = ["LeaderElectionConfig", "LeaderElector", "micro_time"]

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
"""Waiting replicas retry after ``retry_period * (1 + rand * 1.2)``, so they do not all write at once."""


def micro_time(epoch: float) -> str:
    """``metav1.MicroTime`` in UTC (microseconds), the Lease's time format."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Which Lease, who we are, and the timing (seconds)."""

    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        problems = []
        if not self.name:
            problems.append("name: must not be empty")
        if not self.identity:
            problems.append("identity: must not be empty")
        if self.retry_period <= 0:
            problems.append("retryPeriod: must be greater than zero")
        if self.lease_duration <= self.renew_deadline:
            problems.append("leaseDuration: must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            problems.append(f"renewDeadline: must be greater than retryPeriod*{JITTER_FACTOR}")
        if problems:
            raise ValueError("leader election: " + "; ".join(problems))


class LeaderElector:
    """Acquires and renews one Lease. ``run`` blocks; ``start`` runs it in a thread."""

    def __init__(
        self,
        cluster: ClusterPort,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[threading.Event], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._monotonic = monotonic
        self._wall = wall
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._reported_leader: str | None = None
        self._stop = threading.Event()
        self.lost = threading.Event()
        """Set when this replica stops leading (lost the Lease, or was stopped): the callback's signal."""
        self.leading = threading.Event()
        """Set while this replica holds the Lease."""
        self._thread: threading.Thread | None = None
        self.transitions_seen = 0

    # --- state ---------------------------------------------------------------------------------------
    @property
    def leader(self) -> str:
        """The holder this replica last observed ("" when none)."""
        spec = self._observed_spec or {}
        return str(spec.get("holderIdentity") or "")

    @property
    def is_leader(self) -> bool:
        return self.leader == self.config.identity

    # --- one step ------------------------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """Take or renew the Lease once; True when this replica holds it afterwards."""
        cfg = self.config
        now_wall = self._wall()
        record: dict[str, Any] = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "acquireTime": micro_time(now_wall),
            "renewTime": micro_time(now_wall),
            "leaseTransitions": 0,
        }
        try:
            current = self.cluster.get("Lease", cfg.name, cfg.namespace)
        except NotFoundError:
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": cfg.name, "namespace": cfg.namespace},
                "spec": record,
            }
            try:
                self.cluster.create(lease)
            except ClusterError as err:
                log.debug("lease %s/%s: create failed: %s", cfg.namespace, cfg.name, err)
                return False
            self._observe(record)
            return True
        except ClusterError as err:
            log.warning("lease %s/%s: %s", cfg.namespace, cfg.name, err)
            return False

        spec = dict(current.get("spec") or {})
        if spec != self._observed_spec:
            self._observe(spec)
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != cfg.identity and self._observed_at + cfg.lease_duration > self._monotonic():
            return False  # held by another replica whose lease has not run out, by our own clock
        if holder == cfg.identity:
            record["acquireTime"] = spec.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = int(spec.get("leaseTransitions") or 0)
        else:
            record["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        if self._write(current, record):
            self._observe(record)
            return True
        return False

    def _write(self, current: Obj, spec: dict[str, Any]) -> bool:
        updated = dict(current)
        updated["spec"] = spec
        try:
            self.cluster.update(updated)  # conditional on the resourceVersion we read
        except ClusterError as err:
            log.debug("lease %s/%s: update failed: %s", self.config.namespace, self.config.name, err)
            return False
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        self._observed_spec = dict(spec)
        self._observed_at = self._monotonic()
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self._reported_leader:
            if self._reported_leader is not None:
                self.transitions_seen += 1
            self._reported_leader = holder
            log.info("lease %s/%s: leader is %s", self.config.namespace, self.config.name, holder)
            if self.on_new_leader is not None:
                self.on_new_leader(holder)

    def release(self) -> bool:
        """Give the Lease up now (only if this replica holds it)."""
        if not self.is_leader:
            return False
        try:
            current = self.cluster.get("Lease", self.config.name, self.config.namespace)
        except ClusterError:
            return False
        spec = dict(current.get("spec") or {})
        if spec.get("holderIdentity") != self.config.identity:
            return False
        now = micro_time(self._wall())
        released = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": int(spec.get("leaseTransitions") or 0),
        }
        if self._write(current, released):
            self._observe(released)
            return True
        return False

    # --- loops ---------------------------------------------------------------------------------------
    def run(self) -> None:
        """Acquire (retrying forever), lead while renewals succeed, then return. Stop with ``stop``."""
        if not self._acquire():
            return
        self.leading.set()
        log.info(
            "lease %s/%s: %s started leading", self.config.namespace, self.config.name, self.config.identity
        )
        worker: threading.Thread | None = None
        if self.on_started_leading is not None:
            callback = self.on_started_leading
            worker = threading.Thread(target=callback, args=(self.lost,), name="leading", daemon=True)
            worker.start()
        try:
            self._renew()
        finally:
            self.leading.clear()
            self.lost.set()
            if self.config.release_on_cancel and self._stop.is_set():
                self.release()
            log.info(
                "lease %s/%s: %s stopped leading",
                self.config.namespace,
                self.config.name,
                self.config.identity,
            )
            if self.on_stopped_leading is not None:
                self.on_stopped_leading()

    def _acquire(self) -> bool:
        while not self._stop.is_set():
            if self.try_acquire_or_renew():
                return True
            delay = self.config.retry_period * (1.0 + random.random() * JITTER_FACTOR)
            self._stop.wait(delay)
        return False

    def _renew(self) -> None:
        cfg = self.config
        while not self._stop.is_set():
            deadline = self._monotonic() + cfg.renew_deadline
            renewed = False
            while not self._stop.is_set() and self._monotonic() < deadline:
                if self.try_acquire_or_renew():
                    renewed = True
                    break
                self._stop.wait(cfg.retry_period)
            if not renewed:
                if not self._stop.is_set():
                    log.error(
                        "lease %s/%s: failed to renew within %.0f s",
                        cfg.namespace,
                        cfg.name,
                        cfg.renew_deadline,
                    )
                return
            self._stop.wait(cfg.retry_period)

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, name=f"leader-{self.config.name}", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 10.0) -> None:
        """Stop electing; a leader releases the Lease (with ``release_on_cancel``)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
