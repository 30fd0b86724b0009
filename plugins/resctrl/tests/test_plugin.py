"""The strategy on a kernel-like fake resctrl: support and mount, groups, schemata written only when they
differ, tasks kept in their groups, pod-level groups, and every bad input reported by node, group, field."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import pytest
from koord_plugin_resctrl import Resctrl
from koord_plugin_resctrl.schemata import parse_schemata_map
from prometheus_client import CollectorRegistry

from koord_framework.testing.hosttree import FakeHostTree, QOSHarness, make_running_pod
from koord_framework.testing.resctrl import resctrl_node_slo as resctrl_slo

Build = Callable[..., tuple[FakeHostTree, QOSHarness, Resctrl]]


def _l3(tree: FakeHostTree, group: str) -> dict[int, int]:
    raw = parse_schemata_map(tree.paths.resctrl_file(group, "schemata").read_text())["L3"]
    return {k: int(v, 16) for k, v in raw.items()}


def _mb(tree: FakeHostTree, group: str) -> dict[int, int]:
    raw = parse_schemata_map(tree.paths.resctrl_file(group, "schemata").read_text())["MB"]
    return {k: int(v) for k, v in raw.items()}


def _tasks(tree: FakeHostTree, group: str) -> list[int]:
    path = tree.paths.resctrl_file(group, "tasks") if group else tree.paths.resctrl_file("tasks")
    return sorted(int(x) for x in path.read_text().split())


BE_ON = resctrl_slo(
    beClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 30, "mbaPercent": 45},
    lsClass={"enable": True},
    lsrClass={"enable": True},
)


# --- support, mount, groups --------------------------------------------------------------------------------


def test_default_node_slo_gives_every_group_the_whole_cache(build: Build) -> None:
    """Every class is disabled by default, so each group gets the "none" values (0-100 %, MB 100)."""
    tree, h, strategy = build(node_slo={})
    strategy.tick(h.clock.now())
    assert sorted(p.name for p in tree.paths.resctrl.iterdir() if p.name != "info" and p.is_dir()) == [
        "BE",
        "LS",
        "LSR",
        "mon_data",
    ]
    for group in ("LSR", "LS", "BE"):
        assert _l3(tree, group) == {0: 0x7FF, 1: 0x7FF}
        assert _mb(tree, group) == {0: 100, 1: 100}
    assert strategy.last.schemata_written == {} and not strategy.last.errors


def test_be_isolated_with_mba_rounded_up(build: Build) -> None:
    tree, h, strategy = build(node_slo=BE_ON)
    strategy.tick(h.clock.now())
    assert _l3(tree, "BE") == {0: 0xF, 1: 0xF}  # ceil(11 x 0.3) = 4 ways
    assert _mb(tree, "BE") == {0: 50, 1: 50}
    # L3 and MB went in one write
    assert tree.resctrl is not None
    assert tree.resctrl.writes == [
        (str(tree.paths.resctrl_file("BE", "schemata")), "L3:0=f;1=f;\nMB:0=50;1=50;\n")
    ]


def test_only_the_line_that_differs_is_written(build: Build) -> None:
    tree, h, strategy = build(node_slo=BE_ON)
    strategy.tick(h.clock.now())
    assert tree.resctrl is not None
    tree.resctrl.write_schemata(tree.paths.resctrl_file("BE", "schemata"), "MB:0=100;1=100\n")
    strategy.tick(h.clock.now())
    assert strategy.last.schemata_written == {"BE": "MB:0=50;1=50;\n"}


def test_no_node_slo_does_nothing(build: Build) -> None:
    tree, h, strategy = build()
    h.set_state(node_slo=None)
    strategy.tick(h.clock.now())
    assert not tree.paths.resctrl_file("BE").exists()
    assert strategy.enabled(None)  # the feature gate, not the NodeSLO, switches it


def test_cpu_without_cat_and_mba_is_unsupported(build: Build) -> None:
    tree, h, strategy = build(node_slo=BE_ON)
    tree.set_cpuinfo(flags=("fpu", "sse", "cat_l3"))  # no mba
    strategy.tick(h.clock.now())
    assert strategy.support is not None and not strategy.support.supported
    assert "cat_l3 and mba" in strategy.unsupported_reason
    assert not tree.paths.resctrl_file("BE").exists()


def test_unmounted_resctrl_is_mounted(build: Build) -> None:
    tree, h, strategy = build(node_slo=BE_ON, mounted=False)
    assert not tree.paths.resctrl_file("info", "L3", "cbm_mask").exists()
    strategy.tick(h.clock.now())
    assert tree.resctrl is not None and tree.resctrl.mounts == 1
    assert _l3(tree, "BE") == {0: 0xF, 1: 0xF}
    strategy.tick(h.clock.now())
    assert tree.resctrl.mounts == 1  # mounted stays mounted


def test_a_kernel_that_cannot_mount_is_reported(build: Build) -> None:
    tree, h, strategy = build(node_slo=BE_ON, mounted=False, mountable=False)
    strategy.tick(h.clock.now())
    assert strategy.last.errors == [
        f"node test-node: cannot mount resctrl at {tree.paths.resctrl}: No such device"
    ]


def test_without_the_shim_the_strategy_reports_itself_unsupported(
    build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, h, _ = build(node_slo=BE_ON)
    monkeypatch.setitem(sys.modules, "koord_native", None)
    h.context.registry = CollectorRegistry()
    strategy = Resctrl(Resctrl.parse_args({}), h.context)
    assert "koord-native is not importable" in strategy.unsupported_reason
    strategy.tick(h.clock.now())
    assert h.context.journal[-1].summary.startswith("unsupported: koord-native")


def test_host_fs_with_the_shim_reports_cpuid(build: Build) -> None:
    pytest.importorskip("koord_native")
    tree, h, _ = build(node_slo=BE_ON)
    h.context.registry = CollectorRegistry()
    assert tree.resctrl is not None
    for group in ("LSR", "LS", "BE"):  # what the kernel's mkdir fills in, a plain mkdir would not
        tree.resctrl.make_group(tree.paths.resctrl_file(group))
    strategy = Resctrl(Resctrl.parse_args({}), h.context)
    strategy.tick(h.clock.now())
    assert strategy.support is not None and strategy.support.supported
    assert strategy.support.cpuid["available"] in (True, False)
    # the real fs wrote plain files of the fake tree: BE got its L3 and MB in one write
    assert parse_schemata_map(tree.paths.resctrl_file("BE", "schemata").read_text())["L3"] == {0: "f", 1: "f"}


# --- tasks --------------------------------------------------------------------------------------------------


def _pods() -> list[dict[str, object]]:
    return [
        make_running_pod("be", qos="BE"),
        make_running_pod("ls", qos="LS"),
        make_running_pod("lse", qos="LSE"),
        make_running_pod("lsr", qos="LSR"),
        make_running_pod("system", qos="SYSTEM"),
        make_running_pod("done", qos="BE", phase="Succeeded"),
        make_running_pod("own", qos="BE", annotations={"node.koordinator.sh/resctrl": "{}"}),
    ]


def _threads(tree: FakeHostTree, h: object, base: int = 1000) -> dict[str, list[int]]:
    out = {}
    from koord_framework.testing.hosttree import QOSHarness

    assert isinstance(h, QOSHarness)
    for k, meta in enumerate(h.state.pods):
        ids = [base + 10 * k + j for j in range(3)]
        tree.add_threads(meta.containers[0].cgroup_dir, ids)
        out[meta.pod.name] = ids
    return out


@pytest.mark.parametrize("version", [1, 2])
def test_threads_go_to_their_class_group(build: Build, version: int) -> None:
    tree, h, strategy = build(pods=_pods(), node_slo=BE_ON, version=version)
    ids = _threads(tree, h)
    strategy.tick(h.clock.now())
    assert _tasks(tree, "BE") == ids["be"]
    assert _tasks(tree, "LS") == ids["ls"]
    assert _tasks(tree, "LSR") == sorted(ids["lse"] + ids["lsr"])
    own = next(m for m in h.state.pods if m.pod.name == "own")
    assert _tasks(tree, f"koordlet-{own.uid}") == ids["own"]
    for other in ("system", "done"):
        assert set(ids[other]) <= set(_tasks(tree, ""))


def test_a_disabled_class_keeps_its_threads_where_they_are(build: Build) -> None:
    slo = resctrl_slo(beClass={"enable": True})
    tree, h, strategy = build(pods=_pods(), node_slo=slo)
    ids = _threads(tree, h)
    strategy.tick(h.clock.now())
    assert _tasks(tree, "BE") == ids["be"]
    assert _tasks(tree, "LS") == [] and _tasks(tree, "LSR") == []


def test_threads_are_kept_in_their_group_each_tick(build: Build) -> None:
    tree, h, strategy = build(pods=_pods(), node_slo=BE_ON)
    ids = _threads(tree, h)
    strategy.tick(h.clock.now())
    assert tree.resctrl is not None
    tree.resctrl.write_tasks(tree.paths.resctrl_file("tasks"), ids["be"][:2])  # someone moved two out
    tree.add_threads(h.state.pods[0].containers[0].cgroup_dir, [5000])  # and a new thread started
    strategy.tick(h.clock.now())
    assert strategy.last.tasks_written == {"BE": 3}
    assert _tasks(tree, "BE") == sorted([*ids["be"], 5000])
    strategy.tick(h.clock.now())
    assert strategy.last.tasks_written == {}


def test_a_thread_that_exits_before_the_write_is_skipped_not_fatal(build: Build) -> None:
    tree, h, strategy = build(pods=_pods(), node_slo=BE_ON)
    ids = _threads(tree, h)
    tree.exit_threads([ids["be"][1]], keep_listed=True)  # still in the cgroup listing
    strategy.tick(h.clock.now())
    assert strategy.last.vanished == {"BE": 1}
    assert strategy.last.tasks_written["BE"] == 2
    assert _tasks(tree, "BE") == [ids["be"][0], ids["be"][2]]
    assert not strategy.last.errors


def test_sandbox_threads_join_the_pod(build: Build) -> None:
    tree, h, strategy = build(pods=[make_running_pod("be", qos="BE")], node_slo=BE_ON)
    meta = h.state.pods[0]
    sandbox = f"{meta.cgroup_dir.rstrip('/')}/cri-containerd-sandbox0.scope"
    tree.ensure_cgroup(sandbox)
    tree.add_threads(sandbox, [77])
    tree.add_threads(meta.containers[0].cgroup_dir, [78])
    strategy.tick(h.clock.now())
    assert _tasks(tree, "BE") == [77, 78]


# --- pod-level groups ------------------------------------------------------------------------------------


def test_pod_annotation_makes_and_removes_its_group(build: Build) -> None:
    ann = {"llc": {"schemata": {"range": [20, 60]}}, "mb": {"schemata": {"percent": 35}}}
    pod = make_running_pod("own", qos="LS", annotations={"node.koordinator.sh/resctrl": json.dumps(ann)})
    tree, h, strategy = build(pods=[pod], node_slo=BE_ON)
    tree.add_threads(h.state.pods[0].containers[0].cgroup_dir, [41, 42])
    strategy.tick(h.clock.now())
    group = f"koordlet-{h.state.pods[0].uid}"
    assert _l3(tree, group) == {0: 0x78, 1: 0x78}  # ways 3..6 of 11
    assert _mb(tree, group) == {0: 40, 1: 40}
    assert _tasks(tree, group) == [41, 42]
    # Koordinator's resctrl hook records the new pod-level group on the pod.
    [event] = [e for e in h.cluster.events if e.reason == "Pod Level Resctrl"]  # type: ignore[attr-defined]
    assert (event.name, event.message, event.component) == ("own", "Create Resctrl Group", "koordlet")
    strategy.tick(h.clock.now())
    assert len([e for e in h.cluster.events if e.reason == "Pod Level Resctrl"]) == 1  # type: ignore[attr-defined]
    h.set_state(pods=[], node_slo=BE_ON)
    strategy.tick(h.clock.now())
    assert not tree.paths.resctrl_file(group).exists()
    assert strategy.last.removed_groups == [group]
    assert {41, 42} <= set(_tasks(tree, ""))


def test_pod_annotation_per_cache(build: Build) -> None:
    ann = {
        "llc": {"schemata": {"range": [0, 100]}, "schemataPerCache": [{"cacheID": 1, "range": [50, 100]}]},
        "mb": {"schemataPerCache": [{"cacheID": 0, "percent": 20}, {"cacheID": 1, "percent": 100}]},
    }
    pod = make_running_pod("own", qos="LS", annotations={"node.koordinator.sh/resctrl": json.dumps(ann)})
    tree, h, strategy = build(pods=[pod], node_slo={}, vendor="AuthenticAMD")
    strategy.tick(h.clock.now())
    group = f"koordlet-{h.state.pods[0].uid}"
    assert _l3(tree, group) == {0: 0x7FF, 1: 0x7C0}  # ways ceil(5.5)=6..10
    assert _mb(tree, group) == {0: 32, 1: 2048}


def test_malformed_pod_annotation_names_pod_and_field(build: Build) -> None:
    bad = make_running_pod(
        "bad",
        qos="LS",
        annotations={"node.koordinator.sh/resctrl": '{"llc": {"schemata": {"range": "0-50"}}}'},
    )
    broken = make_running_pod("broken", qos="LS", annotations={"node.koordinator.sh/resctrl": "{not json"})
    tree, h, strategy = build(pods=[bad, broken], node_slo={})
    strategy.tick(h.clock.now())
    assert (
        "pod default/bad: annotation node.koordinator.sh/resctrl: llc.schemata.range: "
        'must be a list of integers, got "0-50"'
    ) in strategy.last.errors
    assert any(
        e.startswith("pod default/broken: annotation node.koordinator.sh/resctrl: not JSON")
        for e in strategy.last.errors
    )
    assert not [p for p in tree.paths.resctrl.iterdir() if p.name.startswith("koordlet-")]


def test_out_of_closids_is_reported_for_the_pod_group(build: Build) -> None:
    pods = [
        make_running_pod(f"own{i}", qos="LS", annotations={"node.koordinator.sh/resctrl": "{}"})
        for i in range(3)
    ]
    tree, h, strategy = build(pods=pods, node_slo={}, num_closids=5)  # root + 3 groups + 1 pod
    strategy.tick(h.clock.now())
    made = [p.name for p in tree.paths.resctrl.iterdir() if p.name.startswith("koordlet-")]
    assert len(made) == 1
    assert sum("No space left on device" in e for e in strategy.last.errors) == 2


# --- bad input ---------------------------------------------------------------------------------------------


def test_cat_range_end_not_above_start(build: Build) -> None:
    slo = resctrl_slo(beClass={"enable": True, "catRangeStartPercent": 50, "catRangeEndPercent": 50})
    tree, h, strategy = build(node_slo=slo)
    strategy.tick(h.clock.now())
    assert strategy.last.errors == [
        "NodeSLO test-node: group BE: resourceQOSStrategy.beClass.resctrlQOS.catRangeEndPercent: "
        "must be greater than catRangeStartPercent (50), got 50"
    ]
    assert _l3(tree, "BE") == {0: 0x7FF, 1: 0x7FF}  # the kernel's default, untouched


def test_mba_percent_zero(build: Build) -> None:
    slo = resctrl_slo(
        lsClass={"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 40, "mbaPercent": 0}
    )
    tree, h, strategy = build(node_slo=slo)
    strategy.tick(h.clock.now())
    assert strategy.last.errors == [
        "NodeSLO test-node: group LS: resourceQOSStrategy.lsClass.resctrlQOS.mbaPercent: "
        "must be in [1, 100], got 0"
    ]
    assert _l3(tree, "LS") == {0: 0x7FF, 1: 0x7FF}  # neither line of the group: nothing half-applied


def test_non_contiguous_cbm_mask(build: Build) -> None:
    tree, h, strategy = build(node_slo=BE_ON)
    tree.paths.resctrl_file("info", "L3", "cbm_mask").write_text("f0f\n")
    strategy.tick(h.clock.now())
    assert strategy.last.errors == [
        "node test-node: info/L3/cbm_mask: 'f0f' is not a contiguous mask from bit 0 (illegal cbm); "
        "no group's L3 or MB line is written"
    ]
    assert _l3(tree, "BE") == {0: 0x7FF, 1: 0x7FF}


def test_schemata_the_kernel_rejects_is_reported_and_retried(build: Build) -> None:
    """The root schemata names a cache the kernel does not have: the group's write (L3 and MB together) is
    refused whole, reported with node, group and the lines, and tried again next tick."""
    tree, h, strategy = build(node_slo=BE_ON)
    root = tree.paths.resctrl_file("schemata")
    good = root.read_text()
    root.write_text("L3:0=7ff;1=7ff;2=7ff\nMB:0=100;1=100;2=100\n")
    strategy.tick(h.clock.now())
    # every group's write names the unknown cache: each is refused whole and reported by group
    assert [e.split(":")[1].strip() for e in strategy.last.errors] == ["group LSR", "group LS", "group BE"]
    err = strategy.last.errors[2]
    assert err.startswith("node test-node: group BE: schemata L3 and MB: the kernel refused")
    assert "Unknown domain 2" in err and "retried next tick" in err
    assert _l3(tree, "BE") == {0: 0x7FF, 1: 0x7FF} and _mb(tree, "BE") == {0: 100, 1: 100}
    assert tree.paths.resctrl_file("info", "last_cmd_status").read_text().strip() == "Unknown domain 2"
    root.write_text(good)
    strategy.tick(h.clock.now())
    assert not strategy.last.errors
    assert _l3(tree, "BE") == {0: 0xF, 1: 0xF} and _mb(tree, "BE") == {0: 50, 1: 50}


def test_wrong_types_in_node_slo(build: Build) -> None:
    slo = resctrl_slo(beClass={"enable": "yes", "catRangeEndPercent": 30})
    _, h, strategy = build(node_slo=slo)
    strategy.tick(h.clock.now())
    assert strategy.last.errors == [
        "NodeSLO test-node: group BE: resourceQOSStrategy.beClass.resctrlQOS.enable: "
        "must be a boolean, got 'yes'"
    ]
