"""Koordinator's GroupIdentity unit-test vectors (``data/vectors.json``), through the hook extension point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_groupidentity import BvtRule, GroupIdentity

from koord_framework.koordlet.cgroups import CPU_BVT_WARP_NS
from koord_framework.koordlet.runtimehooks import Stage
from koord_framework.testing.hosttree import FakeHostTree
from koord_framework.testing.runtimehooks import HookHarness, pod_request, state_with_merged_slo


def harness(root: Path, *, bvt_file: bool = True, sysctl: str | None = None, **kw: Any) -> HookHarness:
    """Hooks on a cgroup v1 cgroupfs host; ``bvt_file`` gives the kubepods dirs ``cpu.bvt_warp_ns``."""
    tree = FakeHostTree(root, version=1, driver="cgroupfs")
    if bvt_file:
        for d in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
            tree.ensure_cgroup(d, {CPU_BVT_WARP_NS: "0"})
    if sysctl is not None:
        path = tree.paths.proc / "sys/kernel/sched_group_identity_enabled"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(sysctl + "\n")
    return HookHarness(tree, [GroupIdentity], **kw)


VECTORS = json.loads((Path(__file__).parent / "data" / "vectors.json").read_text())["vectors"]


def _by(prefix: str) -> list[Any]:
    return [pytest.param(v, id=v["id"]) for v in VECTORS if v["function"].startswith(prefix)]


def test_every_vector_is_used() -> None:
    assert len(_by("bvtPlugin.parseRule")) + len(_by("bvtPlugin.SetPodBvtValue")) == len(VECTORS) > 0


@pytest.mark.parametrize("vector", _by("bvtPlugin.parseRule"))
def test_parse_rule(vector: dict[str, Any], tmp_path: Path) -> None:
    h = harness(tmp_path)
    hook = h.manager.hook("GroupIdentity")
    assert isinstance(hook, GroupIdentity)
    if vector["inputs"]["previousRule"] is not None:
        hook.rule = BvtRule.from_dict(vector["inputs"]["previousRule"])
    changed = h.manager.update_rules(
        state_with_merged_slo({"resourceQOSStrategy": vector["inputs"]["resourceQOSStrategy"]})
    )
    assert (changed == ["GroupIdentity"]) is vector["expected"]["updated"]
    assert hook.rule is not None and hook.rule.as_dict() == vector["expected"]["rule"]


@pytest.mark.parametrize("vector", _by("bvtPlugin.SetPodBvtValue"))
def test_set_pod_bvt_value(vector: dict[str, Any], tmp_path: Path) -> None:
    h = harness(tmp_path)
    hook = h.manager.hook("GroupIdentity")
    assert isinstance(hook, GroupIdentity)
    hook.rule = BvtRule.from_dict(vector["inputs"]["rule"])
    req = vector["inputs"]["request"]
    result = h.manager.run_pod(
        Stage.PRE_RUN_POD_SANDBOX, pod_request(req["labels"], req["annotations"], req["cgroupParent"])
    )
    assert result.failures == []
    assert result.response.resources.cpu_bvt == vector["expected"]["cpuBvt"]
