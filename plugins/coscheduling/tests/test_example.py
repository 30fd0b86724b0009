"""The shipped example through ``koord simulate``: the gang that fits binds entirely, the other binds nothing,
and the report has a row per gang (with its Permit decisions under ``--explain``)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from koord_framework.cli.simulate import render_table
from koord_framework.scheduler.simulate import SCHEMA_PATH, simulate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOW = 1_704_067_200.0


def test_example_binds_the_gang_that_fits_and_none_of_the_other() -> None:
    # The profile also names kube-scheduler's PrioritySort, DefaultPreemption, DefaultPreBind and
    # DefaultBinder: they come from whatever distribution provides them (koord-plugin-kubernetes).
    pytest.importorskip("koord_plugin_kubernetes")
    result, _ = simulate([EXAMPLES / "cluster.yaml"], EXAMPLES / "profile.yaml", now=NOW, explain=True)
    pods = {p.pod: p for p in result.pods}
    assert all(pods[f"training/small-{i}"].status == "Scheduled" for i in range(3))
    assert all(pods[f"training/big-{i}"].status == "Unschedulable" for i in range(4))
    assert (
        pods["training/small-0"].annotations["internal.scheduling.koordinator.sh/bind-gang-member-count"]
        == "3"
    )
    rows = {r["gang"]: r for r in result.plugins["Coscheduling"]}
    assert rows["training/small"]["verdict"] == "Satisfied" and rows["training/small"]["bound"] == 3
    big = rows["training/big"]
    assert big["verdict"] == "Rejected" and big["bound"] == 0
    assert big["why"].startswith('GangGroup "training/big" gets rejected due to member Pod "training/big-')
    assert [d["decision"] for d in rows["training/small"]["permit"]] == ["Wait", "Wait", "Allow"]
    doc = result.to_dict()
    jsonschema.validate(doc, json.loads(SCHEMA_PATH.read_text()))
    table = render_table(result, explain=True)
    assert "Coscheduling:" in table and "training/big" in table
