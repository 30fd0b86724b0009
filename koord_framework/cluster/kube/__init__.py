"""The real-cluster adapter: the only package that imports the ``kubernetes`` client.

``KubeCluster`` implements the cluster port on an API server (list+watch, bind, evict, patch, events);
``LeaderElector`` keeps exactly one replica of a component active with a Lease. See docs/kubernetes.md.
"""

from koord_framework.cluster.kube.adapter import KubeCluster
from koord_framework.cluster.kube.leader import LeaderElectionConfig, LeaderElector
from koord_framework.cluster.kube.ratelimit import TokenBucket
from koord_framework.cluster.kube.transport import DEFAULT_BURST, DEFAULT_QPS

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "KubeCluster",
    "LeaderElectionConfig",
    "LeaderElector",
    "TokenBucket",
]
