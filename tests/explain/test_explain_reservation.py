"""``koord explain pod`` on a reservation's owner: Reservation's ``PodExplainer`` section (entry point
``koord.explain.pod``) names the reservation the pod takes and why each other candidate was not used."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from koord_framework.cli.common import shipped_config
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.explain.pod import PodExplanation, explain_pod
from koord_framework.explain.render import render_pod
from koord_framework.testing import make_node, make_pod

reservation_testing = pytest.importorskip("koord_plugin_reservation.testing")
KOORD = "koord-scheduler"


def make_reservation(name: str, **kw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = reservation_testing.make_reservation(name, scheduler_name=KOORD, **kw)
    return obj


def _explain(objs: list[dict[str, Any]], pod: str = "default/web-1") -> PodExplanation:
    cluster = MemoryCluster(VirtualClock(0.0), seed=0)
    for obj in objs:
        cluster.create(obj)
    return explain_pod(cluster, shipped_config("scheduler", "explain"), pod)


def _section(ex: PodExplanation) -> dict[str, Any]:
    found = [s for s in ex.sections if s.plugin == "Reservation"]
    assert len(found) == 1 and found[0].section is not None, [s.to_dict() for s in ex.sections]
    data: dict[str, Any] = found[0].section.data
    return data


def _verdicts(data: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["name"]: (c["verdict"], c["reason"]) for c in data["candidates"]}


def _cluster() -> list[dict[str, Any]]:
    web = {"app": "web"}
    return [
        make_node("n1", cpu="4"),
        make_node("n2", cpu="4"),
        make_node("n3", cpu="4", labels={"pool": "other"}),
        make_reservation("r-web", cpu="2", owner_labels=web, node="n1"),
        make_reservation("r-closed", cpu="2", owner_labels=web, node="n2", unschedulable=True),
        make_reservation(
            "r-tainted",
            cpu="2",
            owner_labels=web,
            node="n3",
            taints=[{"key": "team", "value": "ops", "effect": "NoSchedule"}],
        ),
        make_reservation("r-later", cpu="2", owner_labels=web),  # not scheduled yet
        make_reservation("r-db", cpu="2", owner_labels={"app": "db"}, node="n2"),  # not this pod's
        make_pod("web-1", cpu="1", labels=web, scheduler_name=KOORD),
    ]


def test_the_reservation_taken_and_why_each_other_candidate_was_not() -> None:
    ex = _explain(_cluster())
    assert ex.node == "n1"
    data = _section(ex)
    assert data["reservation"] == "r-web" and data["node"] == "n1"
    verdicts = _verdicts(data)
    assert verdicts["r-web"][0] == "nominated"
    assert verdicts["r-closed"] == ("unmatched", "is unschedulable")  # Koordinator's reason
    assert verdicts["r-tainted"] == ("unmatched", "had untolerated taint {team: ops}")
    assert verdicts["r-later"][0] == "unavailable" and "Pending" in verdicts["r-later"][1]
    assert "r-db" not in verdicts
    text = render_pod(ex)
    assert "Reservation:\n  uses reservation r-web on node n1\n" in text
    assert "r-closed on n2: unmatched: is unschedulable" in text


def test_a_matched_reservation_on_a_rejected_node_says_who_rejected_it() -> None:
    objs = _cluster()
    objs.append(make_reservation("r-full", cpu="2", owner_labels={"app": "web"}, node="n2"))
    objs.append(make_pod("hog", cpu="2", node="n2", scheduler_name=KOORD))  # n2: 4 cpu, 2 reserved, 2 used
    objs.append(make_reservation("r-web2", cpu="2", owner_labels={"app": "web"}, node="n3"))
    ex = _explain(objs)
    assert ex.node == "n1" and not ex.tied_with
    verdicts = _verdicts(_section(ex))
    assert verdicts["r-web"][0] == "nominated"
    # n2 holds r-full, r-closed (unschedulable, still reserving) and hog: no room left
    assert verdicts["r-full"] == ("rejected", "node rejected by NodeResourcesFit: Insufficient cpu")
    assert verdicts["r-web2"] == ("matched", "usable, but the pod goes to node n1")


def test_pods_no_reservation_concerns_get_no_section_and_the_json_keeps_its_schema() -> None:
    import json
    from pathlib import Path

    ex = _explain([make_node("n1"), make_pod("web-1", cpu="1", labels={"app": "web"}, scheduler_name=KOORD)])
    assert not ex.sections
    schema = json.loads(
        (Path(__file__).resolve().parents[2] / "koord_framework" / "explain" / "pod_schema.json").read_text()
    )
    jsonschema.validate(_explain(_cluster()).to_dict(), schema)
