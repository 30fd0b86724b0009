"""``koord explain node`` / ``quota``: the sections of the enabled plugins, their numbers, a failing hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from koord_framework.cli.main import main
from koord_framework.cluster.manifests import dump_manifests
from koord_framework.scheduler.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = str(ROOT / "configs" / "examples" / "cluster")
SCHEMA = json.loads((ROOT / "koord_framework" / "explain" / "sections_schema.json").read_text())


def _json(capsys: pytest.CaptureFixture[str], *argv: str, cluster: str = EXAMPLES) -> dict[str, Any]:
    code = main(["explain", *argv, "--cluster", cluster, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    jsonschema.validate(data, SCHEMA)
    return data


def _section(data: dict[str, Any], plugin: str) -> dict[str, Any]:
    found = [s for s in data["sections"] if s["plugin"] == plugin]
    assert found, f"no {plugin} section in {[s['plugin'] for s in data['sections']]}"
    return found[0]


def test_numa_zones(capsys: pytest.CaptureFixture[str]) -> None:
    numa = _section(_json(capsys, "node", "numa-00"), "NodeNUMAResource")["data"]
    zones = numa["numaNodes"]
    assert [z["numaNode"] for z in zones] == [0, 1, 2, 3]
    assert all(z["freeCount"] == z["cpus"] == 16 for z in zones)  # nothing pinned yet


def test_loadaware_and_batch_resource_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "node", "node-18")
    assert data["sections"][0]["plugin"] == "scheduler"
    load = _section(data, "LoadAwareScheduling")["data"]
    cpu = next(r for r in load["resources"] if r["resource"] == "cpu")
    assert cpu["allocatable"] == 16000 and cpu["percent"] == round(100 * cpu["usagePlusEstimates"] / 16000, 1)
    batch = _section(data, "BatchResource")["data"]
    n = batch["numbers"]
    assert batch["policy"]["cpu"] == "usage" and batch["thresholdPercent"]["cpu"] is None
    expected = (
        n["capacity"]["cpu"]
        - n["safetyMargin"]["cpu"]
        - n["systemUsedOrReserved"]["cpu"]
        - n["hpUsed"]["cpu"]
    )
    assert batch["result"]["kubernetes.io/batch-cpu"]["quantity"] == max(expected, 0)


def test_devices(capsys: pytest.CaptureFixture[str]) -> None:
    devices = _section(_json(capsys, "node", "gpu-a100-0"), "DeviceShare")["data"]["devices"]
    gpus = [d for d in devices if d["type"] == "gpu"]
    assert [d["minor"] for d in gpus] == [0, 1, 2, 3]
    assert all(d["free"] == d["total"] and not d["pods"] for d in gpus)
    rdma = next(d for d in devices if d["type"] == "rdma")
    assert rdma["vfs"] == {"total": 2, "free": 2}


def test_reservations_and_allocations_after_a_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """On the state ``koord simulate --write-state`` leaves: reservations placed, devices and cpusets held."""
    from koord_framework.cli.common import shipped_config

    _, cluster = simulate([EXAMPLES], shipped_config("scheduler", "test"), now=None)
    dump_manifests(cluster, str(tmp_path))
    capsys.readouterr()
    reservations, _ = cluster.list("Reservation")
    placed = [r for r in reservations if (r.get("status") or {}).get("nodeName")]
    assert placed
    node = placed[0]["status"]["nodeName"]
    rows = _section(_json(capsys, "node", node, cluster=str(tmp_path)), "Reservation")["data"]["reservations"]
    assert placed[0]["metadata"]["name"] in {r["name"] for r in rows}
    devices = _section(_json(capsys, "node", "gpu-a100-0", cluster=str(tmp_path)), "DeviceShare")["data"]
    assert any(d["pods"] for d in devices["devices"])
    numa = _section(_json(capsys, "node", "numa-00", cluster=str(tmp_path)), "NodeNUMAResource")["data"]
    assert numa["allocations"] and sum(z["freeCount"] for z in numa["numaNodes"]) < 64


def test_quota_tree_and_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, "quota", "shop")
    eq = _section(data, "ElasticQuota")["data"]
    assert [row["name"] for row in eq["tree"]][-2:] == ["org", "shop"]
    shop = eq["tree"][-1]
    rounds = eq["rounds"]["cpu"]
    assert rounds[0]["round"] == 0 and "shop" in rounds[0]["nodes"]
    last = [r for r in rounds if "shop" in r["nodes"]][-1]
    assert last["nodes"]["shop"]["runtime"] == shop["runtime"]["cpu"]  # the rounds end at the runtime
    for r in rounds[1:]:
        assert sum(v["share"] for v in r["nodes"].values()) == r["total"]  # each round shares all it has


def test_quota_needs_elastic_quota_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(ROOT / "configs" / "scheduler" / "default-scheduler.yaml")
    code = main(["explain", "quota", "shop", "--cluster", EXAMPLES, "--config", config])
    assert code == 2 and "enable ElasticQuota" in capsys.readouterr().err


def test_a_failing_hook_is_reported_and_the_others_print(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from koord_plugin_loadaware.plugin import LoadAwareScheduling

    def broken(self: Any, node_name: str) -> Any:
        raise RuntimeError(f"cannot read {node_name}")

    monkeypatch.setattr(LoadAwareScheduling, "explain_node", broken)
    data = _json(capsys, "node", "node-18")
    assert _section(data, "LoadAwareScheduling")["error"] == "RuntimeError: cannot read node-18"
    assert _section(data, "BatchResource")["error"] == ""
    assert main(["explain", "node", "node-18", "--cluster", EXAMPLES]) == 0
    out = capsys.readouterr().out
    assert "LoadAwareScheduling: explain hook failed: RuntimeError: cannot read node-18" in out
    assert "BatchResource (koord-manager):" in out
