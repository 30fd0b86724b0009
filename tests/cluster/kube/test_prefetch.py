"""``KubeCluster.prefetch``: a full list started early is taken once by the next full ``list``; a failed or
stale one is listed again, so the caller sees the list it would have made."""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cli import serve as serve_module
from koord_framework.cluster.fence import FencedCluster, WriteFence
from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.kinds import KINDS
from koord_framework.cluster.kube import KubeCluster
from koord_framework.cluster.kube import adapter as adapter_module
from koord_framework.errors import KindNotServedError
from koord_framework.testing import make_node, make_pod
from koord_framework.testing.apiserver import FakeApiServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path, dict[str, list[Any]]]]:
    objects: dict[str, list[Any]] = {"Pod": [make_pod("p1", "d")], "Node": [make_node("n1")]}
    gate = threading.Event()
    gate.set()

    def of(kind: str) -> list[Any]:
        gate.wait(10)
        return list(objects.get(kind, []))

    with FakeApiServer(KINDS, of, not_served={"PodGroup"}) as server:
        server.gate = gate  # type: ignore[attr-defined]
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig"), objects


def _lists(server: FakeApiServer, kind: str) -> int:
    plural = KINDS[kind].plural
    return sum(1 for r in server.requests if r.split("?")[0].endswith(f"/{plural}"))


def test_the_next_full_list_takes_the_prefetched_one_once(served: Any) -> None:
    server, kubeconfig, objects = served
    with KubeCluster.from_kubeconfig(str(kubeconfig)) as cluster:
        server.gate.clear()  # the lists wait in the server: list() must wait for them, not list again
        cluster.prefetch(["Pod", "Node", "Pod"])
        objects["Pod"].append(make_pod("p2", "d"))
        server.gate.set()
        pods, _ = cluster.list("Pod")
        assert {p["metadata"]["name"] for p in pods} == {"p1", "p2"}
        assert _lists(server, "Pod") == 1
        nodes, _ = cluster.list("Node")
        assert [n["metadata"]["name"] for n in nodes] == ["n1"]
        cluster.list("Pod")  # taken once: the next list asks the server
        assert _lists(server, "Pod") == 2
        assert _lists(server, "Node") == 1


def test_a_namespaced_list_does_not_take_the_prefetch(served: Any) -> None:
    server, kubeconfig, _ = served
    with KubeCluster.from_kubeconfig(str(kubeconfig)) as cluster:
        cluster.prefetch(["Pod"])
        cluster.list("Pod", "d")
        cluster.list("Pod")
        assert _lists(server, "Pod") == 2


def test_a_failed_or_stale_prefetch_is_listed_again(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server, kubeconfig, objects = served
    with KubeCluster.from_kubeconfig(str(kubeconfig)) as cluster:
        cluster.prefetch(["PodGroup"])
        with pytest.raises(KindNotServedError, match="PodGroup"):  # the caller's own error, as without it
            cluster.list("PodGroup")
        monkeypatch.setattr(adapter_module, "PREFETCH_MAX_AGE", -1.0)
        cluster.prefetch(["Node"])
        objects["Node"].append(make_node("n2"))
        nodes, _ = cluster.list("Node")
        assert len(nodes) == 2  # listed again: the prefetched one (n1 alone) was too old
        assert _lists(server, "Node") == 2


def _args(config: Path, **overrides: Any) -> argparse.Namespace:
    values: dict[str, Any] = {"config": str(config), "kubeconfig": None, "leader_elect": None}
    values.update(overrides)
    return argparse.Namespace(**values)


def _profile(tmp_path: Path, leader_elect: bool, kubeconfig: str = "", wrap: bool = False) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": leader_elect},
    }
    if kubeconfig:
        doc["clientConnection"] = {"kubeconfig": kubeconfig}
    if wrap:
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"config.yaml": yaml.safe_dump(doc)}}
    path = tmp_path / "profile.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_serve_lists_early_with_or_without_leader_election(
    served: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lists start before the profile loads whenever a kubeconfig is named: with leader election too,
    as kube-scheduler's informers start before the election (a standby drops them, see below)."""
    server, kubeconfig, _ = served

    def early(name: str, args: argparse.Namespace, kube: Any) -> Any:
        return serve_module._early_lists(name, args, kube, serve_module._process_settings())

    off = _profile(tmp_path, False)
    found = early("scheduler", _args(off, kubeconfig=str(kubeconfig)), KubeCluster)
    assert found is not None and found[0] == str(kubeconfig)
    found[1].list("Pod")
    found[1].close()
    assert _lists(server, "Pod") == 1
    wrapped = _profile(tmp_path, False, str(kubeconfig), wrap=True)  # kubeconfig from the profile
    found = early("scheduler", _args(wrapped), KubeCluster)
    assert found is not None and found[0] == str(kubeconfig)
    found[1].close()
    on = _profile(tmp_path, True)
    for args in (
        _args(on, kubeconfig=str(kubeconfig)),
        _args(off, kubeconfig=str(kubeconfig), leader_elect="true"),
    ):
        found = early("scheduler", args, KubeCluster)
        assert found is not None and found[0] == str(kubeconfig)
        found[1].close()
    assert early("descheduler", _args(off, kubeconfig=str(kubeconfig)), KubeCluster) is None
    # None named, none by default, not in a pod: the connection after the profile reports it.
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert early("scheduler", _args(off), KubeCluster) is None
    broken = tmp_path / "broken.yaml"
    broken.write_text("leaderElection: [unclosed\n")
    assert early("scheduler", _args(broken, kubeconfig=str(kubeconfig)), KubeCluster) is None
    assert early("scheduler", _args(off, kubeconfig=str(tmp_path / "missing")), KubeCluster) is None


def test_a_prefetch_not_taken_in_time_is_dropped(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A standby replica's early lists are not kept while it waits for the Lease: the memory of 5,000 pods
    for a list it could not use anyway (too old by the time it leads)."""
    _, kubeconfig, _ = served
    monkeypatch.setattr(adapter_module, "PREFETCH_MAX_AGE", 0.05)
    with KubeCluster.from_kubeconfig(str(kubeconfig)) as cluster:
        cluster.prefetch(["Pod"])
        deadline = time.monotonic() + 10
        while cluster._prefetched and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not cluster._prefetched


def test_the_informers_first_list_reads_the_watch_cache(served: Any) -> None:
    """``list_to_watch`` (what the informer's first list uses) asks ``resourceVersion=0``, through the
    write fence too; a plain ``list`` stays a consistent read."""
    server, kubeconfig, _ = served
    with KubeCluster.from_kubeconfig(str(kubeconfig)) as cluster:
        fenced = FencedCluster(cluster, WriteFence("test"))
        informer = SharedInformer(fenced)
        informer.ensure("Pod")
        cluster.list("Pod")
        informer.stop()
    plural = KINDS["Pod"].plural
    pod_lists = [r for r in server.requests if r.split("?")[0].endswith(f"/{plural}") and "watch" not in r]
    assert "resourceVersion=0" in pod_lists[0]
    assert "resourceVersion" not in pod_lists[1]


def test_the_prefetch_reads_the_watch_cache_unpaged_and_other_lists_stay_paged(served: Any) -> None:
    """A reflector's first list: ``resourceVersion=0`` and no ``limit`` (one answer from the API server's
    watch cache, issue 22 gap 4); the lists the caller makes itself stay consistent, paged reads."""
    server, kubeconfig, objects = served
    objects["Pod"] = [make_pod(f"p{i}", "d") for i in range(7)]
    with KubeCluster.from_kubeconfig(str(kubeconfig), page_size=3) as cluster:
        cluster.prefetch(["Pod"])
        prefetched, _ = cluster.list("Pod")
        listed, _ = cluster.list("Pod")
    assert len(prefetched) == len(listed) == 7
    plural = KINDS["Pod"].plural
    pod_lists = [r for r in server.requests if r.split("?")[0].endswith(f"/{plural}")]
    assert "resourceVersion=0" in pod_lists[0] and "limit=" not in pod_lists[0]
    assert len(pod_lists) == 1 + 3  # the prefetch in one answer, then three pages of three
    assert all("limit=3" in r and "resourceVersion" not in r for r in pod_lists[1:])
