"""The koordlet's ``node.koordinator.sh/cpu-basic-info`` on the NodeResourceTopology: read from fake hosts
through ``HostPaths`` (cpuinfo, sysfs SMT / intel_pstate, resctrl), written by the agent, and read by
koord-manager's CPUNormalization calculator on the same embedded cluster (the loop Koordinator closes
between its koordlet and its slo-controller)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.koordlet.agent import AgentOptions, KoordletAgent
from koord_framework.koordlet.cpubasicinfo import (
    ANNOTATION_CPU_BASIC_INFO,
    CPUBasicInfo,
    read_cpu_basic_info,
)
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.system import read_node_cpu_info
from koord_framework.testing.hosttree import FakeHostTree, Processor

MODEL = "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz"


def machine(cores: int, threads: int) -> list[Processor]:
    return [
        Processor(cpu=t * cores + c, core=c, socket=0, node=0) for t in range(threads) for c in range(cores)
    ]


def cpuinfo(tree: FakeHostTree, *, model: str | None = MODEL, vendor: str = "GenuineIntel") -> None:
    blocks = []
    for p in tree.processors:
        lines = [f"processor\t: {p.cpu}", f"vendor_id\t: {vendor}"]
        if model is not None:
            lines.append(f"model name\t: {model}")
        lines += [f"physical id\t: {p.socket}", f"core id\t\t: {p.core}", "flags\t\t: fpu cat_l3 mba"]
        blocks.append("\n".join(lines) + "\n")
    tree.set_raw_cpuinfo("\n".join(blocks))


def sysfile(paths: HostPaths, rel: str, content: str) -> None:
    path = paths.sys / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def basic(tree: FakeHostTree) -> CPUBasicInfo:
    return read_cpu_basic_info(tree.paths, read_node_cpu_info(tree.paths))


def test_intel_host_with_smt_turbo_and_resctrl(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(4, 2)).with_resctrl(cbm_mask="7ff", cache_ids=(0,))
    cpuinfo(tree)
    sysfile(tree.paths, "devices/system/cpu/smt/active", "1\n")
    sysfile(tree.paths, "devices/system/cpu/intel_pstate/no_turbo", "0\n")
    info = basic(tree)
    assert info == CPUBasicInfo(MODEL, True, True, "7ff", "GenuineIntel")
    # Go's json.Marshal of extension.CPUBasicInfo: field order, no spaces
    assert info.to_json() == (
        '{"cpuModel":"Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz","hyperThreadEnabled":true,'
        '"turboEnabled":true,"catL3CbmMask":"7ff","vendorID":"GenuineIntel"}'
    )


def test_smt_off_and_turbo_disabled(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(4, 2))
    cpuinfo(tree)
    sysfile(tree.paths, "devices/system/cpu/smt/active", "0\n")
    sysfile(tree.paths, "devices/system/cpu/intel_pstate/no_turbo", "1\n")
    info = basic(tree)
    assert (info.hyper_thread_enabled, info.turbo_enabled) == (False, False)
    # false and empty fields are left out, as omitempty does
    assert json.loads(info.to_json()) == {"cpuModel": MODEL, "vendorID": "GenuineIntel"}


@pytest.mark.parametrize(("threads", "want"), [(2, True), (1, False)])
def test_without_smt_file_threads_per_core_decide(tmp_path: Path, threads: int, want: bool) -> None:
    """No ``smt/active`` (older kernels): Koordinator asks lscpu for "Thread(s) per core"; koord counts the
    same sysfs topology."""
    tree = FakeHostTree(tmp_path, cpus=machine(4, threads))
    cpuinfo(tree)
    assert basic(tree).hyper_thread_enabled is want


def test_a_host_that_says_nothing(tmp_path: Path) -> None:
    """An ARM-like host: no model name line, no intel_pstate, no resctrl: Koordinator's fallbacks."""
    tree = FakeHostTree(tmp_path, cpus=machine(2, 1))
    cpuinfo(tree, model=None, vendor="HiSilicon")
    info = basic(tree)
    assert info == CPUBasicInfo("unknown", False, False, "", "HiSilicon")
    (tree.paths.proc / "cpuinfo").unlink()
    info = read_cpu_basic_info(tree.paths, read_node_cpu_info(tree.paths))
    assert (info.cpu_model, info.vendor_id) == ("unknown", "unknown")


def test_unparsable_sysfs_values_count_as_off(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(4, 2))
    cpuinfo(tree)
    sysfile(tree.paths, "devices/system/cpu/smt/active", "forceoff\n")
    sysfile(tree.paths, "devices/system/cpu/intel_pstate/no_turbo", "?\n")
    info = basic(tree)
    assert (info.hyper_thread_enabled, info.turbo_enabled) == (False, False)


def test_arm_model_name_spelling(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(2, 1))
    tree.set_raw_cpuinfo(
        "processor\t: 0\nModel Name\t: Kunpeng-920\n\nprocessor\t: 1\nModel Name\t: Kunpeng-920\n"
    )
    assert basic(tree).cpu_model == "Kunpeng-920"


# --- the loop: koordlet writes, koord-manager reads -----------------------------------------------------
NS = "koordinator-system"
RATIO = "node.koordinator.sh/cpu-normalization-ratio"


def node_manifest(cpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "uid": "uid-n1", "labels": {}, "annotations": {}},
        "status": {
            "capacity": {"cpu": str(cpus), "memory": "64Gi"},
            "allocatable": {"cpu": str(cpus), "memory": "64Gi"},
        },
    }


def slo_config() -> dict[str, Any]:
    ratios = {
        "baseRatio": 1.29,
        "hyperThreadEnabledRatio": 1.1,
        "turboEnabledRatio": 1.52,
        "hyperThreadTurboEnabledRatio": 1.2,
    }
    normalization = {"enable": True, "ratioModel": {MODEL: ratios}}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": NS},
        "data": {
            "colocation-config": json.dumps({"enable": True}),
            "cpu-normalization-config": json.dumps(normalization),
        },
    }


def manager_pass(cluster: MemoryCluster) -> dict[str, Any]:
    normalization = pytest.importorskip("koord_plugin_cpunormalizationratio")
    from koord_framework.manager.component import ManagerComponent

    m = ManagerComponent(
        cluster, CollectorRegistry(), config_namespace=NS, plugins=[normalization.CPUNormalization()]
    )
    try:
        m.sync_once()
    finally:
        m.close()
    return cluster.get("Node", "n1")


def test_the_koordlet_reports_and_cpu_normalization_reads_it(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path, cpus=machine(4, 2))
    cpuinfo(tree)
    sysfile(tree.paths, "devices/system/cpu/smt/active", "1\n")
    sysfile(tree.paths, "devices/system/cpu/intel_pstate/no_turbo", "0\n")
    cluster = MemoryCluster(VirtualClock(1000))
    cluster.create(node_manifest(8))
    cluster.create(slo_config())
    agent = KoordletAgent(
        "n1", cluster, host=tree.paths, options=AgentOptions(report_node_metric=False), clock=cluster.clock
    )
    agent.start(watch=False)
    step = agent.step(1000.0)
    assert step.node_topology is not None, step.errors
    annotations = cluster.get("NodeResourceTopology", "n1")["metadata"]["annotations"]
    assert json.loads(annotations[ANNOTATION_CPU_BASIC_INFO])["cpuModel"] == MODEL
    # hyper-threading and turbo on: the model's hyperThreadTurboEnabledRatio
    assert manager_pass(cluster)["metadata"]["annotations"][RATIO] == "1.20"

    # turbo switched off on the host: the koordlet's next report moves the NRT, the manager the ratio
    sysfile(tree.paths, "devices/system/cpu/intel_pstate/no_turbo", "1\n")
    step = agent.step(1060.0)
    assert step.node_topology is not None, step.errors
    assert manager_pass(cluster)["metadata"]["annotations"][RATIO] == "1.10"
