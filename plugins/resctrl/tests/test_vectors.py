"""Every ``koordlet/resctrl`` and ``koordlet/system`` vector of node.json (copied into data/vectors.json),
through the strategy on a kernel-like fake resctrl and through the support detection it uses."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_resctrl import Resctrl
from koord_plugin_resctrl.host import detect_support
from koord_plugin_resctrl.schemata import (
    Schemata,
    SchemataError,
    calculate_cat_l3_mask,
    calculate_mba,
    l3_line,
    mb_line,
    parse_schemata_map,
)

from koord_framework.koordlet.system import (
    HostReadError,
    is_resctrl_cqm_available,
    is_resctrl_mbm_available,
    is_vendor_support_resctrl,
    read_resctrl_tasks,
)
from koord_framework.testing.hosttree import FakeHostTree, QOSHarness
from koord_framework.testing.resctrl import resctrl_node_slo as resctrl_slo

Build = Callable[..., tuple[FakeHostTree, QOSHarness, Resctrl]]

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def test_every_vector_is_exercised() -> None:
    prefixes = (
        "CalculateCatL3MaskValue",
        "calculateMbaPercentForGroup",
        "NewResctrlSchemataRaw",
        "isResctrlAvailableByCpuInfo",
        "isResctrlMBMAvailableByCpuInfo",
        "isResctrlAvailableByKernelCmd",
        "IsVendorSupportResctrl",
        "GetVendorIDByCPUInfo",
        "ReadResctrlTasksMap",
    )
    for v in VECTORS:
        assert v["function"].startswith(prefixes), v["id"]


def _group_values(tree: FakeHostTree, group: str) -> dict[str, dict[int, str]]:
    return parse_schemata_map(tree.paths.resctrl_file(group, "schemata").read_text())


@pytest.mark.parametrize("vector", _by("CalculateCatL3MaskValue"))
def test_l3_mask(vector: dict[str, Any], build: Build) -> None:
    inp, want = vector["inputs"], vector["expected"]
    if want["error"]:
        with pytest.raises(SchemataError):
            calculate_cat_l3_mask(inp["cbm"], inp["startPercent"], inp["endPercent"])
    else:
        assert calculate_cat_l3_mask(inp["cbm"], inp["startPercent"], inp["endPercent"]) == want["mask"]
    # the same through a tick: the BE group of a host with this cbm_mask and these percents
    slo = resctrl_slo(
        beClass={
            "enable": True,
            "catRangeStartPercent": inp["startPercent"],
            "catRangeEndPercent": inp["endPercent"],
        }
    )
    tree, h, strategy = build(node_slo=slo, cbm_mask=inp["cbmHex"])
    strategy.tick(h.clock.now())
    assert tree.resctrl is not None
    be_writes = [t for p, t in tree.resctrl.writes if p == str(tree.paths.resctrl_file("BE", "schemata"))]
    if want["error"]:
        assert strategy.last.errors, "a bad cbm or range must be reported"
        assert any("group BE" in e or "cbm_mask" in e for e in strategy.last.errors)
        assert be_writes == []
    else:
        values = _group_values(tree, "BE")["L3"]
        assert {int(v, 16) for v in values.values()} == {int(want["mask"], 16)}
        assert not strategy.last.errors


@pytest.mark.parametrize("vector", _by("calculateMbaPercentForGroup"))
def test_mba_value(vector: dict[str, Any], build: Build) -> None:
    inp, want = vector["inputs"], vector["expected"]
    assert calculate_mba(inp["mbaPercent"], inp["vendorID"]) == want["schemataValue"]
    # through a tick: the BE group's MB line; "" means the strategy leaves MB as the kernel had it
    be: dict[str, Any] = {"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100}
    if inp["mbaPercent"] is not None:
        be["mbaPercent"] = inp["mbaPercent"]
    tree, h, strategy = build(node_slo=resctrl_slo(beClass=be), vendor=inp["vendorID"])
    strategy.tick(h.clock.now())
    mb = _group_values(tree, "BE")["MB"]
    if want["schemataValue"] == "":
        # the kernel's own value stays (100 on Intel): no MB line was written
        assert mb == {0: "100", 1: "100"}
        if inp["mbaPercent"] is not None:
            assert any("mbaPercent" in e for e in strategy.last.errors)
    else:
        assert set(mb.values()) == {want["schemataValue"]}


@pytest.mark.parametrize("vector", _by("NewResctrlSchemataRaw"))
def test_schemata_lines(vector: dict[str, Any]) -> None:
    inp, want = vector["inputs"], vector["expected"]
    raw = Schemata.for_ids(inp["cacheIds"], inp["l3Num"])
    for i in raw.l3:
        raw.l3[i] = int(inp["l3Mask"], 16)
    assert l3_line(raw.l3) == want["L3String"]
    if want["MBString"] is not None:
        for i in raw.mb:
            raw.mb[i] = int(inp["mbPercent"])
        assert mb_line(raw.mb) == want["MBString"]
    assert raw.validate_l3() is None


@pytest.mark.parametrize("vector", _by("isResctrlAvailableByCpuInfo"))
def test_cpuinfo_flags(vector: dict[str, Any], build: Build) -> None:
    tree, _, _ = build()
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    tree.set_cmdline("BOOT_IMAGE=/vmlinuz")
    assert tree.resctrl is not None
    report = detect_support(tree.paths, tree.resctrl)
    want = vector["expected"]
    assert (report.cat_flag, report.mba_flag) == (want["isCatFlagSet"], want["isMbaFlagSet"])
    assert report.supported is (want["isCatFlagSet"] and want["isMbaFlagSet"])


@pytest.mark.parametrize("vector", _by("isResctrlMBMAvailableByCpuInfo"))
def test_monitoring_flags(vector: dict[str, Any], build: Build) -> None:
    tree, _, _ = build()
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    assert is_resctrl_mbm_available(tree.paths) is vector["expected"]["mbm"]
    assert is_resctrl_cqm_available(tree.paths) is vector["expected"]["cqm"]


@pytest.mark.parametrize("vector", _by("isResctrlAvailableByKernelCmd"))
def test_kernel_cmdline(vector: dict[str, Any], build: Build) -> None:
    tree, _, _ = build()
    tree.set_cmdline(vector["inputs"]["cmdline"])
    assert tree.resctrl is not None
    report = detect_support(tree.paths, tree.resctrl)
    want = vector["expected"]
    assert (report.kernel_cat, report.kernel_mba) == (want["isCatFlagSet"], want["isMbaFlagSet"])
    # reported only: the CPU flags alone decide
    assert report.supported


@pytest.mark.parametrize("vector", _by("IsVendorSupportResctrl"))
def test_vendor_support(vector: dict[str, Any], build: Build) -> None:
    tree, _, _ = build()
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    assert (
        is_vendor_support_resctrl(tree.paths, vector["inputs"]["armVendorIDs"])
        is vector["expected"]["supported"]
    )


@pytest.mark.parametrize("vector", _by("GetVendorIDByCPUInfo"))
def test_vendor_id(vector: dict[str, Any], build: Build) -> None:
    tree, _, _ = build()
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    tree.set_cmdline("BOOT_IMAGE=/vmlinuz rdt=l3cat,mba")
    assert tree.resctrl is not None
    assert detect_support(tree.paths, tree.resctrl).vendor == vector["expected"]["vendorID"]


@pytest.mark.parametrize("vector", _by("ReadResctrlTasksMap"))
def test_read_tasks(vector: dict[str, Any], build: Build) -> None:
    tree, _, _ = build()
    group = vector["inputs"]["group"]
    if group:
        assert tree.resctrl is not None
        tree.resctrl.make_group(tree.paths.resctrl_file(group))
    path = tree.paths.resctrl_file(group, "tasks") if group else tree.paths.resctrl_file("tasks")
    path.write_text(vector["inputs"]["tasksFile"])
    if vector["expected"].get("error"):
        with pytest.raises(HostReadError):
            read_resctrl_tasks(tree.paths, group)
    else:
        assert read_resctrl_tasks(tree.paths, group) == set(vector["expected"]["taskIds"])
