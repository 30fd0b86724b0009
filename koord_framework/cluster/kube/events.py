"""Kubernetes Events on the API server: the writer behind the real cluster's ``EventRecorder``.

The recorder (``koord_framework.cluster.events``) correlates, deduplicates and rate-limits in a background
thread; this writer posts new ``core/v1`` Events and merge-patches repeated ones (``count``,
``lastTimestamp``, ``message``), as client-go's ``EventSinkImpl`` does. Only a server that cannot be
reached is worth retrying; any answer from it (a namespace being deleted, a 422) loses the event.
"""

from __future__ import annotations

import copy

from koord_framework.cluster.clock import Clock
from koord_framework.cluster.events import EventRecorder
from koord_framework.cluster.kube.errors import KubeApiError
from koord_framework.cluster.kube.ratelimit import TokenBucket
from koord_framework.cluster.kube.transport import Transport
from koord_framework.cluster.port import Obj
from koord_framework.errors import ClusterError

__all__ = ["KubeEventWriter", "kube_event_recorder", "unreachable"]

MERGE_PATCH = "application/merge-patch+json"


class KubeEventWriter:
    """``EventWriter`` on ``/api/v1/namespaces/<ns>/events``.

    Events get a client rate limit of their own (same QPS and burst), as kube-scheduler builds a separate
    clientset for its event broadcaster: a burst of events never takes the tokens a bind needs. The
    connection pool, discovery and the connectivity tracker stay shared.
    """

    def __init__(self, transport: Transport) -> None:
        own = copy.copy(transport)
        own.limiter = TokenBucket(transport.limiter.qps, transport.limiter.burst)
        self.transport = own

    def create_event(self, manifest: Obj) -> Obj:
        namespace = manifest["metadata"]["namespace"]
        stored = self.transport.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/events",
            f"record event {manifest['reason']} for {manifest['involvedObject']['name']}",
            body=manifest,
        )
        return stored if isinstance(stored, dict) else manifest

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        stored = self.transport.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/events/{name}",
            f"update event {namespace}/{name}",
            body=patch,
            content_type=MERGE_PATCH,
        )
        return stored if isinstance(stored, dict) else {}


def unreachable(err: ClusterError) -> bool:
    """A request that never got an answer (connection refused, reset, timed out): worth retrying."""
    return isinstance(err, KubeApiError) and err.status == 0


def kube_event_recorder(
    transport: Transport, *, component: str, clock: Clock, capacity: int = 1000
) -> EventRecorder:
    return EventRecorder(
        KubeEventWriter(transport),
        component=component,
        clock=clock,
        kinds=transport.kinds,
        asynchronous=True,
        capacity=capacity,
        retryable=unreachable,
    )
