"""Koordinator's own unit-test cases for CPU suppression (copied into ``data/vectors.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_cpusuppress import BECPUSuppress
from koord_plugin_cpusuppress.policy import calculate_be_suppress_cpu, calculate_be_suppress_cpuset_policy

from koord_framework.api.qos import KubeQoS
from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.nodeslo import HostApplicationSpec
from koord_framework.koordlet.states import PodMeta
from koord_framework.koordlet.system import ProcessorInfo
from koord_framework.testing.hosttree import FakeHostTree, Processor, QOSHarness

VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def _processors(raw: list[dict[str, int]]) -> list[ProcessorInfo]:
    return [ProcessorInfo(p["cpuID"], p["coreID"], p["socketID"], p["nodeID"]) for p in raw]


LAYOUT = CgroupLayout(HostPaths.under("/nonexistent"), CgroupVersion.V1, CgroupDriver.SYSTEMD)


def test_every_vector_is_exercised() -> None:
    prefixes = (
        "calculateBESuppressCPU(",
        "calculateBESuppressCPUSetPolicy",
        "adjustByCPUSet",
        "adjustByCfsQuota",
    )
    assert all(v["function"].startswith(prefixes) for v in VECTORS)
    assert len(VECTORS) == 14


@pytest.mark.parametrize("vector", _by("calculateBESuppressCPU("))
def test_calculate_be_suppress_cpu(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    pods = [PodMeta.from_manifest(p, LAYOUT) for p in inp["podMetas"]]
    apps = [HostApplicationSpec.model_validate(a) for a in inp["hostApps"]]
    got = calculate_be_suppress_cpu(
        inp["node"],
        float(inp["nodeUsedCPU"]),
        {k: float(v) for k, v in inp["podMetrics"].items()},
        pods,
        apps,
        {k: float(v) for k, v in inp["hostAppMetrics"].items()},
        inp["cpuSuppressThresholdPercent"],
        inp["cpuSuppressMinPercent"],
    )
    assert got == vector["expected"]["suppressMilli"]


@pytest.mark.parametrize("vector", _by("calculateBESuppressCPUSetPolicy"))
def test_cpuset_policy(vector: dict[str, Any]) -> None:
    inp = vector["inputs"]
    got = calculate_be_suppress_cpuset_policy(inp["cpus"], _processors(inp["processorInfos"]))
    assert got == (vector["expected"]["cpuset"] or [])


def _tree(tmp_path: Path, processors: list[ProcessorInfo]) -> FakeHostTree:
    procs = [Processor(p.cpu_id, p.core_id, p.socket_id, p.node_id) for p in processors]
    return FakeHostTree(tmp_path / "host", version=1, driver="systemd", cpus=procs)


@pytest.mark.parametrize("vector", _by("adjustByCPUSet"))
def test_adjust_by_cpuset(vector: dict[str, Any], tmp_path: Path) -> None:
    inp = vector["inputs"]
    processors = _processors(inp["processorInfos"])
    tree = _tree(tmp_path, processors)
    be = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    old = inp["oldCPUSet"]
    tree.write("cpuset.cpus", tree.layout.qos_dir(KubeQoS.GUARANTEED), old)
    tree.write("cpuset.cpus", be, old)
    pod_dirs = [tree.ensure_cgroup(f"{be}/{name}", {"cpuset.cpus": old}) for name in ("pod1", "pod2", "pod3")]
    harness = QOSHarness(
        tree,
        pods=inp["pods"],
        topology_annotations=inp["nodeResourceTopologyAnnotations"],
        create_cgroups=False,
    )
    harness.set_cpu_info(processors)
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), harness.context)
    strategy.adjust_by_cpuset(inp["cpusetQuantityMilli"], harness.context.cpu_info)  # type: ignore[arg-type]
    expected = vector["expected"]["besteffortCPUSet"]
    assert tree.read("cpuset.cpus", be) == expected
    for d in pod_dirs:
        assert tree.read("cpuset.cpus", d) == expected


@pytest.mark.parametrize("vector", _by("adjustByCfsQuota"))
def test_adjust_by_cfs_quota(vector: dict[str, Any], tmp_path: Path) -> None:
    inp = vector["inputs"]
    tree = FakeHostTree(tmp_path / "host", version=1, driver="systemd", cpus=8)
    be = tree.layout.qos_dir(KubeQoS.BEST_EFFORT)
    tree.write("cpu.cfs_quota_us", be, str(inp["preBECfsQuota"]))
    node = {"metadata": {"name": "test-node"}, "status": {"capacity": inp["nodeCapacity"]}}
    harness = QOSHarness(tree, node=node)
    strategy = BECPUSuppress(BECPUSuppress.parse_args({}), harness.context)
    strategy.adjust_by_cfs_quota(inp["cpuQuantityMilli"], node)
    assert int(tree.read("cpu.cfs_quota_us", be)) == vector["expected"]["beCfsQuota"]
