"""The kinds the platform reads and writes, with the API coordinates both adapters need."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KindInfo:
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_TABLE = [
    # core
    KindInfo("Pod", "", "v1", "pods", True),
    KindInfo("Node", "", "v1", "nodes", False),
    KindInfo("Namespace", "", "v1", "namespaces", False),
    KindInfo("ConfigMap", "", "v1", "configmaps", True),
    KindInfo("Event", "", "v1", "events", True),
    KindInfo("Service", "", "v1", "services", True),
    KindInfo("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True),
    KindInfo("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
    KindInfo("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False),
    KindInfo("Lease", "coordination.k8s.io", "v1", "leases", True),
    KindInfo("Deployment", "apps", "v1", "deployments", True),
    KindInfo("ReplicaSet", "apps", "v1", "replicasets", True),
    KindInfo("StatefulSet", "apps", "v1", "statefulsets", True),
    KindInfo("DaemonSet", "apps", "v1", "daemonsets", True),
    KindInfo("Job", "batch", "v1", "jobs", True),
    # Koordinator
    KindInfo("NodeMetric", "slo.koordinator.sh", "v1alpha1", "nodemetrics", False),
    KindInfo("NodeSLO", "slo.koordinator.sh", "v1alpha1", "nodeslos", False),
    KindInfo("ElasticQuota", "scheduling.sigs.k8s.io", "v1alpha1", "elasticquotas", True),
    KindInfo("PodGroup", "scheduling.sigs.k8s.io", "v1alpha1", "podgroups", True),
    KindInfo("Device", "scheduling.koordinator.sh", "v1alpha1", "devices", False),
    KindInfo("Reservation", "scheduling.koordinator.sh", "v1alpha1", "reservations", False),
    KindInfo("PodMigrationJob", "scheduling.koordinator.sh", "v1alpha1", "podmigrationjobs", False),
    KindInfo(
        "ClusterColocationProfile", "config.koordinator.sh", "v1alpha1", "clustercolocationprofiles", False
    ),
    KindInfo("NodeResourceTopology", "topology.node.k8s.io", "v1alpha1", "noderesourcetopologies", False),
]

KINDS: dict[str, KindInfo] = {k.kind: k for k in _TABLE}

# apiVersions a manifest may carry for a kind besides the canonical one (older or alternative groups).
_ALT_VERSIONS: dict[str, set[str]] = {
    "PodDisruptionBudget": {"policy/v1beta1"},
    "Event": {"events.k8s.io/v1"},
    "Device": {"scheduling.koordinator.sh/v1alpha1"},
    "ElasticQuota": {"scheduling.sigs.k8s.io/v1alpha1"},
    "NodeResourceTopology": {"topology.node.k8s.io/v1alpha2"},
    "PriorityClass": {"scheduling.k8s.io/v1beta1"},
}


def kind_info(kind: str) -> KindInfo | None:
    return KINDS.get(kind)


def accepts_api_version(kind: str, api_version: str) -> bool:
    info = KINDS.get(kind)
    if info is None:
        return False
    return api_version == info.api_version or api_version in _ALT_VERSIONS.get(kind, set())


def object_key(obj: dict[str, object]) -> tuple[str, str]:
    """(namespace, name) of a manifest; namespace is "" for cluster-scoped kinds."""
    meta = obj.get("metadata") or {}
    assert isinstance(meta, dict)
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
