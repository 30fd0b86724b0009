"""cgroup v1/v2 detection, kubepods paths for both drivers, and the cgroup file parsers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from koord_framework.api.qos import KubeQoS
from koord_framework.koordlet.cgroups import (
    MAX_INT64,
    CgroupDriver,
    CgroupLayout,
    CgroupNotFoundError,
    CgroupParseError,
    CgroupReader,
    CgroupVersion,
    CPUStat,
    detect_driver,
    detect_version,
    parse_cpu_max,
    parse_cpu_stat,
    parse_int_lines,
    parse_int_value,
    parse_memory_stat,
    shares_to_weight,
    throttled_ratio,
    weight_to_shares,
)
from koord_framework.koordlet.cpuset import CPUSetError, format_cpuset, parse_cpuset, same_cpus
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod

HostFactory = Callable[..., FakeHostTree]
UID = "7712555c-ce62-454a-9e18-9ff0217b8941"


def layout(driver: CgroupDriver, version: CgroupVersion = CgroupVersion.V1) -> CgroupLayout:
    return CgroupLayout(HostPaths.under("/h"), version, driver)


def test_host_paths_are_explicit() -> None:
    hp = HostPaths.under("/host")
    assert hp.proc == Path("/host/proc")
    assert hp.cgroup == Path("/host/sys/fs/cgroup")
    assert hp.resctrl == Path("/host/sys/fs/resctrl")
    assert HostPaths.host().proc == Path("/proc")
    assert hp.with_cgroup("/x").cgroup == Path("/x")


@pytest.mark.parametrize(
    ("qos", "expected"),
    [
        (KubeQoS.GUARANTEED, f"kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice"),
        (
            KubeQoS.BURSTABLE,
            f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice",
        ),
        (
            KubeQoS.BEST_EFFORT,
            f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice",
        ),
    ],
)
def test_systemd_pod_dirs(qos: KubeQoS, expected: str) -> None:
    assert layout(CgroupDriver.SYSTEMD).pod_dir(qos, UID) == expected


@pytest.mark.parametrize(
    ("qos", "expected"),
    [
        (KubeQoS.GUARANTEED, f"kubepods/pod{UID}"),
        (KubeQoS.BURSTABLE, f"kubepods/burstable/pod{UID}"),
        (KubeQoS.BEST_EFFORT, f"kubepods/besteffort/pod{UID}"),
    ],
)
def test_cgroupfs_pod_dirs(qos: KubeQoS, expected: str) -> None:
    assert layout(CgroupDriver.CGROUPFS).pod_dir(qos, UID) == expected


def test_qos_dirs() -> None:
    s, c = layout(CgroupDriver.SYSTEMD), layout(CgroupDriver.CGROUPFS)
    assert s.qos_dir(KubeQoS.BEST_EFFORT) == "kubepods.slice/kubepods-besteffort.slice"
    assert s.qos_dir(KubeQoS.GUARANTEED) == "kubepods.slice"
    assert c.qos_dir(KubeQoS.BURSTABLE) == "kubepods/burstable"
    assert c.qos_dir(KubeQoS.GUARANTEED) == "kubepods"


@pytest.mark.parametrize(
    ("cid", "systemd", "cgroupfs"),
    [
        ("containerd://abc", "cri-containerd-abc.scope", "abc"),
        ("docker://abc", "docker-abc.scope", "abc"),
        ("cri-o://abc", "crio-abc.scope", "abc"),
        ("pouch://abc", "pouch-abc.scope", "abc"),
    ],
)
def test_container_dirs(cid: str, systemd: str, cgroupfs: str) -> None:
    assert layout(CgroupDriver.SYSTEMD).container_dir("p", cid) == f"p/{systemd}"
    assert layout(CgroupDriver.CGROUPFS).container_dir("p", cid) == f"p/{cgroupfs}"


@pytest.mark.parametrize("bad", ["abc", "unknown://abc", "containerd://"])
def test_container_dir_rejects_bad_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="container id"):
        layout(CgroupDriver.SYSTEMD).container_dir("p", bad)


def test_pod_uid_from_dir() -> None:
    assert CgroupLayout.pod_uid_from_dir(f"kubepods-besteffort-pod{UID.replace('-', '_')}.slice") == UID
    assert CgroupLayout.pod_uid_from_dir(f"pod{UID}") == UID
    assert CgroupLayout.pod_uid_from_dir("cri-containerd-x.scope") is None


def test_file_paths_v1_and_v2() -> None:
    v1 = layout(CgroupDriver.CGROUPFS)
    v2 = layout(CgroupDriver.CGROUPFS, CgroupVersion.V2)
    assert v1.file_path("cpu.cfs_quota_us", "kubepods/besteffort") == Path(
        "/h/sys/fs/cgroup/cpu/kubepods/besteffort/cpu.cfs_quota_us"
    )
    assert v2.file_path("cpu.cfs_quota_us", "kubepods/besteffort") == Path(
        "/h/sys/fs/cgroup/kubepods/besteffort/cpu.max"
    )
    assert v2.file_path("cpu.shares", "kubepods").name == "cpu.weight"
    assert v2.file_path("memory.limit_in_bytes", "kubepods").name == "memory.max"
    assert v2.file_path("cpuacct.usage", "kubepods").name == "cpu.stat"
    assert v2.file_path("cpu.cfs_burst_us", "kubepods").name == "cpu.max.burst"
    assert v1.file_path("cpuset.cpus", "kubepods") == Path("/h/sys/fs/cgroup/cpuset/kubepods/cpuset.cpus")


@pytest.mark.parametrize(
    ("version", "driver"), [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]
)
def test_detection_on_fake_trees(koord_host_tree: HostFactory, version: int, driver: str) -> None:
    tree = koord_host_tree(version=version, driver=driver)
    assert detect_version(tree.paths.cgroup) is CgroupVersion(version)
    assert detect_driver(tree.paths.cgroup, CgroupVersion(version)) is CgroupDriver(driver)
    detected = CgroupLayout.detect(tree.paths)
    assert (detected.version, detected.driver) == (CgroupVersion(version), CgroupDriver(driver))


def test_detection_without_a_cgroup_mount(tmp_path: Path) -> None:
    with pytest.raises(CgroupNotFoundError, match="neither a cgroup v1"):
        detect_version(tmp_path)
    (tmp_path / "cpu").mkdir()
    assert detect_driver(tmp_path, CgroupVersion.V1) is CgroupDriver.SYSTEMD  # Koordinator's fallback


def test_real_host_hybrid_layout_reads_as_v1() -> None:
    root = Path("/sys/fs/cgroup")
    if not (root / "cpu").is_dir():
        pytest.skip("no cgroup v1 cpu hierarchy on this host")
    assert detect_version(root) is CgroupVersion.V1


@pytest.mark.parametrize(("version", "driver"), [(1, "systemd"), (2, "cgroupfs")])
def test_reader_on_fake_tree(koord_host_tree: HostFactory, version: int, driver: str) -> None:
    tree = koord_host_tree(version=version, driver=driver, cpus=4)
    pod = tree.add_pod(make_running_pod("p", qos="BE"))
    reader = CgroupReader(tree.layout)
    assert reader.read_cpu_quota(pod.cgroup_dir) == -1
    tree.write("cpu.cfs_quota_us", pod.cgroup_dir, "50000")
    assert reader.read_cpu_quota(pod.cgroup_dir) == 50000
    assert reader.read_cpu_period(pod.cgroup_dir) == 100000
    tree.add_cpu_usage(pod.cgroup_dir, seconds=1.5)
    assert reader.read_cpuacct_usage(pod.cgroup_dir) == 1_500_000_000
    tree.set_memory_usage(pod.cgroup_dir, anon=4096, file=8192)
    stat = reader.read_memory_stat(pod.cgroup_dir)
    assert (stat.usage(), stat.usage_with_page_cache()) == (4096, 4096 + 8192)
    assert reader.read_cpuset(pod.cgroup_dir) == frozenset(range(4))
    assert reader.read_memory_limit(pod.cgroup_dir) == -1
    tree.set_throttled(pod.cgroup_dir, nr_periods=10, nr_throttled=3)
    assert reader.read_cpu_stat(pod.cgroup_dir).nr_throttled == 3
    with pytest.raises(CgroupNotFoundError, match="cgroup dir does not exist"):
        reader.read_cpu_quota("kubepods/nope")


def test_parsers() -> None:
    assert parse_int_value(" 42\n") == 42
    assert parse_int_value("max") == MAX_INT64
    with pytest.raises(CgroupParseError, match="expected an integer"):
        parse_int_value("x", "/f")
    assert parse_cpu_max("max 100000") == (-1, 100000)
    assert parse_cpu_max("50000 100000\n") == (50000, 100000)
    with pytest.raises(CgroupParseError, match=r"cpu\.max must be"):
        parse_cpu_max("50000")
    v1 = parse_cpu_stat("nr_periods 10\nnr_throttled 4\nthrottled_time 900", CgroupVersion.V1)
    v2 = parse_cpu_stat("usage_usec 1\nnr_periods 10\nnr_throttled 4\nthrottled_usec 9", CgroupVersion.V2)
    assert v1 == CPUStat(10, 4, 900)
    assert v2 == CPUStat(10, 4, 9000)
    assert throttled_ratio(CPUStat(30, 10, 0), CPUStat(10, 4, 0)) == pytest.approx(0.3)
    assert throttled_ratio(CPUStat(10, 4, 0), CPUStat(10, 4, 0)) == 0.0
    with pytest.raises(CgroupParseError, match="lacks field nr_throttled"):
        parse_cpu_stat("nr_periods 1", CgroupVersion.V1)
    mem = parse_memory_stat(
        "total_cache 1\ntotal_rss 2\ntotal_inactive_file 3\ntotal_active_file 4\ntotal_inactive_anon 5\n"
        "total_active_anon 6\ntotal_unevictable 7\n",
        CgroupVersion.V1,
    )
    assert mem.usage() == 5 + 6 + 7
    assert parse_int_lines("1\n\n 23 \n") == [1, 23]
    assert shares_to_weight(2) == 1 and shares_to_weight(262144) == 10000 and shares_to_weight(1024) == 39
    assert weight_to_shares(1) == 2 and weight_to_shares(10000) == 262144


def test_cpuset_strings() -> None:
    assert parse_cpuset("0-2,7\n") == frozenset({0, 1, 2, 7})
    assert parse_cpuset("") == frozenset()
    assert format_cpuset([5, 0, 4]) == "0,4-5"
    assert format_cpuset([2, 3, 4]) == "2-4"
    assert format_cpuset([]) == ""
    assert same_cpus("2,3", "2-3")
    for bad in ("a", "3-1", "-1"):
        with pytest.raises(CPUSetError):
            parse_cpuset(bad)
