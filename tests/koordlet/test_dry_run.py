"""``koord koordlet --dry-run``: the executor decides and audits but writes nothing; repeated errors of the
long-running agent are rate-limited."""

from __future__ import annotations

from collections.abc import Callable

from koord_framework.api.qos import KubeQoS
from koord_framework.cli.koordlet import RepeatLimiter
from koord_framework.cluster.clock import VirtualClock
from koord_framework.koordlet.executor import CgroupUpdate, ResourceExecutor, WriteStatus
from koord_framework.testing.hosttree import FakeHostTree


def test_a_dry_run_executor_audits_what_it_would_write_and_writes_nothing(
    koord_host_tree: Callable[..., FakeHostTree],
) -> None:
    tree = koord_host_tree(version=1, driver="systemd", cpus=8)
    be = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    ex = ResourceExecutor(tree.layout, clock=VirtualClock(1000.0), node_cpus=range(8), dry_run=True)
    result = ex.update(CgroupUpdate("cpu.cfs_quota_us", be, "200000", "suppress BE", "BECPUSuppress"))
    assert result.status is WriteStatus.WRITTEN and result.old == "-1"
    (rec,) = ex.audit
    assert (rec.old, rec.new, rec.owner) == ("-1", "200000", "BECPUSuppress")
    assert tree.read("cpu.cfs_quota_us", be) == "-1"  # the host is untouched


def test_the_same_error_is_printed_once_a_minute_with_its_count() -> None:
    clock = VirtualClock(0.0)
    limiter = RepeatLimiter(clock.now, interval=60.0)
    assert limiter.filter(["cgroup gone"]) == ["cgroup gone"]
    for _ in range(5):
        clock.advance(1.0)
        assert limiter.filter(["cgroup gone"]) == []
    assert limiter.filter(["api down"]) == ["api down"]  # a different error is not held back
    clock.advance(60.0)
    assert limiter.filter(["cgroup gone"]) == ["cgroup gone (repeated 5 times since)"]
