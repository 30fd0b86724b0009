"""The controller finder: a pod's workload, its expected replicas and its pods (``controllerfinder``).

Supported owners, as in Koordinator: ReplicaSet (a ReplicaSet owned by a Deployment stands for the
Deployment: its replicas and the pods of all its ReplicaSets), Deployment, StatefulSet and
ReplicationController. A workload missing from the cluster has 0 expected replicas; any other owner kind
is an error (Koordinator then asks the scale subresource, which these kinds do not have), and the filters
refuse such pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from koord_framework.api.objects import OwnerRef, PodInfo
from koord_framework.api.selectors import parse_label_selector
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import NotFoundError

SUPPORTED_KINDS = frozenset({"ReplicaSet", "Deployment", "StatefulSet", "ReplicationController"})


class UnsupportedWorkload(Exception):
    pass


@dataclass(frozen=True)
class Workload:
    kind: str
    name: str
    uid: str
    replicas: int
    owner_uids: tuple[str, ...]
    """The uids whose pods are the workload's pods (a Deployment: its ReplicaSets)."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


class ControllerFinder:
    def __init__(self, cluster: ClusterPort) -> None:
        self.cluster = cluster

    def _get(self, kind: str, name: str, namespace: str, uid: str) -> Mapping[str, Any] | None:
        try:
            obj = self.cluster.get(kind, name, namespace)
        except NotFoundError:
            return None
        if uid and _meta(obj).get("uid") != uid:
            return None
        return obj

    def workload(self, ref: OwnerRef, namespace: str) -> Workload | None:
        """``GetScaleAndSelectorForRef`` + the pod owners of ``GetPodsForRef``; None when it is gone."""
        if ref.kind not in SUPPORTED_KINDS:
            raise UnsupportedWorkload(f"no scale subresource for {ref.kind} {namespace}/{ref.name}")
        obj = self._get(ref.kind, ref.name, namespace, ref.uid)
        if obj is None:
            return None
        if ref.kind == "ReplicaSet":
            owner = _controller_of(obj)
            if owner is not None and owner.get("kind") == "Deployment":
                deployment = self._get(
                    "Deployment", str(owner.get("name") or ""), namespace, str(owner.get("uid") or "")
                )
                if deployment is None:
                    return None
                return self._deployment(deployment, namespace)
        if ref.kind == "Deployment":
            return self._deployment(obj, namespace)
        return Workload(
            ref.kind,
            ref.name,
            str(_meta(obj).get("uid") or ""),
            _replicas(obj),
            (str(_meta(obj).get("uid") or ""),),
        )

    def _deployment(self, deployment: Mapping[str, Any], namespace: str) -> Workload:
        uid = str(_meta(deployment).get("uid") or "")
        selector = parse_label_selector((deployment.get("spec") or {}).get("selector"))
        sets, _ = self.cluster.list("ReplicaSet", namespace)
        owners = []
        for rs in sets:
            if not selector.matches(_meta(rs).get("labels") or {}):
                continue
            owner = _controller_of(rs)
            if owner is not None and owner.get("uid") == uid:
                owners.append(str(_meta(rs).get("uid") or ""))
        return Workload(
            "Deployment",
            str(_meta(deployment).get("name") or ""),
            uid,
            _replicas(deployment),
            tuple(owners) or (uid,),
        )

    def expected_replicas(self, pod: PodInfo) -> int:
        """``GetExpectedScaleForPod``; 0 without a controller or when the workload is gone."""
        ref = pod.controller_ref()
        if ref is None:
            return 0
        found = self.workload(ref, pod.namespace)
        return 0 if found is None else found.replicas
