"""The ``quotaprofile`` controller in koord-manager on the embedded cluster: conformance, bad input reported
with nothing written, deletion, the 10 s requeue that carries node changes to the quota, the manager's
``--controllers`` flag, and the quota's exact text."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from koord_plugin_elasticquota.profile_controller import (
    FAILED_REQUEUE,
    REASON_CREATE_QUOTA_FAILED,
    REASON_INVALID_PROFILE,
    RESYNC,
    QuotaProfileController,
)
from koord_plugin_elasticquota.quota_profile import parse_go_float, tree_id_of
from prometheus_client import CollectorRegistry

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import EventRecord
from koord_framework.errors import ConflictError, KoordError
from koord_framework.manager.component import ManagerComponent
from koord_framework.testing.conformance import ManagerControllerConformance

TREE = "quota.scheduling.koordinator.sh/tree-id"
TOTAL = "quota.scheduling.koordinator.sh/total-resource"
UNSCHEDULABLE = "quota.scheduling.koordinator.sh/unschedulable-resource"
KEYS = "quota.scheduling.koordinator.sh/resource-keys"
MAX = str((2**63 - 1) // 2000)


class TestQuotaProfileConformance(ManagerControllerConformance):
    plugin_class = QuotaProfileController
    spec_fields = ("quotaName", "nodeSelector", "resourceRatio", "quotaLabels")


def node(
    name: str, cpu: str, memory: str, pool: str = "a", *, ready: bool = True, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"pool": pool}},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def profile(name: str = "p", quota: Any = "root-a", selector: Any = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "quota.koordinator.sh/v1alpha1",
        "kind": "ElasticQuotaProfile",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "quotaName": quota,
            "nodeSelector": selector if selector is not None else {"matchLabels": {"pool": "a"}},
            **spec,
        },
    }


@pytest.fixture
def cluster() -> MemoryCluster:
    c = MemoryCluster(VirtualClock(1_700_000_000.0), seed=0)
    c.create(node("n1", "8", "32Gi"))
    c.create(node("n2", "4", "16Gi", ready=False))
    c.create(node("n3", "16", "64Gi", pool="b"))
    return c


def manager(cluster: MemoryCluster) -> ManagerComponent:
    return ManagerComponent(
        cluster,
        CollectorRegistry(),
        config_namespace="koordinator-system",
        plugins=[],
        controllers=(),
        controller_plugins=[QuotaProfileController()],
    )


def sync(cluster: MemoryCluster) -> ManagerComponent:
    m = manager(cluster)
    try:
        m.sync_once()
    finally:
        m.close()
    return m


def warnings(cluster: MemoryCluster) -> list[EventRecord]:
    return [e for e in cluster.events if e.type == "Warning"]


def test_root_quota_text_is_koordinators(cluster: MemoryCluster) -> None:
    cluster.create(profile(quotaLabels={"team": "x"}))
    sync(cluster)
    quota = cluster.get("ElasticQuota", "root-a", "team")
    assert quota["spec"] == {"min": {"cpu": "12", "memory": "48Gi"}, "max": {"cpu": MAX, "memory": MAX}}
    meta = quota["metadata"]
    assert json.loads(meta["annotations"][TOTAL]) == {"cpu": "12", "memory": "48Gi", "pods": "220"}
    # json.Marshal's form: sorted keys, no spaces.
    assert meta["annotations"][TOTAL] == '{"cpu":"12","memory":"48Gi","pods":"220"}'
    assert meta["annotations"][UNSCHEDULABLE] == '{"cpu":"4","memory":"16Gi","pods":"110"}'
    assert meta["labels"] == {
        "quota.scheduling.koordinator.sh/profile": "p",
        "team": "x",
        TREE: tree_id_of("team", "p"),
        "quota.scheduling.koordinator.sh/is-root": "true",
    }
    assert cluster.get("ElasticQuotaProfile", "p", "team")["metadata"]["labels"][TREE] == tree_id_of(
        "team", "p"
    )


def test_unschedulable_nodes_and_ratio(cluster: MemoryCluster) -> None:
    cluster.create(node("n4", "2", "1Gi", unschedulable=True))
    cluster.create(profile(resourceRatio="0.5"))
    sync(cluster)
    quota = cluster.get("ElasticQuota", "root-a", "team")
    assert quota["spec"]["min"] == {"cpu": "7", "memory": "25088Mi"}
    assert json.loads(quota["metadata"]["annotations"][UNSCHEDULABLE]) == {
        "cpu": "3",
        "memory": "8704Mi",
        "pods": "110",
    }


def test_nil_selector_selects_no_node(cluster: MemoryCluster) -> None:
    obj = profile()
    del obj["spec"]["nodeSelector"]
    cluster.create(obj)
    sync(cluster)
    assert cluster.get("ElasticQuota", "root-a", "team")["spec"]["min"] == {"cpu": "0", "memory": "0"}


def test_resource_keys_annotation(cluster: MemoryCluster) -> None:
    obj = profile()
    obj["metadata"]["annotations"] = {KEYS: '["cpu","nvidia.com/gpu"]'}
    cluster.create(obj)
    sync(cluster)
    assert cluster.get("ElasticQuota", "root-a", "team")["spec"]["min"] == {
        "cpu": "12",
        "nvidia.com/gpu": "0",
    }


@pytest.mark.parametrize(
    ("ratio", "keys", "field"),
    [
        ("1.5", None, "spec.resourceRatio"),
        ("x", None, "spec.resourceRatio"),
        (None, '"cpu"', f"metadata.annotations[{KEYS}]"),
        (None, "[cpu", f"metadata.annotations[{KEYS}]"),
    ],
)
def test_tolerated_bad_input_falls_back_as_koordinator_and_is_reported(
    cluster: MemoryCluster, ratio: str | None, keys: str | None, field: str
) -> None:
    obj = profile(**({"resourceRatio": ratio} if ratio is not None else {}))
    if keys is not None:
        obj["metadata"]["annotations"] = {KEYS: keys}
    cluster.create(obj)
    sync(cluster)
    # Ratio 1 and the default keys, as Koordinator does.
    assert cluster.get("ElasticQuota", "root-a", "team")["spec"]["min"] == {"cpu": "12", "memory": "48Gi"}
    (event,) = warnings(cluster)
    assert event.reason == REASON_INVALID_PROFILE
    assert (event.kind, event.namespace, event.name) == ("ElasticQuotaProfile", "team", "p")
    assert "ElasticQuotaProfile team/p" in event.message and field in event.message


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (profile(quota=""), "spec.quotaName"),
        (profile(quota=None), "spec.quotaName"),
        (
            profile(selector={"matchExpressions": [{"key": "pool", "operator": "Near"}]}),
            "spec.nodeSelector.matchExpressions[0].operator",
        ),
        (
            profile(selector={"matchExpressions": [{"key": "pool", "operator": "In", "values": []}]}),
            "spec.nodeSelector.matchExpressions[0]",
        ),
    ],
)
def test_malformed_profile_is_reported_and_nothing_written(obj: dict[str, Any], field: str) -> None:
    # The cache holds what the API server would refuse too (a profile written before its CRD's schema).
    c = MemoryCluster(VirtualClock(0.0), seed=0)
    c.create(node("n1", "8", "32Gi"))
    controller = QuotaProfileController()
    m = ManagerComponent(
        c,
        CollectorRegistry(),
        config_namespace="x",
        plugins=[],
        controllers=(),
        controller_plugins=[controller],
    )
    try:
        ctx = controller.context

        class Bad:
            cluster = ctx.cluster

            def get(self, kind: str, name: str, namespace: str = "") -> Any:
                return obj if kind == "ElasticQuotaProfile" else ctx.get(kind, name, namespace)

            def list(self, kind: str, namespace: str | None = None) -> Any:
                return [obj] if kind == "ElasticQuotaProfile" else ctx.list(kind, namespace)

            def feature_enabled(self, name: str) -> bool:
                return ctx.feature_enabled(name)

        controller.bind(Bad())
        with pytest.raises(
            KoordError, match=r"ElasticQuotaProfile team/p: " + field.replace("[", r"\[").replace("]", r"\]")
        ):
            controller.reconcile("team/p")
    finally:
        m.close()
    assert c.list("ElasticQuota")[0] == []
    (event,) = warnings(c)
    assert event.reason == REASON_INVALID_PROFILE and field in event.message


def test_malformed_node_allocatable_names_the_node(cluster: MemoryCluster) -> None:
    cluster.create(profile())
    controller = QuotaProfileController()
    m = manager(cluster)
    m.close()
    bad = node("n9", "eight", "1Gi")

    class Ctx:
        cluster_ = cluster

        @property
        def cluster(self) -> MemoryCluster:
            return cluster

        def get(self, kind: str, name: str, namespace: str = "") -> Any:
            return cluster.try_get(kind, name, namespace)

        def list(self, kind: str, namespace: str | None = None) -> Any:
            objs, _ = cluster.list(kind, namespace)
            return [*objs, bad] if kind == "Node" else objs

        def feature_enabled(self, name: str) -> bool:
            return False

    controller.bind(Ctx())
    with pytest.raises(KoordError, match=r"Node n9: status.allocatable\[cpu\]"):
        controller.reconcile("team/p")
    assert cluster.list("ElasticQuota")[0] == []
    # Nothing half-applied: not even the tree id went onto the profile.
    assert TREE not in (cluster.get("ElasticQuotaProfile", "p", "team")["metadata"].get("labels") or {})


def test_create_failure_is_an_event_and_a_2s_requeue(
    cluster: MemoryCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.create(profile())
    m = manager(cluster)
    try:
        (controller,) = m.controller_plugins

        def refuse(obj: Any) -> Any:
            raise ConflictError('elasticquotas "root-a" already exists')

        monkeypatch.setattr(cluster, "create", refuse)
        assert controller.reconcile("team/p") == FAILED_REQUEUE
        monkeypatch.undo()
        assert controller.reconcile("team/p") == RESYNC
    finally:
        m.close()
    (event,) = warnings(cluster)
    assert event.reason == REASON_CREATE_QUOTA_FAILED
    assert event.message.startswith("failed to create quota, err: ")


def test_deleting_the_profile_keeps_the_quota_and_stops_requeueing(cluster: MemoryCluster) -> None:
    cluster.create(profile())
    m = manager(cluster)
    try:
        m.sync_once()
        (ctrl,) = m.extra
        assert ctrl.next_retry() is not None  # the 10 s requeue
        cluster.delete("ElasticQuotaProfile", "p", "team")
        ctrl.enqueue("team/p")
        m.loop.run_once()
        assert ctrl.next_retry() is None
    finally:
        m.close()
    assert cluster.try_get("ElasticQuota", "root-a", "team") is not None


def test_an_added_node_reaches_min_at_the_requeue(cluster: MemoryCluster) -> None:
    cluster.create(profile())
    m = manager(cluster)
    try:
        m.sync_once()
        m._watch()  # the event handlers, as run() installs them (the cached profile comes in again)
        m.loop.run_once()
        (ctrl,) = m.extra
        assert cluster.get("ElasticQuota", "root-a", "team")["spec"]["min"]["cpu"] == "12"
        cluster.create(node("n5", "4", "16Gi"))
        m.loop.run_once()
        # Koordinator does not watch nodes: the quota follows at the next requeue, 10 s later.
        assert cluster.get("ElasticQuota", "root-a", "team")["spec"]["min"]["cpu"] == "12"
        retry = ctrl.next_retry()
        assert retry is not None and 0 < retry - time.monotonic() <= RESYNC
        ctrl.process(m.loop.errors, now=lambda: time.monotonic() + RESYNC)
        quota = cluster.get("ElasticQuota", "root-a", "team")
        assert quota["spec"]["min"] == {"cpu": "16", "memory": "64Gi"}
        assert json.loads(quota["metadata"]["annotations"][TOTAL])["pods"] == "330"
        # A spec change of the profile is reconciled at once (GenerationChangedPredicate).
        obj = cluster.get("ElasticQuotaProfile", "p", "team")
        obj["spec"]["resourceRatio"] = "0.5"
        cluster.update(obj)
        m.loop.run_once()
        assert cluster.get("ElasticQuota", "root-a", "team")["spec"]["min"] == {"cpu": "8", "memory": "32Gi"}
    finally:
        m.close()


def test_unchanged_quota_is_not_written(cluster: MemoryCluster) -> None:
    cluster.create(profile())
    sync(cluster)
    rv = cluster.get("ElasticQuota", "root-a", "team")["metadata"]["resourceVersion"]
    sync(cluster)
    assert cluster.get("ElasticQuota", "root-a", "team")["metadata"]["resourceVersion"] == rv


def test_go_parse_float() -> None:
    assert parse_go_float("0.9") == 0.9
    assert parse_go_float(".5") == 0.5
    assert parse_go_float("5e-1") == 0.5
    assert parse_go_float("0x1p-1") == 0.5
    for text in (" 0.5", "0.5 ", "1_0", "", "0.5x", "1e400"):
        assert parse_go_float(text) is None, text


def test_manager_cli_runs_it_and_controllers_flag_disables_it(tmp_path: Any) -> None:
    import argparse

    from koord_framework.cli import manager as cli

    folder = tmp_path / "cluster"
    folder.mkdir()
    import yaml

    (folder / "objs.yaml").write_text(
        yaml.safe_dump_all([node("n1", "8", "32Gi"), profile()]), encoding="utf-8"
    )
    for selection, created in (
        ("*", True),
        ("*,-quotaprofile", False),
        ("nodeslo", False),
        ("quotaprofile", True),
    ):
        parser = argparse.ArgumentParser()
        cli.register(parser.add_subparsers())
        args = parser.parse_args(["manager", "--cluster", str(folder), "--once", "--controllers", selection])
        c = cli._embedded([str(folder)], None)
        assert cli.run(args, cluster=c) == 0
        assert (c.try_get("ElasticQuota", "root-a", "team") is not None) is created, selection
