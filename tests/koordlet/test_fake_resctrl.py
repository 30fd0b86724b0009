"""The testing kit's fake resctrl answers writes the way the kernel does (fs/resctrl rules)."""

from __future__ import annotations

import errno
from collections.abc import Callable

import pytest

from koord_framework.testing.hosttree import FakeHostTree

HostFactory = Callable[..., FakeHostTree]


def test_layout_is_the_kernels(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=4).with_resctrl(cbm_mask="fff", cache_ids=(0, 1), num_closids=8)
    r = tree.paths.resctrl
    assert (r / "info" / "L3" / "cbm_mask").read_text() == "fff\n"
    assert (r / "info" / "L3" / "num_closids").read_text() == "8\n"
    assert (r / "info" / "MB" / "bandwidth_gran").read_text() == "10\n"
    assert (r / "schemata").read_text() == "L3:0=fff;1=fff\nMB:0=100;1=100\n"
    assert (r / "mon_data" / "mon_L3_01" / "llc_occupancy").is_file()
    caches = {
        (tree.paths.sys / "devices" / "system" / "cpu" / f"cpu{c}" / "cache" / "index3" / "id").read_text()
        for c in range(4)
    }
    assert caches == {"0\n", "1\n"}


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("L3:0=ff", "Missing newline at end of schemata"),
        ("L3 0=ff\n", "Missing ':' in line 'L3 0=ff'"),
        ("L2:0=ff\n", "Unknown or unsupported resource name 'L2'"),
        ("L3:0ff\n", "Missing '=' or non-numeric domain"),
        ("L3:5=ff\n", "Unknown domain 5"),
        ("L3:0=0\n", "Mask out of range 0x0"),
        ("L3:0=1fff\n", "Mask out of range 0x1fff"),
        ("L3:0=f0f\n", "The mask 0xf0f has non-consecutive 1-bits"),
        ("L3:0=ff\nMB:0=5\n", "MB value 5 out of range [10,100]"),
    ],
)
def test_malformed_schemata_is_refused_whole(koord_host_tree: HostFactory, text: str, status: str) -> None:
    tree = koord_host_tree(cpus=2).with_resctrl(cbm_mask="fff", cache_ids=(0, 1), groups=["BE"])
    kernel = tree.resctrl
    assert kernel is not None
    path = tree.paths.resctrl_file("BE", "schemata")
    before = path.read_text()
    with pytest.raises(OSError) as err:
        kernel.write_schemata(path, text)
    assert err.value.errno == errno.EINVAL
    assert path.read_text() == before
    assert tree.paths.resctrl_file("info", "last_cmd_status").read_text().strip() == status


def test_schemata_shown_padded_and_mb_rounded(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2).with_resctrl(cbm_mask="fff", cache_ids=(0, 1), groups=["BE"])
    assert tree.resctrl is not None
    path = tree.paths.resctrl_file("BE", "schemata")
    tree.resctrl.write_schemata(path, "L3:1=3c;\nMB:0=45;\n")
    assert path.read_text() == "L3:0=fff;1=03c\nMB:0=50;1=100\n"


def test_amd_bandwidth_is_absolute(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2, vendor="AuthenticAMD").with_resctrl(cbm_mask="ffff", groups=["BE"])
    assert tree.resctrl is not None
    path = tree.paths.resctrl_file("BE", "schemata")
    assert path.read_text() == "L3:0=ffff\nMB:0=2048\n"
    tree.resctrl.write_schemata(path, "MB:0=128\n")
    assert path.read_text() == "L3:0=ffff\nMB:0=128\n"


def test_tasks_refuse_unknown_ids_and_move_known_ones(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2).with_resctrl(groups=["BE", "LS"])
    assert tree.resctrl is not None
    tree.add_threads(tree.layout.kubepods_dir, [11, 12])
    assert tree.paths.resctrl_file("tasks").read_text() == "11\n12\n"
    be, ls = tree.paths.resctrl_file("BE", "tasks"), tree.paths.resctrl_file("LS", "tasks")
    assert tree.resctrl.write_tasks(be, [11, 99, -1]) == (0, errno.ESRCH, errno.EINVAL)
    assert be.read_text() == "11\n"
    assert tree.resctrl.write_tasks(ls, [11]) == (0,)
    assert be.read_text() == "" and ls.read_text() == "11\n"
    tree.exit_threads([11])
    assert ls.read_text() == ""


def test_groups_are_limited_by_closids(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2).with_resctrl(num_closids=2)
    kernel = tree.resctrl
    assert kernel is not None
    kernel.make_group(tree.paths.resctrl_file("BE"))
    with pytest.raises(OSError) as err:
        kernel.make_group(tree.paths.resctrl_file("LS"))
    assert err.value.errno == errno.ENOSPC
    with pytest.raises(FileExistsError):
        kernel.make_group(tree.paths.resctrl_file("BE"))
    with pytest.raises(OSError):
        kernel.make_group(tree.paths.resctrl_file("BE", "nested"))


def test_unmounted_until_mounted(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2).with_resctrl(mounted=False)
    assert tree.resctrl is not None
    assert not tree.paths.resctrl_file("info").exists()
    tree.resctrl.mount(tree.paths.resctrl)
    assert tree.paths.resctrl_file("info", "L3", "cbm_mask").is_file()
    with pytest.raises(OSError) as err:
        tree.resctrl.mount(tree.paths.resctrl)
    assert err.value.errno == errno.EBUSY
