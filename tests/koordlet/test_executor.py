"""The resource executor: validation, v2 translation, skip-unchanged and caching, audit, ordered multi-file
updates with rollback, and failures reported instead of raised."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koord_framework.api.qos import KubeQoS
from koord_framework.cluster.clock import VirtualClock
from koord_framework.koordlet import executor as executor_module
from koord_framework.koordlet.executor import CgroupUpdate, FileUpdate, ResourceExecutor, WriteStatus
from koord_framework.testing.hosttree import FakeHostTree

HostFactory = Callable[..., FakeHostTree]


def _executor(tree: FakeHostTree, **kw: Any) -> tuple[ResourceExecutor, VirtualClock]:
    clock = VirtualClock(1000.0)
    return ResourceExecutor(tree.layout, clock=clock, node_cpus=range(len(tree.processors)), **kw), clock


@pytest.fixture
def v1(koord_host_tree: HostFactory) -> FakeHostTree:
    return koord_host_tree(version=1, driver="systemd", cpus=8)


def be(tree: FakeHostTree) -> str:
    return tree.layout.qos_dir(KubeQoS.BEST_EFFORT)


def test_write_then_skip_unchanged_with_audit(v1: FakeHostTree) -> None:
    ex, _ = _executor(v1)
    u = CgroupUpdate("cpu.cfs_quota_us", be(v1), "200000", "suppress BE", "BECPUSuppress")
    first = ex.update(u)
    assert first.status is WriteStatus.WRITTEN and first.changed and first.old == "-1"
    assert v1.read("cpu.cfs_quota_us", be(v1)) == "200000"
    (rec,) = ex.audit
    assert (rec.time, rec.old, rec.new, rec.reason, rec.owner) == (
        1000.0,
        "-1",
        "200000",
        "suppress BE",
        "BECPUSuppress",
    )
    assert rec.path == str(v1.path("cpu.cfs_quota_us", be(v1)))
    again = ex.update(u)
    assert again.status is WriteStatus.UNCHANGED
    assert len(ex.audit) == 1  # nothing written, nothing audited


@pytest.mark.parametrize(
    ("resource", "value", "problem"),
    [
        ("cpu.cfs_quota_us", "500", ">= 1000 us"),
        ("cpu.cfs_quota_us", "0", ">= 1000 us"),
        ("cpu.cfs_quota_us", "lots", "must be an integer"),
        ("cpu.shares", "1", "must be >= 2"),
        ("cpu.shares", "262145", "must be <= 262144"),
        ("cpu.cfs_burst_us", "-5", "must be >= 0"),
        ("cpuset.cpus", "0-8", "cpus 8 the node does not have (0-7)"),
        ("cpuset.cpus", "3-1", "invalid cpu range"),
        ("cpu.stat", "1", "read-only"),
        ("no.such.file", "1", "unknown cgroup resource"),
    ],
)
def test_validation_refuses_bad_values(v1: FakeHostTree, resource: str, value: str, problem: str) -> None:
    ex, _ = _executor(v1)
    before = {p: p.read_text() for p in v1.layout.dir_path("cpu", be(v1)).iterdir()}
    res = ex.update(CgroupUpdate(resource, be(v1), value))
    assert res.status is WriteStatus.INVALID and not res.ok
    assert problem in (res.error or "")
    assert {p: p.read_text() for p in v1.layout.dir_path("cpu", be(v1)).iterdir()} == before
    assert ex.audit[-1].status is WriteStatus.INVALID


@pytest.mark.parametrize(
    ("resource", "value"), [("cpu.cfs_quota_us", "-1"), ("cpu.cfs_quota_us", "1000"), ("cpuset.cpus", "0-7")]
)
def test_validation_accepts_limits(v1: FakeHostTree, resource: str, value: str) -> None:
    ex, _ = _executor(v1)
    assert ex.update(CgroupUpdate(resource, be(v1), value)).ok


def test_missing_dir_and_unsupported_file_are_skips(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=1, cpus=4, cpu_burst=False)
    ex, _ = _executor(tree)
    gone = ex.update(CgroupUpdate("cpu.cfs_quota_us", "kubepods.slice/gone", "5000"))
    assert gone.status is WriteStatus.MISSING and gone.ok
    no_burst = ex.update(CgroupUpdate("cpu.cfs_burst_us", be(tree), "100"))
    assert no_burst.status is WriteStatus.UNSUPPORTED and no_burst.ok
    assert ex.audit == []


def test_cacheable_updates_skip_without_reading_until_forced(v1: FakeHostTree) -> None:
    ex, clock = _executor(v1, force_update_seconds=60)
    u = CgroupUpdate("cpu.shares", be(v1), "2")
    assert ex.update(u, cacheable=True).status is WriteStatus.WRITTEN
    v1.write("cpu.shares", be(v1), "1024")  # someone else changed it
    assert ex.update(u, cacheable=True).status is WriteStatus.CACHED
    assert v1.read("cpu.shares", be(v1)) == "1024"
    clock.advance(61)
    assert ex.update(u, cacheable=True).status is WriteStatus.WRITTEN
    assert v1.read("cpu.shares", be(v1)) == "2"


def test_cpusets_compare_as_sets_and_max_as_maxint(v1: FakeHostTree, koord_host_tree: HostFactory) -> None:
    ex, _ = _executor(v1)
    v1.write("cpuset.cpus", be(v1), "2,3")
    assert ex.update(CgroupUpdate("cpuset.cpus", be(v1), "2-3")).status is WriteStatus.UNCHANGED
    v2 = koord_host_tree(version=2, cpus=4)
    ex2, _ = _executor(v2)
    assert ex2.update(CgroupUpdate("memory.limit_in_bytes", be(v2), "-1")).status is WriteStatus.UNCHANGED
    assert (
        ex2.update(CgroupUpdate("memory.limit_in_bytes", be(v2), "9223372036854775807")).status
        is WriteStatus.UNCHANGED
    )


def test_v2_translation(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(version=2, driver="cgroupfs", cpus=4)
    ex, _ = _executor(tree)
    d = be(tree)
    assert ex.update(CgroupUpdate("cpu.cfs_quota_us", d, "50000")).changed
    assert tree.read("cpu.cfs_quota_us", d) == "50000 100000"
    assert ex.update(CgroupUpdate("cpu.cfs_period_us", d, "200000")).changed
    assert tree.read("cpu.cfs_quota_us", d) == "50000 200000"
    assert ex.update(CgroupUpdate("cpu.cfs_quota_us", d, "-1")).changed
    assert tree.read("cpu.cfs_quota_us", d) == "max 200000"
    assert ex.update(CgroupUpdate("cpu.shares", d, "2")).changed
    assert (tree.layout.dir_path("cpu", d) / "cpu.weight").read_text() == "1"
    assert ex.update(CgroupUpdate("memory.limit_in_bytes", d, "1073741824")).changed
    assert ex.update(CgroupUpdate("memory.limit_in_bytes", d, "-1")).changed
    assert (tree.layout.dir_path("memory", d) / "memory.max").read_text() == "max"
    assert ex.update(CgroupUpdate("cpu.cfs_burst_us", d, "1000")).changed
    assert (tree.layout.dir_path("cpu", d) / "cpu.max.burst").read_text() == "1000"


def _fail_on(monkeypatch: pytest.MonkeyPatch, *paths: Path) -> None:
    real = executor_module._os_write

    def fake(path: Path, text: str, append: bool) -> None:
        if path in paths:
            raise OSError(errno.EBUSY, "Device or resource busy")
        real(path, text, append)

    monkeypatch.setattr(executor_module, "_os_write", fake)


def test_failed_write_is_reported_and_counted(v1: FakeHostTree, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = CollectorRegistry()
    ex, _ = _executor(v1, registry=registry)
    _fail_on(monkeypatch, v1.path("cpu.cfs_quota_us", be(v1)))
    res = ex.update(CgroupUpdate("cpu.cfs_quota_us", be(v1), "5000", owner="test"))
    assert res.status is WriteStatus.FAILED
    assert "Device or resource busy" in (res.error or "")
    assert ex.audit[-1].status is WriteStatus.FAILED
    assert (
        registry.get_sample_value(
            "koordlet_resource_update_total", {"resource": "cpu.cfs_quota_us", "status": "failed"}
        )
        == 1.0
    )


def _tree_levels(tree: FakeHostTree) -> tuple[str, str, str]:
    top = be(tree)
    pod = tree.ensure_cgroup(f"{top}/kubepods-besteffort-podx.slice")
    ctr = tree.ensure_cgroup(f"{pod}/cri-containerd-c.scope")
    return top, pod, ctr


def _order(ex: ResourceExecutor) -> list[tuple[str, str]]:
    return [(Path(r.path).parent.name, r.new) for r in ex.audit]


def test_leveled_shrink_writes_children_first(v1: FakeHostTree) -> None:
    top, pod, ctr = _tree_levels(v1)
    ex, _ = _executor(v1)
    levels = [[CgroupUpdate("cpuset.cpus", d, "0-1")] for d in (top, pod, ctr)]
    assert all(r.ok for r in ex.leveled_update(levels))
    assert _order(ex) == [
        ("cri-containerd-c.scope", "0-1"),
        ("kubepods-besteffort-podx.slice", "0-1"),
        ("kubepods-besteffort.slice", "0-1"),
    ]


def test_leveled_grow_loosens_parents_first(v1: FakeHostTree) -> None:
    top, pod, ctr = _tree_levels(v1)
    for d in (top, pod, ctr):
        v1.write("cpuset.cpus", d, "0-1")
    ex, _ = _executor(v1)
    levels = [[CgroupUpdate("cpuset.cpus", d, "4-5")] for d in (top, pod, ctr)]
    assert all(r.ok for r in ex.leveled_update(levels))
    # pass 1 top-down: old | new; pass 2 bottom-up: new
    assert _order(ex) == [
        ("kubepods-besteffort.slice", "0-1,4-5"),
        ("kubepods-besteffort-podx.slice", "0-1,4-5"),
        ("cri-containerd-c.scope", "0-1,4-5"),
        ("cri-containerd-c.scope", "4-5"),
        ("kubepods-besteffort-podx.slice", "4-5"),
        ("kubepods-besteffort.slice", "4-5"),
    ]
    for d in (top, pod, ctr):
        assert v1.read("cpuset.cpus", d) == "4-5"


def test_leveled_failure_rolls_back_the_batch(v1: FakeHostTree, monkeypatch: pytest.MonkeyPatch) -> None:
    top, pod, ctr = _tree_levels(v1)
    for d in (top, pod, ctr):
        v1.write("cpuset.cpus", d, "0-3")
    ex, _ = _executor(v1)
    _fail_on(monkeypatch, v1.path("cpuset.cpus", top))  # the last write of the shrink fails
    results = ex.leveled_update([[CgroupUpdate("cpuset.cpus", d, "0")] for d in (top, pod, ctr)])
    # one result per update, top first: the top failed, the two written below it were restored
    assert [r.status for r in results] == [
        WriteStatus.FAILED,
        WriteStatus.ROLLED_BACK,
        WriteStatus.ROLLED_BACK,
    ]
    for d in (top, pod, ctr):
        assert v1.read("cpuset.cpus", d) == "0-3"
    assert [r.status for r in ex.audit][-2:] == [WriteStatus.ROLLED_BACK, WriteStatus.ROLLED_BACK]


def test_transaction_is_all_or_nothing(v1: FakeHostTree, monkeypatch: pytest.MonkeyPatch) -> None:
    top, pod, _ = _tree_levels(v1)
    ex, _ = _executor(v1)
    _fail_on(monkeypatch, v1.path("cpu.cfs_quota_us", pod))
    results = ex.transaction(
        [CgroupUpdate("cpu.cfs_quota_us", top, "400000"), CgroupUpdate("cpu.cfs_quota_us", pod, "200000")]
    )
    assert [r.status for r in results] == [WriteStatus.ROLLED_BACK, WriteStatus.FAILED]
    assert v1.read("cpu.cfs_quota_us", top) == "-1"


def test_batch_failures_are_independent(v1: FakeHostTree, monkeypatch: pytest.MonkeyPatch) -> None:
    top, pod, _ = _tree_levels(v1)
    ex, _ = _executor(v1)
    _fail_on(monkeypatch, v1.path("cpu.shares", top))
    results = ex.update_batch([CgroupUpdate("cpu.shares", top, "2"), CgroupUpdate("cpu.shares", pod, "2")])
    assert [r.status for r in results] == [WriteStatus.FAILED, WriteStatus.WRITTEN]


def test_file_updates_for_resctrl(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4).with_resctrl(groups=["BE"], cbm_mask="7ff", cache_ids=(0, 1))
    ex, _ = _executor(tree)
    schemata = tree.paths.resctrl_file("BE", "schemata")

    def valid(v: str) -> str | None:
        return None if v.startswith("L3:") else "not an L3 line"

    assert ex.update(FileUpdate(schemata, "L3:0=7;1=7;\n", validate=valid)).changed
    assert schemata.read_text() == "L3:0=7;1=7;\n"
    assert ex.update(FileUpdate(schemata, "bogus", validate=valid)).status is WriteStatus.INVALID
    tasks = tree.paths.resctrl_file("BE", "tasks")
    ex.update(FileUpdate(tasks, "12\n", append=True))
    ex.update(FileUpdate(tasks, "13\n", append=True))
    assert tasks.read_text() == "12\n13\n"
