"""Memory at scale: 5,000 nodes and 150,000 bound pods in the scheduler's caches, then 1,000 pods scheduled.

The 150,000 pods are SchedulingBasic pods bound round-robin (30 per node) before the scheduler starts, so the
run reports what holding them costs (the embedded cluster's stored manifests, which the shared informer
reuses without copying, plus the slim ``PodInfo`` records of the scheduler's caches) and how long the
informer takes to turn them into records (``seconds.start``). Scheduling 1,000 more pods then shows the
steady state with a cache that large. Target: peak RSS under 1 GiB.
"""

from __future__ import annotations

from bench.scheduler_perf import Workload, _basic, default_config

RSS = Workload(
    name="rss",
    title="Scale: 5,000 nodes and 150,000 bound pods in the cache, then 1,000 pods scheduled",
    nodes=5000,
    init_pods=150_000,
    measured_pods=1000,
    build=_basic("basic"),
    config=default_config,
    min_pods_per_second=0,
    max_rss_mib=1024,
)

WORKLOADS: dict[str, Workload] = {RSS.name: RSS}
