"""The PodMigrationJob controller: arbitration, reconciliation, eviction, object limiters, scavenging.

Koordinator's ``pkg/descheduler/controllers/migration`` driven by ``tick(now)`` instead of goroutines:

* **arbitration** (every ``arbitrationArgs.interval``): pending jobs are sorted (newest first, then by their
  pods' PodSorter order, jobs of one batch Job together, Jobs with more migrations first) and filtered:
  a non-retryable refusal fails the job (``ForbiddenMigratePod``), a pass marks it
  ``passed-arbitration`` and queues it, a retryable refusal leaves it waiting;
* **reconcile** of a queued job: TTL exceeded → Failed/Timeout; Pending → podRef uid filled, Running;
  object limiter exceeded → retried in 3s; then the pod is evicted (``EvictDirectly``; ``ReservationFirst``
  falls back to it until reservations are supported) through the eviction policy, behind the
  ``evictQPS``/``evictBurst`` token bucket. An eviction error leaves the pod and the job Running and is
  retried with exponential backoff (5ms doubling, at most 1000s) until the TTL ends the job; once the
  pod is gone the job Succeeds. Every step updates the job's status and records an Event;
* **scavenger** (every minute): jobs older than TTL+5m (30m without TTL) are deleted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from koord_lib_descheduling.sorter import sort_pods

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import format_time
from koord_framework.cluster.port import EventRecord, WatchEvent
from koord_framework.descheduler.interface import Handle
from koord_framework.errors import ClusterError, NotFoundError, TooManyRequestsError
from koord_plugin_migration import jobs, reservations
from koord_plugin_migration.args import MODE_EVICT_DIRECTLY, MigrationControllerArgs
from koord_plugin_migration.filters import MigrationFilter
from koord_plugin_migration.reservation_first import ReservationFirst
from koord_plugin_migration.util import TokenBucket, limiter_burst, max_migrating
from koord_plugin_migration.workloads import ControllerFinder, UnsupportedWorkload

log = logging.getLogger("koord.descheduler.migration")

REQUEUE_AFTER = 3.0
SCAVENGE_EVERY = 60.0
BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0
_MAX_STEPS_PER_TICK = 10_000
SERVED_RECHECK = 60.0


class TooManyEvictions(Exception):
    pass


class MigrationReconciler:
    def __init__(
        self,
        args: MigrationControllerArgs,
        handle: Handle,
        filter_: MigrationFilter,
        finder: ControllerFinder,
        *,
        new_name: Callable[[], str] | None = None,
    ) -> None:
        self.args = args
        self.handle = handle
        self.filter = filter_
        self.finder = finder
        self.new_name = new_name or (lambda: str(uuid.uuid4()))
        # Koordinator's reconciler takes a new UID per process and ignores jobs of any other; a
        # leader-elected descheduler names itself by its Lease, so its next leader resumes its jobs.
        self.reconciler_uid = handle.instance_name or self.new_name()
        now = handle.clock.now()
        self.evict_limiter = TokenBucket(args.evict_qps_value, args.evict_burst, now)
        self.waiting: dict[str, dict[str, Any]] = {}
        """Pending jobs awaiting arbitration, by uid."""
        self._due: dict[str, float] = {}
        """Job name -> when it is to be reconciled."""
        self._failures: dict[str, int] = {}
        self._next_arbitration = now
        self._next_scavenge = now
        self.object_limiters: dict[str, dict[str, tuple[TokenBucket, float]]] = {}
        """Limiter type -> key -> (bucket, expiry of the tracking entry)."""
        for kind, cfg in args.object_limiters.items():
            if cfg.duration > 0:
                self.object_limiters[kind] = {}
        self._served: tuple[bool, float] | None = None
        """Whether Reservations are served, and until when that answer holds."""
        self.reservation_first = ReservationFirst(self)
        # Jobs already in the cluster (a restarted descheduler) are picked up where their status says, as
        # controller-runtime's initial list would: pending ones are arbitrated, the others reconciled.
        existing: list[dict[str, Any]] = []
        version: int | None = None
        with contextlib.suppress(NotFoundError):  # the CRD not installed yet: its watch waits for it
            existing, version = handle.cluster.list(jobs.KIND)
        self._unsubscribe = handle.cluster.subscribe([jobs.KIND], self._on_event, since=version)
        for job in existing:
            passed = jobs.job_annotations(job).get(jobs.ANNOTATION_PASSED_ARBITRATION) == "true"
            if jobs.phase(job) == jobs.PHASE_PENDING and not passed:
                self.waiting[jobs.uid(job)] = job
            elif jobs.is_active(job):
                self.enqueue(jobs.name(job), now)

    # --- events -------------------------------------------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        job = event.obj
        name = jobs.name(job)
        if event.type == "ADDED":
            self.waiting[jobs.uid(job)] = job
            return
        if event.type == "DELETED":
            try:
                self.delete_reservation(job)
            except ClusterError as err:
                log.info("PodMigrationJob %s deleted: deleting its Reservation: %s", name, err)
            self.waiting.pop(jobs.uid(job), None)
            self.filter.passed_arbitration.discard(jobs.uid(job))
            self._due.pop(name, None)
            return
        if jobs.phase(job) in (jobs.PHASE_FAILED, jobs.PHASE_SUCCEEDED, jobs.PHASE_ABORTED):
            self.filter.passed_arbitration.discard(jobs.uid(job))
        self.enqueue(name, self.handle.clock.now())

    def enqueue(self, name: str, when: float) -> None:
        current = self._due.get(name)
        if current is None or when < current:
            self._due[name] = when

    # --- tick ---------------------------------------------------------------------------------------
    def tick(self, now: float) -> float | None:
        if self.waiting and now >= self._next_arbitration:
            self.arbitrate()
            self._next_arbitration = now + max(float(self.args.arbitration_args.interval), 0.001)
        for _ in range(_MAX_STEPS_PER_TICK):
            ready = [n for n, t in self._due.items() if t <= now]
            if not ready:
                break
            name = min(ready, key=lambda n: self._due[n])
            del self._due[name]
            self.reconcile(name)
        if now >= self._next_scavenge:
            self.scavenge()
            self._next_scavenge = now + SCAVENGE_EVERY
        wake = min(self._due.values(), default=None)
        if self.waiting:
            wake = self._next_arbitration if wake is None else min(wake, self._next_arbitration)
        return wake

    # --- Evict ----------------------------------------------------------------------------------------
    def create_job(
        self, pod: PodInfo, reason: str, trigger: str, delete_options: Mapping[str, Any] | None
    ) -> None:
        """``CreatePodMigrationJob``."""
        job = jobs.new_job(
            self.new_name(),
            namespace=pod.namespace,
            pod_name=pod.name,
            pod_uid=pod.uid,
            mode=self.args.default_job_mode,
            ttl=float(self.args.default_job_ttl),
            reason=reason,
            trigger=trigger,
            created_by=self.reconciler_uid,
            delete_options=delete_options if delete_options is not None else self.args.default_delete_options,
        )
        self.handle.cluster.create(job)

    # --- arbitration --------------------------------------------------------------------------------
    def arbitrate(self) -> None:
        """``doOnceArbitrate``."""
        pending = list(self.waiting.values())
        if not pending:
            return
        pods: dict[str, PodInfo] = {}
        for job in pending:
            ref = jobs.pod_ref(job)
            if not ref:
                continue
            raw = self.handle.cluster.try_get(
                "Pod", str(ref.get("name") or ""), str(ref.get("namespace") or "")
            )
            if raw is not None:
                pods[jobs.uid(job)] = PodInfo.from_manifest(raw)
        for job in self._sorted(pending, pods):
            uid = jobs.uid(job)
            pod = pods.get(uid)
            if pod is not None:
                if not self.filter.non_retryable(pod):
                    self.fail(
                        job,
                        jobs.REASON_FORBIDDEN,
                        f'Pod "{pod.key}" is forbidden to migrate because it does not meet the requirements',
                    )
                    self.waiting.pop(uid, None)
                    continue
                if not self.filter.retryable(pod, arbitrating=True):
                    continue
            try:
                self.handle.cluster.patch(
                    jobs.KIND,
                    jobs.name(job),
                    "",
                    {"metadata": {"annotations": {jobs.ANNOTATION_PASSED_ARBITRATION: "true"}}},
                )
            except NotFoundError:
                self.waiting.pop(uid, None)
                continue
            self.filter.passed_arbitration.add(uid)
            self.waiting.pop(uid, None)
            self.enqueue(jobs.name(job), self.handle.clock.now())

    def _sorted(self, pending: list[dict[str, Any]], pods: Mapping[str, PodInfo]) -> list[dict[str, Any]]:
        """The arbitrator's sorts, applied in order, each stable."""
        order = sorted(pending, key=lambda j: -int(jobs.created(j)))
        ranked = [pods[jobs.uid(j)] for j in order if jobs.uid(j) in pods]
        sort_pods(ranked)
        rank = {p.key: i for i, p in enumerate(ranked)}
        order.sort(key=lambda j: rank[pods[jobs.uid(j)].key] if jobs.uid(j) in pods else -(2**63))
        # Jobs of one batch Job next to each other, at the place of its first job.
        first: dict[str, int] = {}
        positions: dict[str, int] = {}
        for i, j in enumerate(order):
            owner = self._batch_job_owner(pods.get(jobs.uid(j)))
            if owner is None:
                positions[jobs.uid(j)] = i
            else:
                positions[jobs.uid(j)] = first.setdefault(owner, i)
        order.sort(key=lambda j: positions[jobs.uid(j)])
        migrating: dict[str, int] = {}
        for j in order:
            owner = self._batch_job_owner(pods.get(jobs.uid(j)))
            if owner is not None and owner not in migrating:
                migrating[owner] = self._migrating_of_owner(owner)
        order.sort(key=lambda j: -migrating.get(self._batch_job_owner(pods.get(jobs.uid(j))) or "", 0))
        return order

    @staticmethod
    def _batch_job_owner(pod: PodInfo | None) -> str | None:
        if pod is None:
            return None
        ref = pod.controller_ref()
        return ref.uid if ref is not None and ref.kind == "Job" else None

    def _migrating_of_owner(self, owner_uid: str) -> int:
        """``getMigratingJobNum``: jobs of the owner's pods that passed arbitration or are Running."""
        uids = {p.uid for p in self.handle.pods_owned_by(owner_uid)}
        objs = self.handle.list_objects(jobs.KIND)
        return sum(
            1
            for j in objs
            if jobs.pod_ref(j).get("uid") in uids
            and (
                jobs.job_annotations(j).get(jobs.ANNOTATION_PASSED_ARBITRATION) == "true"
                or jobs.phase(j) == jobs.PHASE_RUNNING
            )
        )

    # --- reconcile ----------------------------------------------------------------------------------
    def reconcile(self, name: str) -> None:
        job = self.handle.cluster.try_get(jobs.KIND, name)
        if job is None:
            return
        created_by = jobs.job_annotations(job).get(jobs.ANNOTATION_JOB_CREATED_BY)
        if created_by is not None and created_by != self.reconciler_uid:
            return  # another descheduler instance's job
        try:
            self._migrate(job)
            self._failures.pop(name, None)
        except (ClusterError, TooManyEvictions) as err:
            failures = self._failures.get(name, 0)
            self._failures[name] = failures + 1
            delay = min(BACKOFF_BASE * (2**failures), BACKOFF_MAX)
            log.info("PodMigrationJob %s: %s; retrying in %.3fs", name, err, delay)
            # Set, not merged: the failed attempt's own status write queued the job for "now", which
            # would skip the backoff (controller-runtime retries a failed reconcile only after it).
            self._due[name] = self.handle.clock.now() + delay

    def _migrate(self, job: dict[str, Any]) -> None:
        spec = job.get("spec") or {}
        if spec.get("paused"):
            return
        if (job.get("status") or {}).get("phase") not in (None, "", jobs.PHASE_PENDING, jobs.PHASE_RUNNING):
            return
        if self._abort_if_timeout(job):
            return
        if jobs.phase(job) == jobs.PHASE_PENDING:
            # As in Koordinator's doMigrate, a job made Running goes on to its eviction in the same pass.
            prepared = self._prepare_pending(job)
            if prepared is None:
                return
            job = prepared
        # ``HaveEvictAnnotation``: the key's presence counts, whatever its value (even empty).
        if "descheduler.alpha.kubernetes.io/evict" not in jobs.job_annotations(job):
            pod = self._pod_of(job)
            if pod is not None and self.object_limit_exceeded(pod):
                self.enqueue(jobs.name(job), self.handle.clock.now() + REQUEUE_AFTER)
                return
        mode = spec.get("mode") or self.args.default_job_mode
        if mode == MODE_EVICT_DIRECTLY:
            self._evict_directly(job)
        elif not self._reservations_served():
            # Not in Koordinator (whose controller cannot start without the Reservation CRD): without it
            # the pod is evicted directly, and the job says so.
            self._note_fallback(job)
            self._evict_directly(job)
        else:
            self.reservation_first.migrate(job)

    def _pod_of(self, job: Mapping[str, Any]) -> PodInfo | None:
        ref = jobs.pod_ref(job)
        raw = self.handle.cluster.try_get("Pod", str(ref.get("name") or ""), str(ref.get("namespace") or ""))
        return None if raw is None else PodInfo.from_manifest(raw)

    def _abort_if_timeout(self, job: dict[str, Any]) -> bool:
        from koord_framework.config.common import parse_duration

        ttl_text = (job.get("spec") or {}).get("ttl")
        ttl = parse_duration(ttl_text) if isinstance(ttl_text, str) and ttl_text else 0.0
        if ttl == 0:  # no TTL; a negative one (only a hand-written job has it) has expired at creation
            return False
        if self.handle.clock.now() - jobs.created(job) < ttl:
            return False
        self.delete_reservation(job)
        self.fail(job, jobs.REASON_TIMEOUT, "Abort job caused by timeout")
        return True

    def _prepare_pending(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """``preparePendingJob``: fill in the pod's uid and make the job Running; None when it failed."""
        ref = jobs.pod_ref(job)
        ns, pod_name = str(ref.get("namespace") or ""), str(ref.get("name") or "")
        if not ns or not pod_name:
            self.fail(job, "InvalidPodRef", "Abort job caused by invalid PodRef")
            return None
        raw = self.handle.cluster.try_get("Pod", pod_name, ns)
        if raw is None:
            self.fail(job, jobs.REASON_MISSING_POD, f'Abort job caused by missing Pod "{ns}/{pod_name}"')
            return None
        pod_uid = str((raw.get("metadata") or {}).get("uid") or "")
        job = dict(
            self.handle.cluster.patch(jobs.KIND, jobs.name(job), "", {"spec": {"podRef": {"uid": pod_uid}}})
        )
        status = dict(job.get("status") or {})
        status["phase"] = jobs.PHASE_RUNNING
        job["status"] = self.write_status(job, status)
        return job

    def served_no_more(self) -> None:
        """The cluster answered that it does not serve Reservations (the CRD went away)."""
        self._served = (False, self.handle.clock.now() + SERVED_RECHECK)

    def _reservations_served(self) -> bool:
        """Whether the cluster serves Reservations (asked again at most every ``SERVED_RECHECK`` seconds,
        since the real adapter asks the API server's discovery)."""
        now = self.handle.clock.now()
        if self._served is None or now >= self._served[1]:
            cluster = self.handle.cluster
            served = reservations.KIND in cluster.kinds and cluster.serves(reservations.KIND)
            self._served = (served, now + SERVED_RECHECK)
        return self._served[0]

    def _note_fallback(self, job: dict[str, Any]) -> None:
        status = dict(job.get("status") or {})
        message = "the cluster does not serve Reservations; the pod is evicted directly"
        cond = {
            "type": jobs.COND_RESERVATION_CREATED,
            "status": jobs.STATUS_FALSE,
            "reason": "ReservationUnsupported",
            "message": message,
        }
        if jobs.update_condition(status, cond, self.handle.clock.now()):
            job["status"] = self.write_status(job, status)

    def _evict_directly(self, job: dict[str, Any]) -> None:
        if not self.evict_pod(job):
            return
        ref = jobs.pod_ref(job)
        status = dict(job.get("status") or {})
        status.update(
            phase=jobs.PHASE_SUCCEEDED,
            status="Complete",
            reason="",
            message=f'Pod "{ref.get("namespace")}/{ref.get("name")}" has been evicted',
        )
        self.write_status(job, status)
        self.event(job, "Normal", "Complete", status["message"])

    def evict_pod(self, job: dict[str, Any]) -> bool:
        """``evictPod``: True when the pod is gone (the eviction is complete)."""
        status = dict(job.get("status") or {})
        cond = jobs.condition(status, jobs.COND_EVICTION)
        if cond is not None and cond.get("status") == jobs.STATUS_TRUE:
            return True
        ref = jobs.pod_ref(job)
        key = f"{ref.get('namespace')}/{ref.get('name')}"
        raw = self.handle.cluster.try_get("Pod", str(ref.get("name") or ""), str(ref.get("namespace") or ""))
        replaced = (
            raw is not None
            and cond is not None
            and ref.get("uid")
            and (raw.get("metadata") or {}).get("uid") != ref.get("uid")
        )
        if raw is None or replaced:
            if status.get("status") != jobs.COND_EVICTION:
                self.fail(job, jobs.REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}"')
                return False
            done = {
                "type": jobs.COND_EVICTION,
                "status": jobs.STATUS_TRUE,
                "reason": jobs.REASON_EVICT_COMPLETE,
            }
            self.update_condition(job, status, done)
            self.event(job, "Normal", jobs.REASON_EVICT_COMPLETE, f'Pod "{key}" has been evicted')
            return True
        if cond is not None and cond.get("reason") == jobs.REASON_EVICTING:
            self.enqueue(jobs.name(job), self.handle.clock.now() + REQUEUE_AFTER)
            return False
        if self.reservation_first.abort_if_bound_by_another_pod(job, None):
            return False
        pod = PodInfo.from_manifest(raw)
        _, reason = jobs.trigger_and_reason(job)
        try:
            self._evict(job, pod, reason)
        except (ClusterError, TooManyEvictions) as err:
            # Koordinator (controller.go evictPod) only reports the refusal as a Warning Event: the job's
            # status and conditions stay as they were. An Eviction condition here would also turn a pod
            # that later disappears on its own into EvictComplete instead of MissingPod.
            self.event(job, "Warning", jobs.REASON_EVICTING, f'Failed evict Pod "{key}" caused by {err}')
            raise
        self.track_evicted(pod)
        evicting = {
            "type": jobs.COND_EVICTION,
            "status": jobs.STATUS_FALSE,
            "reason": jobs.REASON_EVICTING,
            "message": f'Pod "{key}" evicted from node "{pod.node_name}" by the reason "{reason}"',
        }
        self.update_condition(job, status, evicting)
        self.event(job, "Normal", jobs.REASON_EVICTING, evicting["message"])
        self.enqueue(jobs.name(job), self.handle.clock.now() + REQUEUE_AFTER)
        return False

    def _evict(self, job: Mapping[str, Any], pod: PodInfo, reason: str) -> None:
        """The evictor interpreter: rate limit, then the policy of the pod, the job, or the default."""
        now = self.handle.clock.now()
        if not self.evict_limiter.allow(now):
            raise TooManyEvictions("TooManyEvictions")
        policy = pod.labels.get(jobs.LABEL_EVICT_POLICY) or (
            (job.get("metadata") or {}).get("labels") or {}
        ).get(jobs.LABEL_EVICT_POLICY)
        if policy not in ("Eviction", "Delete", "SoftEviction"):
            policy = self.args.eviction_policy
        trigger, _ = jobs.trigger_and_reason(job)
        cluster = self.handle.cluster
        if policy == "Eviction":
            try:
                cluster.evict(
                    pod.namespace,
                    pod.name,
                    reason=reason,
                    requested_by=trigger or "MigrationController",
                    uid=pod.uid or None,
                )
            except TooManyRequestsError as err:
                raise TooManyRequestsError(f'error when evicting pod (ignoring) "{pod.name}": {err}') from err
        elif policy == "Delete":
            cluster.delete("Pod", pod.name, pod.namespace)
        else:
            spec = {
                "timestamp": format_time(now),
                "deleteOptions": (job.get("spec") or {}).get("deleteOptions"),
                "initiator": trigger,
                "reason": reason,
            }
            cluster.patch(
                "Pod",
                pod.name,
                pod.namespace,
                {
                    "metadata": {
                        "annotations": {
                            jobs.ANNOTATION_SOFT_EVICTION: json.dumps({k: v for k, v in spec.items() if v})
                        }
                    }
                },
            )
        cluster.record_event(
            EventRecord(
                kind="Pod",
                namespace=pod.namespace,
                name=pod.name,
                reason="Descheduled",
                message=f'Pod evicted from node "{pod.node_name}" by the reason "{reason}"',
                component="MigrationController",
                time=now,
                extra={
                    "node": pod.node_name,
                    "plugin": trigger,
                    "evictionReason": reason,
                    "policy": policy,
                    "uid": pod.uid,
                    "action": "Migrating",
                },
            )
        )

    # --- object limiters ----------------------------------------------------------------------------
    @staticmethod
    def _limiter_key(pod: PodInfo, kind: str) -> str:
        if kind == "workload":
            ref = pod.controller_ref()
            return ref.uid if ref is not None else ""
        return pod.namespace

    def object_limit_exceeded(self, pod: PodInfo) -> bool:
        """``checkPodExceedObjectLimiter``: a limiter of the pod's workload/namespace without a token left."""
        now = self.handle.clock.now()
        for kind, cfg in self.args.object_limiters.items():
            if cfg.duration <= 0 or kind not in self.object_limiters:
                continue
            key = self._limiter_key(pod, kind)
            if not key:
                continue
            entry = self.object_limiters[kind].get(key)
            if entry is None:
                continue
            bucket, expires = entry
            if now > expires:
                del self.object_limiters[kind][key]
                continue
            if bucket.tokens(now) - 1 < 0:
                return True
        return False

    def track_evicted(self, pod: PodInfo) -> None:
        """``trackEvictedPod``: take a token from the pod's workload (namespace) limiter."""
        now = self.handle.clock.now()
        for kind, cfg in self.args.object_limiters.items():
            duration = float(cfg.duration)
            if duration <= 0 or kind not in self.object_limiters:
                continue
            key = self._limiter_key(pod, kind)
            if not key:
                continue
            if kind == "namespace":
                # IntOrString.IntValue: a percentage (or any non-number) counts as 0, disabling the limit.
                most = _int_value(cfg.max_migrating)
            else:
                try:
                    replicas = self.finder.expected_replicas(pod)
                except UnsupportedWorkload:
                    return
                value = (
                    cfg.max_migrating
                    if cfg.max_migrating is not None
                    else self.args.max_migrating_per_workload
                )
                try:
                    most = max_migrating(replicas, value)
                except ValueError:
                    most = 0
            if most == 0:
                return
            limit = most / duration
            table = self.object_limiters[kind]
            entry = table.get(key)
            if entry is None or now > entry[1]:
                bucket = TokenBucket(limit, limiter_burst(cfg.burst), now)
            else:
                bucket = entry[0]
                if bucket.limit != limit:
                    bucket.set_limit(limit, now)
            if not bucket.allow(now):
                log.info("the %s %s has been descheduled frequently and is limited for a while", kind, key)
            table[key] = (bucket, now + duration * 1.5)

    # --- housekeeping -------------------------------------------------------------------------------
    def scavenge(self) -> None:
        """``doScavenge``: delete jobs older than their TTL + 5m (30m without a TTL)."""
        from koord_framework.config.common import parse_duration

        now = self.handle.clock.now()
        objs, _ = self.handle.cluster.list(jobs.KIND)
        for job in objs:
            ttl_text = (job.get("spec") or {}).get("ttl")
            ttl = parse_duration(ttl_text) if isinstance(ttl_text, str) and ttl_text else 0.0
            horizon = ttl + 300.0 if ttl > 0 else 1800.0
            if now - jobs.created(job) < horizon:
                continue
            try:
                self.delete_reservation(job)
            except ClusterError:
                break  # as Koordinator: try again at the next scavenge
            with contextlib.suppress(NotFoundError):
                self.handle.cluster.delete(jobs.KIND, jobs.name(job))

    def close(self) -> None:
        self._unsubscribe()

    # --- writes -------------------------------------------------------------------------------------
    def write_status(self, job: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        stored = self.handle.cluster.patch(
            jobs.KIND, jobs.name(job), "", {"status": dict(status)}, status=True
        )
        return dict(stored.get("status") or {})

    def update_condition(self, job: dict[str, Any], status: dict[str, Any], cond: dict[str, Any]) -> bool:
        """``updateCondition``: the job's ``status``/``reason``/``message`` follow the latest condition;
        True when anything changed (and was written)."""
        if jobs.update_condition(status, cond, self.handle.clock.now()):
            status["status"] = cond["type"]
            status["reason"] = cond.get("reason", "")
            status["message"] = cond.get("message", "")
            job["status"] = self.write_status(job, status)
            return True
        return False

    def fail(self, job: Mapping[str, Any], reason: str, message: str, *, event: bool = True) -> None:
        """The job Failed with ``reason`` (a Warning Event too, unless Koordinator records none)."""
        status = dict(job.get("status") or {})
        status.update(phase=jobs.PHASE_FAILED, reason=reason, message=message)
        try:
            self.write_status(job, status)
        except NotFoundError:
            return
        if event:
            self.event(job, "Warning", reason, message)
        # Not in Koordinator (which leaves it to the reservation's TTL and the scavenger): a failed
        # migration's reservation holds capacity for nobody, so it goes at once.
        try:
            self.delete_reservation(job)
        except ClusterError as err:
            log.info("PodMigrationJob %s: deleting its Reservation: %s", jobs.name(job), err)

    def delete_reservation(self, job: Mapping[str, Any]) -> None:
        """``deleteReservation``: the job's Reservation, if it made one; one already gone is fine."""
        ref = jobs.reservation_ref(job)
        if ref is None or not ref.get("name"):
            return
        with contextlib.suppress(NotFoundError):
            self.handle.cluster.delete(reservations.KIND, str(ref["name"]))

    def event(self, job: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.handle.cluster.record_event(
            EventRecord(
                kind=jobs.KIND,
                namespace="",
                name=jobs.name(job),
                reason=reason,
                message=message,
                type="Warning" if type_ == "Warning" else "Normal",
                component="MigrationController",
                time=self.handle.clock.now(),
                extra={
                    "action": "Migrating",
                    "pod": "{namespace}/{name}".format(
                        **{
                            "namespace": jobs.pod_ref(job).get("namespace", ""),
                            "name": jobs.pod_ref(job).get("name", ""),
                        }
                    ),
                },
            )
        )


def _int_value(value: int | str | None) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        return 0
