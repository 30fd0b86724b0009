"""Koordinator's ``pkg/koordlet/util/system`` cases (copied into ``data/system_vectors.json``): CPU vendor,
resctrl support flags and resctrl task files, read from a fake host tree."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from koord_framework.koordlet.system import (
    HostReadError,
    is_resctrl_cqm_available,
    is_resctrl_mbm_available,
    is_resctrl_supported,
    is_vendor_support_resctrl,
    read_resctrl_tasks,
    resctrl_flags_by_cpuinfo,
    resctrl_flags_by_kernel_cmdline,
    vendor_id,
)
from koord_framework.testing.hosttree import FakeHostTree

HostFactory = Callable[..., FakeHostTree]
VECTORS = json.loads((Path(__file__).parent / "data" / "system_vectors.json").read_text())["vectors"]


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def test_all_system_vectors_are_exercised() -> None:
    handled = (
        "isResctrlAvailableByCpuInfo",
        "isResctrlMBMAvailableByCpuInfo",
        "isResctrlAvailableByKernelCmd",
        "IsVendorSupportResctrl",
        "GetVendorIDByCPUInfo",
        "ReadResctrlTasksMap",
    )
    assert all(v["function"].startswith(handled) for v in VECTORS)
    assert len(VECTORS) == 11


@pytest.mark.parametrize("vector", _by("isResctrlAvailableByCpuInfo"))
def test_resctrl_flags_by_cpuinfo(vector: dict[str, Any], koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2)
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    flags = resctrl_flags_by_cpuinfo(tree.paths)
    assert (flags.cat, flags.mba) == (vector["expected"]["isCatFlagSet"], vector["expected"]["isMbaFlagSet"])
    assert is_resctrl_supported(tree.paths) is (flags.cat and flags.mba)


@pytest.mark.parametrize("vector", _by("isResctrlMBMAvailableByCpuInfo"))
def test_mbm_and_cqm(vector: dict[str, Any], koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2)
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    assert is_resctrl_mbm_available(tree.paths) is vector["expected"]["mbm"]
    assert is_resctrl_cqm_available(tree.paths) is vector["expected"]["cqm"]


@pytest.mark.parametrize("vector", _by("isResctrlAvailableByKernelCmd"))
def test_resctrl_flags_by_kernel_cmdline(vector: dict[str, Any], koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2)
    tree.set_cmdline(vector["inputs"]["cmdline"])
    flags = resctrl_flags_by_kernel_cmdline(tree.paths)
    assert (flags.cat, flags.mba) == (vector["expected"]["isCatFlagSet"], vector["expected"]["isMbaFlagSet"])


@pytest.mark.parametrize("vector", _by("IsVendorSupportResctrl"))
def test_vendor_support(vector: dict[str, Any], koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2)
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    assert (
        is_vendor_support_resctrl(tree.paths, vector["inputs"]["armVendorIDs"])
        is vector["expected"]["supported"]
    )


@pytest.mark.parametrize("vector", _by("GetVendorIDByCPUInfo"))
def test_vendor_id(vector: dict[str, Any], koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2)
    tree.set_raw_cpuinfo(vector["inputs"]["cpuinfo"])
    assert vendor_id(tree.paths) == vector["expected"]["vendorID"]


@pytest.mark.parametrize("vector", _by("ReadResctrlTasksMap"))
def test_read_resctrl_tasks(vector: dict[str, Any], koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2).with_resctrl(groups=["BE"])
    group = vector["inputs"]["group"]
    target = tree.paths.resctrl_file(group, "tasks") if group else tree.paths.resctrl_file("tasks")
    target.write_text(vector["inputs"]["tasksFile"])
    assert read_resctrl_tasks(tree.paths, group) == set(vector["expected"]["taskIds"])


def test_system_reads_name_the_file(koord_host_tree: HostFactory) -> None:
    tree = koord_host_tree(cpus=2)
    (tree.paths.proc / "cpuinfo").unlink()
    with pytest.raises(HostReadError, match="cpuinfo: does not exist"):
        vendor_id(tree.paths)
    assert is_vendor_support_resctrl(tree.paths) is False
    tree.with_resctrl(groups=["LS"])
    tree.paths.resctrl_file("LS", "tasks").write_text("12\nabc\n")
    with pytest.raises(HostReadError, match="task id 'abc' is not an integer"):
        read_resctrl_tasks(tree.paths, "LS")
