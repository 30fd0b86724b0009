"""Which pods the MigrationController may migrate: Koordinator's arbitrator ``filter``.

* **existing job**: a pod that already has an active (Pending/Running) PodMigrationJob is refused;
* **reservation**: in ``ReservationFirst`` mode only pods of ``schedulerNames`` may migrate;
* **non-retryable** (refused for good; the ``descheduler.alpha.kubernetes.io/evict`` annotation passes):
  the namespaces, eviction cost not MaxInt32, the evictor filter (DaemonSet, mirror, static, terminating,
  bare, system critical, priority threshold, local storage, PVC, label selector) and the expected-replicas
  check;
* **retryable** (may pass later; the annotation passes): at most ``maxMigratingGlobally`` /
  ``PerNode`` / ``PerNamespace`` active migrations, per workload at most ``maxMigratingPerWorkload``
  migrating and ``maxUnavailablePerWorkload`` unavailable pods.

While arbitrating a pending job, the counts include Running jobs and Pending jobs that already passed
arbitration (the job being arbitrated does not count itself); at eviction time they include every active job.
Every gate can be skipped with ``skipEvictionGates``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from koord_lib_descheduling.evictor_filters import EvictorFilter, has_evict_annotation
from koord_lib_descheduling.sorter import eviction_cost

from koord_framework.api.objects import PodInfo
from koord_framework.descheduler.args import parse_selector_model
from koord_framework.descheduler.interface import Handle
from koord_plugin_migration import jobs
from koord_plugin_migration.args import MODE_RESERVATION_FIRST, MigrationControllerArgs
from koord_plugin_migration.util import IntOrStringError, max_migrating, max_unavailable
from koord_plugin_migration.workloads import ControllerFinder, UnsupportedWorkload

log = logging.getLogger("koord.descheduler.migration")

MAX_INT32 = 2**31 - 1


class MigrationFilter:
    def __init__(self, args: MigrationControllerArgs, handle: Handle, finder: ControllerFinder) -> None:
        self.args = args
        self.handle = handle
        self.finder = finder
        self.passed_arbitration: set[str] = set()
        """Uids of pending jobs that passed arbitration."""
        skip = args.skips
        pt = args.priority_threshold
        self.evictor_filter = EvictorFilter(
            node_getter=lambda: handle.ready_nodes(args.node_selector),
            pods_on_node=handle.pods_on_node,
            evict_local_storage_pods=args.evict_local_storage_pods or skip("LocalStorage"),
            evict_system_critical_pods=args.evict_system_critical_pods or skip("SystemCritical"),
            ignore_pvc_pods=args.ignore_pvc_pods and not skip("PVC"),
            evict_failed_bare_pods=args.evict_failed_bare_pods or skip("BarePods"),
            evict_all_bare_pods=args.evict_all_bare_pods or skip("BarePods"),
            # Koordinator's filter reads only the value of the threshold (a name is resolved by the
            # pre-eviction filter alone).
            priority_threshold=None if skip("PriorityThreshold") or pt is None else pt.value,
            label_selector=None if skip("LabelSelector") else parse_selector_model(args.label_selector),
        )
        ns = args.namespaces if not skip("Namespaces") else None
        self._include = set(ns.include) if ns is not None else set()
        self._exclude = set(ns.exclude) if ns is not None else set()

    # --- jobs in the cluster ------------------------------------------------------------------------
    def _jobs(self) -> list[Mapping[str, Any]]:
        # From the descheduler's informer, not the API: this runs for every candidate pod of a round.
        return self.handle.list_objects(jobs.KIND)

    def _counted(self, job: Mapping[str, Any], arbitrating: bool) -> bool:
        """Is this job an active migration for the counts?"""
        phase = jobs.phase(job)
        if phase == jobs.PHASE_RUNNING:
            return True
        if phase == jobs.PHASE_PENDING:
            return not arbitrating or jobs.uid(job) in self.passed_arbitration
        return False

    def _active_jobs(self, arbitrating: bool) -> list[Mapping[str, Any]]:
        return [j for j in self._jobs() if self._counted(j, arbitrating)]

    @staticmethod
    def _job_of(pod: PodInfo, active: Iterable[Mapping[str, Any]]) -> bool:
        """``existingPodMigrationJob``: by uid first, then by namespace/name."""
        active = list(active)
        for job in active:
            ref = jobs.pod_ref(job)
            if pod.uid and ref.get("uid") == pod.uid:
                return True
        for job in active:
            ref = jobs.pod_ref(job)
            if ref.get("namespace") == pod.namespace and ref.get("name") == pod.name:
                return True
        return False

    # --- the filters --------------------------------------------------------------------------------
    def filter(self, pod: PodInfo) -> bool:
        """``arbitratorImpl.Filter``: at eviction time."""
        if self._job_of(pod, self._active_jobs(arbitrating=False)):
            return False
        if not self.reservation_filter(pod):
            return False
        return self.non_retryable(pod) and self.retryable(pod, arbitrating=False)

    def refusal_reason(self, pod: PodInfo) -> str | None:
        """Why ``filter`` refuses ``pod``, check by check in its order (``koord deschedule --explain``);
        None when it admits the pod."""
        if self._job_of(pod, self._active_jobs(arbitrating=False)):
            return "a PodMigrationJob for the pod is already running"
        if not self.reservation_filter(pod):
            return f"schedulerName {pod.scheduler_name} is not one of schedulerNames (ReservationFirst)"
        if has_evict_annotation(pod):
            return None
        if self._include and pod.namespace not in self._include:
            return f"namespace {pod.namespace} is not in namespaces.include"
        if self._exclude and pod.namespace in self._exclude:
            return f"namespace {pod.namespace} is in namespaces.exclude"
        if eviction_cost(pod) == MAX_INT32:
            return "its eviction cost is the maximum (never evicted)"
        evictor = self.evictor_filter.reasons(pod)
        if evictor:
            return "; ".join(evictor)
        ref = pod.controller_ref()
        if ref is not None and self._workload_pods(pod) is None:
            return f"its owner {ref.kind}/{ref.name} cannot be found or is not a supported workload"
        if not self.args.skips("ExpectedReplicas") and not self.expected_replicas_ok(pod):
            return "its workload's expected replicas would all be disrupted at once (ExpectedReplicas)"
        active = self._active_jobs(False)
        for gate, check in (
            ("MaxMigratingGlobally", self._globally_ok),
            ("MaxMigratingPerNode", self._per_node_ok),
            ("MaxMigratingPerNamespace", self._per_namespace_ok),
            ("MaxMigratingPerWorkload/MaxUnavailablePerWorkload", self._per_workload_ok),
        ):
            if not any(self.args.skips(g) for g in gate.split("/")) and not check(pod, active):
                return f"{gate} reached"
        return None

    def reservation_filter(self, pod: PodInfo) -> bool:
        if self.args.default_job_mode != MODE_RESERVATION_FIRST:
            return True
        return pod.scheduler_name in self.args.scheduler_names

    def non_retryable(self, pod: PodInfo) -> bool:
        if has_evict_annotation(pod):
            return True
        if self._include and pod.namespace not in self._include:
            return False
        if self._exclude and pod.namespace in self._exclude:
            return False
        if eviction_cost(pod) == MAX_INT32:
            return False
        if not self.evictor_filter.filter(pod):
            return False
        return self.args.skips("ExpectedReplicas") or self.expected_replicas_ok(pod)

    def retryable(self, pod: PodInfo, *, arbitrating: bool) -> bool:
        if has_evict_annotation(pod):
            return True
        skip = self.args.skips
        active = self._active_jobs(arbitrating)
        if not skip("MaxMigratingGlobally") and not self._globally_ok(pod, active):
            return False
        if not skip("MaxMigratingPerNode") and not self._per_node_ok(pod, active):
            return False
        if not skip("MaxMigratingPerNamespace") and not self._per_namespace_ok(pod, active):
            return False
        if skip("MaxMigratingPerWorkload") and skip("MaxUnavailablePerWorkload"):
            return True
        return self._per_workload_ok(pod, active)

    def _globally_ok(self, pod: PodInfo, active: list[Mapping[str, Any]]) -> bool:
        limit = self.args.max_migrating_globally
        if limit is None or limit <= 0:
            return True
        count = sum(1 for j in active if jobs.pod_ref(j) and jobs.pod_ref(j).get("uid") != pod.uid)
        return count < limit

    def _per_node_ok(self, pod: PodInfo, active: list[Mapping[str, Any]]) -> bool:
        limit = self.args.max_migrating_per_node
        if not pod.node_name or limit is None or limit <= 0:
            return True
        count = sum(
            1
            for other in self.handle.pods_on_node(pod.node_name)
            if other.uid != pod.uid and self._job_of(other, active)
        )
        return count < limit

    def _per_namespace_ok(self, pod: PodInfo, active: list[Mapping[str, Any]]) -> bool:
        limit = self.args.max_migrating_per_namespace
        if limit is None or limit <= 0:
            return True
        count = 0
        for job in active:
            ref = jobs.pod_ref(job)
            if ref and ref.get("uid") != pod.uid and ref.get("namespace") == pod.namespace:
                count += 1
        return count < limit

    def _workload_pods(self, pod: PodInfo) -> tuple[list[PodInfo], int] | None:
        """The pods and expected replicas of the pod's workload; None when it cannot be found out."""
        ref = pod.controller_ref()
        assert ref is not None
        try:
            workload = self.finder.workload(ref, pod.namespace)
        except UnsupportedWorkload as err:
            log.debug("pod %s: %s", pod.key, err)
            return None
        if workload is None:
            return [], 0
        pods: dict[str, PodInfo] = {}
        for uid in workload.owner_uids:
            for p in self.handle.pods_owned_by(uid):
                if p.namespace == pod.namespace:
                    pods[p.key] = p
        return list(pods.values()), workload.replicas

    def _per_workload_ok(self, pod: PodInfo, active: list[Mapping[str, Any]]) -> bool:
        ref = pod.controller_ref()
        if ref is None:
            return True
        found = self._workload_pods(pod)
        if found is None:
            return False
        pods, replicas = found
        skip = self.args.skips
        try:
            most_migrating = (
                0
                if skip("MaxMigratingPerWorkload")
                else max_migrating(replicas, self.args.max_migrating_per_workload)
            )
            most_unavailable = (
                0
                if skip("MaxUnavailablePerWorkload")
                else max_unavailable(replicas, self.args.max_unavailable_per_workload)
            )
        except IntOrStringError:
            return False
        migrating: set[str] = set()
        for job in active:
            r = jobs.pod_ref(job)
            if not r or (pod.uid and r.get("uid") == pod.uid):
                continue
            other = self.handle.cluster.try_get(
                "Pod", str(r.get("name") or ""), str(r.get("namespace") or "")
            )
            if other is None:
                continue
            for owner in (other.get("metadata") or {}).get("ownerReferences") or ():
                if owner.get("controller") and owner.get("uid") == ref.uid:
                    migrating.add(f"{r.get('namespace')}/{r.get('name')}")
        if not skip("MaxMigratingPerWorkload") and migrating and len(migrating) >= most_migrating:
            return False
        if skip("MaxUnavailablePerWorkload"):
            return True
        unavailable = {p.key for p in pods if not self._available(p)} | migrating
        return len(unavailable) < most_unavailable

    def _available(self, pod: PodInfo) -> bool:
        """``IsPodActive && IsPodReady``."""
        if pod.phase in ("Succeeded", "Failed") or pod.deletion_time is not None:
            return False
        raw = self.handle.cluster.try_get("Pod", pod.name, pod.namespace)
        if raw is None:
            return False
        for cond in (raw.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "Ready":
                return bool(cond.get("status") == "True")
        return False

    def expected_replicas_ok(self, pod: PodInfo) -> bool:
        """``filterExpectedReplicas``: a workload of one replica, or whose replicas equal maxMigrating or
        maxUnavailable, could lose all its pods at once; refused unless ``skipCheckExpectedReplicas``."""
        ref = pod.controller_ref()
        if ref is None:
            return True
        found = self._workload_pods(pod)
        if found is None:
            return False
        _, replicas = found
        try:
            most_migrating = max_migrating(replicas, self.args.max_migrating_per_workload)
            most_unavailable = max_unavailable(replicas, self.args.max_unavailable_per_workload)
        except IntOrStringError:
            return False
        if self.args.skip_check_expected_replicas:
            return True
        return replicas not in (1, most_migrating, most_unavailable)
