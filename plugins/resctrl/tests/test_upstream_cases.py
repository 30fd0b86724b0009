"""Koordinator's unit-test cases (``resctrl_reconcile_test.go``, ``resctrl_test.go`` at a7a1b76b) that the
vectors lack. Koordinator's tests write plain files; here the kernel-like fake shows what the kernel would
(masks zero-padded, the whole schemata), so expectations compare values, not text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from koord_plugin_resctrl import Resctrl
from koord_plugin_resctrl.schemata import (
    Schemata,
    SchemataError,
    calculate_cat_l3_mask,
    calculate_mba,
    parse_schemata_map,
)

from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod
from koord_framework.testing.resctrl import resctrl_node_slo as resctrl_slo

Build = Callable[..., tuple[FakeHostTree, QOSHarness, Resctrl]]


@pytest.mark.parametrize(
    ("cbm", "start", "end", "want"),
    [
        (0x101, 0, 100, None),  # cbm value is invalid
        (0xFF, -10, 100, None),  # percent value is invalid
        (0xFF, 0, 100, "ff"),  # calculate l3 schemata correctly
        (0x7FF, 10, 50, "3c"),  # ... correctly 2
        (0x3FF, 10, 85, "1fe"),  # ... correctly 4
    ],
)
def test_calculate_cat_l3_schemata(cbm: int, start: int, end: int, want: str | None) -> None:
    if want is None:
        with pytest.raises(SchemataError):
            calculate_cat_l3_mask(cbm, start, end)
    else:
        assert calculate_cat_l3_mask(cbm, start, end) == want


@pytest.mark.parametrize(
    ("percent", "vendor", "want"),
    [
        (0, "GenuineIntel", ""),  # not between (0,100]
        (85, "GenuineIntel", "90"),  # not a multiple of 10: rounded up
        (80, "AuthenticAMD", "128"),  # 0.8 x 160
    ],
)
def test_calculate_mba_percent_for_group(percent: int, vendor: str, want: str) -> None:
    assert calculate_mba(percent, vendor) == want


def _values(tree: FakeHostTree, group: str, prefix: str) -> dict[int, int]:
    raw = parse_schemata_map(tree.paths.resctrl_file(group, "schemata").read_text()).get(prefix, {})
    return {k: int(v, 16 if prefix == "L3" else 10) for k, v in raw.items()}


def test_apply_l3_policy_for_groups(build: Build) -> None:
    """``apply policy correctly 1/2``: cbm 7ff, 2 caches; LS 10-50 -> 3c, LSR 0-50 -> 3f, BE 0-100 -> 7ff."""
    slo = resctrl_slo(
        lsrClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 50},
        lsClass={"enable": True, "catRangeStartPercent": 10, "catRangeEndPercent": 50},
        beClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100},
    )
    tree, h, strategy = build(node_slo=slo)
    strategy.tick(h.clock.now())
    assert _values(tree, "LS", "L3") == {0: 0x3C, 1: 0x3C}
    assert _values(tree, "LSR", "L3") == {0: 0x3F, 1: 0x3F}
    assert _values(tree, "BE", "L3") == {0: 0x7FF, 1: 0x7FF}
    # the kernel shows 03c; written as 3c; the same value: nothing is written again
    assert tree.paths.resctrl_file("LS", "schemata").read_text().startswith("L3:0=03c;1=03c")
    assert strategy.last.schemata_written.keys() == {"LS", "LSR"}
    strategy.tick(h.clock.now())
    assert strategy.last.schemata_written == {}


def test_l3_policy_write_on_invalid_path_is_an_error(build: Build) -> None:
    """``throw an error for write on invalid path``: the group's dir is gone and cannot be made."""
    slo = resctrl_slo(lsClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100})
    _, h, strategy = build(node_slo=slo, num_closids=3)  # room for LSR and LS only
    strategy.tick(h.clock.now())
    assert any("group BE" in e and "cannot create" in e for e in strategy.last.errors)
    assert any("group BE" in e and "schemata" in e for e in strategy.last.errors)


def test_reconcile_rdt_resctrl_policy(build: Build) -> None:
    """``TestResctrlReconcile_reconcileRDTResctrlPolicy``: BE 0-50 -> 3f; LS MB 90; LSR unchanged."""
    slo = resctrl_slo(
        lsrClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100},
        lsClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 90},
        beClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 50},
    )
    tree, h, strategy = build(node_slo=slo)
    strategy.tick(h.clock.now())
    assert strategy.last.schemata_written == {"BE": "L3:0=3f;1=3f;\n", "LS": "MB:0=90;1=90;\n"}
    assert _values(tree, "LS", "MB") == {0: 90, 1: 90}
    # an unreadable BE group is an error for BE only
    assert tree.resctrl is not None
    tree.resctrl.remove_group(tree.paths.resctrl_file("BE"))
    tree.resctrl.num_closids = 3
    strategy.tick(h.clock.now())
    assert strategy.last.errors and all("group BE" in e for e in strategy.last.errors)
    # an invalid cbm (empty or not hex) stops every group's policy
    tree.paths.resctrl_file("info", "L3", "cbm_mask").write_text("invalid\n")
    strategy.tick(h.clock.now())
    assert any("cbm_mask" in e for e in strategy.last.errors)
    tree.paths.resctrl_file("info", "L3", "cbm_mask").write_text("\n")
    strategy.tick(h.clock.now())
    assert any("cbm is empty" in e for e in strategy.last.errors)


def test_apply_mb_policy_amd(build: Build) -> None:
    """``apply policy correctly on amd`` / ``apply unlimited policy correctly on amd``."""
    slo = resctrl_slo(
        lsClass={"enable": True, "mbaPercent": 100},
        beClass={"enable": True, "mbaPercent": 80},
    )
    tree, h, strategy = build(node_slo=slo, vendor="AuthenticAMD")
    strategy.tick(h.clock.now())
    assert _values(tree, "BE", "MB") == {0: 128, 1: 128}
    assert _values(tree, "LS", "MB") == {0: 2048, 1: 2048}


def test_apply_group_tasks_in_ascending_order(build: Build) -> None:
    """``write successfully``: ids written sorted, one per write, each taken."""
    tree, h, strategy = build()
    strategy.tick(h.clock.now())  # makes the groups
    tree.live_threads.update({1, 2, 5, 7, 9})
    assert strategy._fs is not None
    report = strategy.last
    strategy._write_tasks(strategy._fs, "BE", [9, 1, 7, 2, 5], report)
    assert tree.paths.resctrl_file("BE", "tasks").read_text() == "1\n2\n5\n7\n9\n"
    assert report.tasks_written == {"BE": 5}
    strategy._write_tasks(strategy._fs, "LS", [], report)  # write nothing
    assert tree.paths.resctrl_file("LS", "tasks").read_text() == ""


def _pod(name: str, qos: str, uid: str) -> dict[str, object]:
    return make_running_pod(name, uid=uid, qos=qos, containers=(f"container-{name}",))


def test_reconcile_resctrl_groups(build: Build) -> None:
    """``TestResctrlReconcile_reconcileResctrlGroups``: BE and LSE pods' threads into BE and LSR; on the
    next round only the ids missing from the group are written."""
    be, lse = _pod("pod0", "BE", "p0"), _pod("pod1", "LSE", "p1")
    slo = resctrl_slo(beClass={"enable": True}, lsrClass={"enable": True})
    tree, h, strategy = build(pods=[be, lse], node_slo=slo)
    pods = {m.pod.name: m for m in h.state.pods}
    tree.add_threads(pods["pod0"].containers[0].cgroup_dir, [122450, 122454, 123111, 128912])
    tree.add_threads(pods["pod1"].containers[0].cgroup_dir, [4321, 4322, 4323, 4400])
    strategy.tick(h.clock.now())
    assert tree.paths.resctrl_file("BE", "tasks").read_text().split() == [
        "122450",
        "122454",
        "123111",
        "128912",
    ]
    assert tree.paths.resctrl_file("LSR", "tasks").read_text().split() == ["4321", "4322", "4323", "4400"]
    # a thread left the group (moved to the root by someone): only it is written back
    assert tree.resctrl is not None
    tree.resctrl.write_tasks(tree.paths.resctrl_file("tasks"), [122454])
    strategy.tick(h.clock.now())
    assert strategy.last.tasks_written == {"BE": 1}
    assert sorted(tree.paths.resctrl_file("BE", "tasks").read_text().split()) == [
        "122450",
        "122454",
        "123111",
        "128912",
    ]


def test_reconcile_without_strategy_or_support(build: Build) -> None:
    """``TestResctrlReconcile_reconcile``: no resourceQOSStrategy -> nothing; flags only ``cat_l3 mba``."""
    tree, h, strategy = build(node_slo=resctrl_slo(beClass={"enable": True, "catRangeEndPercent": 30}))
    tree.set_raw_cpuinfo("flags\t\t: fpu vme de pse cat_l3 mba")
    strategy.tick(h.clock.now())
    assert strategy.support is not None and strategy.support.supported
    assert _values(tree, "BE", "L3") == {0: 0xF, 1: 0xF}  # ceil(11 ways x 30 %) = 4 ways
    h.state = h.set_state(node_slo=None)
    strategy.tick(h.clock.now())
    assert strategy.last.schemata_written == {}


def test_schemata_raw_parse_and_validate() -> None:
    """``TestResctrlSchemataRaw``/``ReadResctrlSchemataRaw``: counts must match, values parse."""
    raw = Schemata.parse("L3:0=7ff;1=7ff\nMB:0=100;1=100\n", 2)
    assert raw.l3 == {0: 0x7FF, 1: 0x7FF} and raw.mb == {0: 100, 1: 100} and raw.validate() is None
    with pytest.raises(SchemataError, match="invalid count"):
        Schemata.parse("L3:0=7ff;1=7ff\n", 1)
    with pytest.raises(SchemataError):
        Schemata.parse("L3:0=xyz\n", 1)
    assert Schemata.parse("    L3:0=03f;1=03f\n    MB:0=100;1=100", -1).l3 == {0: 0x3F, 1: 0x3F}
    assert (
        Schemata(l3={0: 0}, mb={0: 100}, l3_num=1).validate()
        == "L3 CAT is invalid, msg: wrong value of L3 mask"
    )
    assert Schemata(l3={0: 1}, mb={}, l3_num=1).validate() == "MBA is invalid, msg: no MBA info"
    assert Schemata(l3={0: 1, 1: 1}, mb={0: 1}, l3_num=1).validate_l3() == "unmatched L3 number and CAT infos"


@pytest.mark.parametrize("version", [1, 2])
def test_get_pod_cgroup_new_task_ids(build: Build, version: int) -> None:
    """``Test_getPodCgroupNewTaskIds`` and ``TestGetNewTaskIds``: every id without a group map, only the
    unmapped ones with it; a container without status or without a cgroup gives nothing; the sandbox's
    threads join (v1 and v2)."""
    pod = make_running_pod("pod0", qos="BE", containers=("c0", "c1"))
    pod["status"]["containerStatuses"] = pod["status"]["containerStatuses"][:1]  # c1: missing status
    tree, h, strategy = build(pods=[pod], version=version)
    meta = h.state.pods[0]
    tree.add_threads(meta.containers[0].cgroup_dir, [1, 2, 3])
    assert strategy.pod_new_task_ids(meta, None) == [1, 2, 3]
    assert strategy.pod_new_task_ids(meta, {1}) == [2, 3]
    sandbox = f"{meta.cgroup_dir.rstrip('/')}/cri-containerd-sandbox.scope"
    tree.ensure_cgroup(sandbox)
    tree.add_threads(sandbox, [9])
    assert strategy.pod_new_task_ids(meta, {1}) == [2, 3, 9]
    tree.remove_cgroup(meta.containers[0].cgroup_dir)  # invalid path: skipped, not an error
    assert strategy.pod_new_task_ids(meta, set()) == [9]
    empty = make_running_pod("empty", qos="BE", containers=())
    _, h2, strategy2 = build(pods=[empty])
    assert strategy2.pod_new_task_ids(h2.state.pods[0], None) == []
