"""Evicting pods to release node resources, shared by every eviction strategy (Koordinator's
``qosmanager/plugins/util``: ``KillAndEvictPods``, ``Evictor``).

An eviction strategy turns node pressure into ``EvictTask``s: how much of which resource to release
(``to_release``), measured how (``release_target``: pod usage, pod requests), the candidates in eviction
order, and how much one pod releases. ``kill_and_evict_pods`` works through the tasks of one round:

* what earlier tasks released counts for later tasks of the same target (never evict twice for one gap);
* a pod evicted in an earlier round that is still present (terminating, held by a PodDisruptionBudget)
  counts as released instead of picking another victim;
* a pod evicted by one task is not evicted again by another; one pod releases, per resource, the maximum
  any task attributes to it.

Every eviction goes through the cluster port's Eviction API (``cluster.evict(..., reason=...,
requested_by="koordlet")``), and the ``Evictor`` remembers evicted pod uids so **no pod is ever evicted
twice**, even across strategies and rounds.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from prometheus_client import CollectorRegistry, Counter

from koord_framework.api.constants import (
    ANNOTATION_EVICTION_POLICY,
    ANNOTATION_EVICTION_PRIORITY,
    LABEL_EVICTION_ENABLED,
    LABEL_PRIORITY,
)
from koord_framework.api.objects import PodInfo
from koord_framework.api.qos import PriorityClass
from koord_framework.api.resources import BATCH_CPU, BATCH_MEMORY, CPU, MEMORY, MID_CPU, MID_MEMORY
from koord_framework.api.strconv import parse_int
from koord_framework.cluster.clock import Clock, WallClock
from koord_framework.cluster.port import ClusterPort, EventRecord
from koord_framework.errors import ClusterError
from koord_framework.koordlet.states import PodMeta

log = logging.getLogger(__name__)

__all__ = [
    "EVICT_REASON_PREFIX",
    "EvictTask",
    "EvictionRecord",
    "Evictor",
    "PodEvictInfo",
    "ReleaseTarget",
    "eviction_policy_allowed",
    "kill_and_evict_pods",
    "pod_evict_enabled",
    "pod_eviction_priority",
    "pod_priority_label",
    "request_from_pod",
    "request_type_and_value",
    "sort_by_eviction_order",
    "sort_by_less",
    "task_remaining",
]

EVICT_REASON_PREFIX: Final = "trigger by koordlet feature "
REQUESTED_BY: Final = "koordlet"


class ReleaseTarget(StrEnum):
    BATCH_RESOURCE_REQUEST = "podBatchResourceRequest"
    RESOURCE_USED = "podUsed"
    RESOURCE_REQUEST = "podResourceRequest"


@dataclass(slots=True)
class PodEvictInfo:
    """A candidate with what the sort and the release accounting need (``PodEvictInfo``)."""

    pod: PodMeta
    cpu_usage: float = 0.0
    """Used / requested CPU."""
    milli_cpu_request: int = 0
    milli_cpu_used: int = 0
    memory_usage: float = 0.0
    memory_request: int = 0
    memory_used: int = 0
    priority: int = 0
    label_priority: int = 0
    eviction_priority: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "pod": self.pod.key,
            "uid": self.pod.uid,
            "milliCPURequest": self.milli_cpu_request,
            "milliCPUUsed": self.milli_cpu_used,
            "cpuUsage": self.cpu_usage,
            "memoryRequest": self.memory_request,
            "memoryUsed": self.memory_used,
            "priority": self.priority,
        }


PodResourceFn = Callable[[PodEvictInfo], Mapping[str, int] | None]


@dataclass(slots=True)
class EvictTask:
    reason: str
    sorted_pods: Sequence[PodEvictInfo]
    release_target: ReleaseTarget
    to_release: Mapping[str, int]
    pod_resource: PodResourceFn


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    time: float
    namespace: str
    name: str
    uid: str
    reason: str
    ok: bool
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "time": self.time,
            "pod": f"{self.namespace}/{self.name}",
            "uid": self.uid,
            "reason": self.reason,
            "ok": self.ok,
            "error": self.error,
        }


class Evictor:
    """Evicts through the cluster's Eviction API and never evicts the same pod twice."""

    def __init__(
        self,
        cluster: ClusterPort | None,
        *,
        clock: Clock | None = None,
        dry_run: bool = False,
        registry: CollectorRegistry | None = None,
        history: int = 1024,
    ) -> None:
        self.cluster = cluster
        self.clock: Clock = clock or WallClock()
        self.dry_run = dry_run
        self._evicted: dict[str, float] = {}
        self._lock = threading.Lock()
        self.records: deque[EvictionRecord] = deque(maxlen=history)
        self._counter: Counter | None = None
        if registry is not None:
            self._counter = Counter(
                "koordlet_pod_eviction",
                "Pods the koordlet evicted, by the feature that asked.",
                ["reason"],
                registry=registry,
            )

    def is_evicted(self, pod: PodMeta | PodInfo) -> bool:
        uid = pod.uid
        with self._lock:
            return uid in self._evicted

    def evict(self, pod: PodMeta | PodInfo, reason: str) -> bool:
        """Evict once. True when the pod is (now or already) evicted; False when the cluster refused
        (PodDisruptionBudget, gone, no cluster) -- it may be tried again in a later round."""
        info = pod.pod if isinstance(pod, PodMeta) else pod
        with self._lock:
            if info.uid in self._evicted:
                return True
            now = self.clock.now()
            if self.cluster is None:
                self.records.append(
                    EvictionRecord(now, info.namespace, info.name, info.uid, reason, False, "no cluster")
                )
                return False
            try:
                self.cluster.evict(
                    info.namespace,
                    info.name,
                    reason=reason,
                    requested_by=REQUESTED_BY,
                    dry_run=self.dry_run,
                    uid=info.uid or None,
                )
            except ClusterError as err:
                log.warning("evicting %s failed: %s", info.key, err)
                self.records.append(
                    EvictionRecord(now, info.namespace, info.name, info.uid, reason, False, str(err))
                )
                self._event(info, EVENT_EVICT_FAIL, f"{_evict_message(info, reason)}, error {err}", now)
                return False
            self._evicted[info.uid] = now
            self.records.append(EvictionRecord(now, info.namespace, info.name, info.uid, reason, True))
            if self._counter is not None:
                self._counter.labels(reason.split(",")[0]).inc()
            log.info("evicted %s: %s", info.key, reason)
            self._event(info, EVENT_EVICT_SUCCESS, _evict_message(info, reason), now)
            return True

    def _event(self, info: PodInfo, reason: str, message: str, now: float) -> None:
        """Koordinator's evictor records both outcomes as Warning events on the pod."""
        if self.cluster is None or self.dry_run:
            return
        self.cluster.record_event(
            EventRecord(
                kind="Pod",
                namespace=info.namespace,
                name=info.name,
                reason=reason,
                message=message,
                type="Warning",
                component=REQUESTED_BY,
                time=now,
                extra={"uid": info.uid} if info.uid else {},
                action="Evicting",
            )
        )

    def forget_gone(self, present_uids: Iterable[str]) -> None:
        """Drop uids of pods that left the node: a uid is never reused, so only memory is at stake."""
        alive = set(present_uids)
        with self._lock:
            for uid in [u for u in self._evicted if u not in alive]:
                del self._evicted[uid]

    def records_since(self, since: float) -> list[EvictionRecord]:
        with self._lock:
            return [r for r in self.records if r.time >= since]


EVENT_EVICT_SUCCESS = "evictPodSuccess"
EVENT_EVICT_FAIL = "evictPodFail"


def _evict_message(info: PodInfo, reason: str) -> str:
    """``evict Pod:<ns>/<name>, reason: <reason>, message: <message>`` as Koordinator's evictor words it
    (koord's reasons are ``<reason>, <message>``)."""
    code, _, detail = reason.partition(", ")
    return f"evict Pod:{info.namespace}/{info.name}, reason: {code}, message: {detail}"


def _add(a: dict[str, int], b: Mapping[str, int]) -> None:
    for k, v in b.items():
        a[k] = a.get(k, 0) + v


def _max_merge(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        if k not in out or out[k] < v:
            out[k] = v
    return out


def task_remaining(to_release: Mapping[str, int], released: Mapping[str, int] | None) -> dict[str, int]:
    """What is still to release: the positive part of ``to_release - released``
    (``subReleaseListNoNegative``)."""
    rel = released or {}
    return {k: v - rel.get(k, 0) for k, v in to_release.items() if v > rel.get(k, 0)}


def kill_and_evict_pods(
    evictor: Evictor, tasks: Sequence[EvictTask]
) -> tuple[dict[ReleaseTarget, dict[str, int]], bool]:
    """Run the tasks in order; returns the release per target and whether any pod was newly evicted."""
    released: dict[ReleaseTarget, dict[str, int]] = {}
    evicted_now: set[str] = set()
    newly = False
    resource_fns: list[tuple[ReleaseTarget, PodResourceFn]] = []
    for task in tasks:
        if not task.to_release:
            continue
        positive = [r for r, q in task.to_release.items() if q > 0]
        if positive:
            released.setdefault(task.release_target, {})
            resource_fns.append((task.release_target, task.pod_resource))

    def aggregate(info: PodEvictInfo) -> dict[ReleaseTarget, dict[str, int]]:
        # One pod's release per target is the max over the tasks' views of it, never their sum.
        out: dict[ReleaseTarget, dict[str, int]] = {}
        for target, fn in resource_fns:
            out[target] = _max_merge(out.get(target, {}), fn(info) or {})
        return out

    for task in tasks:
        target = task.release_target
        if not task_remaining(task.to_release, released.get(target)):
            continue
        for info in task.sorted_pods:
            uid = info.pod.uid
            if uid in evicted_now:
                continue
            if evictor.is_evicted(info.pod):
                # Evicted in an earlier round and still here: its release is on the way; don't pick another.
                evicted_now.add(uid)
                for t, res in aggregate(info).items():
                    _add(released.setdefault(t, {}), res)
                if not task_remaining(task.to_release, released.get(target)):
                    break
                continue
            if evictor.evict(info.pod, f"{task.reason}, kill pod: {info.pod.pod.name}"):
                evicted_now.add(uid)
                newly = True
                for t, res in aggregate(info).items():
                    _add(released.setdefault(t, {}), res)
                if not task_remaining(task.to_release, released.get(target)):
                    break
    return released, newly


def eviction_policy_allowed(policy: str, pod: PodInfo) -> bool:
    """The ``koordinator.sh/eviction-policy`` annotation (a JSON list of feature names) lets only those
    features evict the pod; absent = all may, unparsable = none may (``IsEvictionPolicyAllowed``)."""
    content = pod.annotations.get(ANNOTATION_EVICTION_POLICY)
    if content is None:
        return True
    try:
        policies = json.loads(content)
    except ValueError:
        log.error("pod %s has an invalid %s annotation %r", pod.key, ANNOTATION_EVICTION_POLICY, content)
        return False
    # Go decodes into []string: a list holding anything but strings is an error, i.e. "none may".
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        return False
    return policy in policies


def pod_evict_enabled(pod: PodInfo) -> bool:
    """Label ``koordinator.sh/eviction-enabled: "true"`` (priority-based eviction needs the opt-in)."""
    return pod.labels.get(LABEL_EVICTION_ENABLED) == "true"


def pod_eviction_priority(pod: PodInfo) -> int:
    """``koordinator.sh/eviction-priority`` as int32; 0 when missing or invalid."""
    value = pod.annotations.get(ANNOTATION_EVICTION_PRIORITY)
    n = parse_int(value, 32) if value is not None else None
    return n if n is not None else 0


def pod_priority_label(pod: PodInfo, default: int) -> int:
    """The ``koordinator.sh/priority`` label as an int (``strconv.Atoi``), else ``default``."""
    value = pod.labels.get(LABEL_PRIORITY)
    n = parse_int(value) if value is not None else None
    return n if n is not None else default


_CLASS_RESOURCES: Final = {
    PriorityClass.MID: {CPU: MID_CPU, MEMORY: MID_MEMORY},
    PriorityClass.BATCH: {CPU: BATCH_CPU, MEMORY: BATCH_MEMORY},
}


def request_type_and_value(pod: PodMeta | PodInfo, name: str) -> tuple[str, int]:
    """The resource a pod requests for ``cpu``/``memory`` given its priority class, and how much:
    mid/batch pods sum their containers' ``kubernetes.io/{mid,batch}-*`` requests (app and sidecar, negatives
    as 0); other pods use the Kubernetes pod request, cpu in milli-cores
    (``GetRequestTypeAndValueFromPod``)."""
    info = pod.pod if isinstance(pod, PodMeta) else pod
    mapping = _CLASS_RESOURCES.get(info.priority_class)
    if mapping is None:
        return name, info.requests.get(name, 0)
    rname = mapping[name]
    total = 0
    for c in info.containers:
        if c.kind in ("app", "sidecar"):
            total += max(c.requests.get(rname, 0), 0)
    return rname, total


def request_from_pod(pod: PodMeta | PodInfo, name: str) -> dict[str, int]:
    rname, value = request_type_and_value(pod, name)
    return {rname: value}


def sort_by_eviction_order(
    infos: Sequence[PodEvictInfo], then: Callable[[PodEvictInfo, PodEvictInfo], bool]
) -> list[PodEvictInfo]:
    """Order of priority-based eviction (``getPodEvictInfoAndSortByPriority``): eviction-priority annotation
    ascending, then priority value, then the ``koordinator.sh/priority`` label, then ``then(a, b)`` ("a
    before b"). Go's sort is unstable; ties keep their input order here."""

    def less(a: PodEvictInfo, b: PodEvictInfo) -> bool:
        if a.eviction_priority != b.eviction_priority:
            return a.eviction_priority < b.eviction_priority
        if a.priority != b.priority:
            return a.priority < b.priority
        if a.label_priority != b.label_priority:
            return a.label_priority < b.label_priority
        return then(a, b)

    return sort_by_less(infos, less)


def sort_by_less(
    items: Sequence[PodEvictInfo], less: Callable[[PodEvictInfo, PodEvictInfo], bool]
) -> list[PodEvictInfo]:
    """Sort with a Go-style ``less(a, b)`` (stable)."""

    def cmp(a: PodEvictInfo, b: PodEvictInfo) -> int:
        if less(a, b):
            return -1
        if less(b, a):
            return 1
        return 0

    return sorted(items, key=functools.cmp_to_key(cmp))
