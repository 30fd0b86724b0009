"""``koord snapshot`` against the fake API server: round trip, paging, streaming, errors, atomic output."""

from __future__ import annotations

import json
import socket
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koord_framework.cli.main import main
from koord_framework.cluster.kinds import KindRegistry
from koord_framework.cluster.kube.errors import ExpiredError
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.snapshot import INDEX_FILE, SnapshotOptions, SnapshotWriter, take_snapshot
from koord_framework.snapshot.run import Progress
from koord_framework.testing.apiserver import FakeApiServer

from .conftest import by_key  # type: ignore[import-not-found]

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def snapshot(*args: str) -> int:
    return main(["snapshot", *args])


def index_of(directory: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((directory / INDEX_FILE).read_text())
    return data


def test_help_names_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert snapshot("--help") == 0
    out = capsys.readouterr().out
    for option in ("--kubeconfig", "--output", "--anonymize", "--salt", "--config-namespace", "--quiet"):
        assert option in out
    assert "Exit status" in out and "DIR.partial" in out


def test_round_trip_gives_the_same_objects(
    example_cluster: MemoryCluster, served: FakeApiServer, kubeconfig: Path, tmp_path: Path
) -> None:
    out = tmp_path / "snap"
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(out), "--page-size", "7", "-q") == 0
    loaded = MemoryCluster.from_paths([out])
    compared = 0
    for kind in example_cluster.kinds:
        if kind in ("ConfigMap", "Event"):
            continue
        expected = by_key(example_cluster, kind)
        if kind in ("Pod", "Node", "NodeMetric", "Device", "ElasticQuota", "PodGroup", "Reservation"):
            assert expected, kind  # the example has some: the comparison is not vacuous
        assert by_key(loaded, kind) == expected, kind
        compared += len(expected)
    assert compared > 150
    # Only the components' ConfigMaps, read by name.
    config_maps = by_key(loaded, "ConfigMap")
    assert set(config_maps) == {("koordinator-system", "slo-controller-config")}
    assert config_maps == {k: v for k, v in by_key(example_cluster, "ConfigMap").items() if k in config_maps}
    # Paged: the 126 pods took 18 list requests of 7.
    pod_lists = [r for r in served.requests if r.startswith("/api/v1/pods?")]
    assert len(pod_lists) == 18 and all("limit=7" in r for r in pod_lists)
    index = index_of(out)
    assert (
        index["complete"] is True
        and index["counts"]["Pod"] == 126
        and not (tmp_path / "snap.partial").exists()
    )


def test_server_managed_fields_are_stripped_and_identity_kept(kubeconfig: Path, tmp_path: Path) -> None:
    out = tmp_path / "snap"
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(out), "-q") == 0
    text = (out / "nodes.yaml").read_text()
    assert "managedFields" not in text and "last-applied-configuration" not in text
    assert "resourceVersion" not in text
    assert "uid:" in text and "creationTimestamp:" in text


def test_forbidden_kind_is_skipped_and_the_snapshot_is_partial(
    example_cluster: MemoryCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeApiServer.from_cluster(example_cluster, forbidden={"NodeMetric"}) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kc")
        out = tmp_path / "snap"
        assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(out)) == 1
    err = capsys.readouterr().err
    assert "skip NodeMetric: forbidden" in err and "partial" in err and "PARTIAL" in err
    assert not (out / "nodemetrics.yaml").exists() and (out / "pods.yaml").exists()
    index = index_of(out)
    assert index["complete"] is False and "NodeMetric" in index["failed"]


def test_a_kind_not_served_is_skipped_with_one_line(
    example_cluster: MemoryCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeApiServer.from_cluster(example_cluster, not_served={"Device"}) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kc")
        assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "snap"), "-q") == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "Device" in line]
    assert lines == ["skip Device: the API server does not serve devices.scheduling.koordinator.sh"]
    assert index_of(tmp_path / "snap")["complete"] is True


def test_a_kind_not_installed_is_skipped(served: FakeApiServer, tmp_path: Path) -> None:
    from koord_framework.snapshot.source import KubeSource

    lines: list[str] = []

    class Lines:
        def write(self, text: str) -> None:
            lines.extend(t for t in text.splitlines() if t)

        def flush(self) -> None:
            pass

    kinds = KindRegistry.builtin()  # no plugin distribution's kinds
    source = KubeSource.from_kubeconfig(str(served.write_kubeconfig(tmp_path / "kc")), kinds)
    try:
        result = take_snapshot(
            source,
            SnapshotWriter(tmp_path / "snap"),
            kinds,
            SnapshotOptions(kinds=("Node", "ElasticQuota"), config_maps=()),
            Progress(Lines(), quiet=True),  # type: ignore[arg-type]
        )
    finally:
        source.close()
    assert result.complete and result.counts == {"Node": 28}
    assert len(lines) == 1 and lines[0].startswith("skip ElasticQuota: kind not installed here")
    assert "koord-plugin-elasticquota" in lines[0]


def test_an_expired_continue_token_lists_the_kind_again(
    example_cluster: MemoryCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeApiServer.from_cluster(example_cluster) as server:
        server.expire_continue_once = {"Pod"}
        kubeconfig = server.write_kubeconfig(tmp_path / "kc")
        assert (
            snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "snap"), "--page-size", "50") == 0
        )
    assert "Pod: the list's continue token expired; listing it again" in capsys.readouterr().err
    assert by_key(MemoryCluster.from_paths([tmp_path / "snap"]), "Pod") == by_key(example_cluster, "Pod")


def test_an_unreachable_server_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    assert (
        snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "snap"), "--request-timeout", "5") == 3
    )
    err = capsys.readouterr().err
    assert f"cannot reach the API server http://127.0.0.1:{port} (kubeconfig {kubeconfig})" in err
    assert "nothing was written" in err
    assert not (tmp_path / "snap").exists() and not (tmp_path / "snap.partial").exists()


def test_a_server_that_dies_midway_leaves_no_directory(
    example_cluster: MemoryCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = {"n": 0}

    with FakeApiServer.from_cluster(example_cluster) as server:
        objects = server.objects

        def dying(kind: str) -> Any:
            if kind == "Pod":
                calls["n"] += 1
                if calls["n"] == 2:
                    server.down = True
            return objects(kind)

        server.objects = dying
        kubeconfig = server.write_kubeconfig(tmp_path / "kc")
        code = snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "snap"), "--page-size", "10")
    assert code == 3
    assert "cannot reach the API server" in capsys.readouterr().err
    assert not (tmp_path / "snap").exists() and not (tmp_path / "snap.partial").exists()


def test_bad_kubeconfig_and_existing_output_are_usage_errors(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.yaml"
    assert snapshot("--kubeconfig", str(missing), "-o", str(tmp_path / "snap")) == 2
    assert f"kubeconfig {missing}: no such file" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters: [\n")
    assert snapshot("--kubeconfig", str(broken), "-o", str(tmp_path / "snap")) == 2
    assert f"kubeconfig {broken}" in capsys.readouterr().err
    out = tmp_path / "snap"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(out), "-q") == 2
    assert "already exists (give --force to replace it)" in capsys.readouterr().err
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(out), "-q", "--force") == 0
    assert not (out / "keep.txt").exists() and (out / "pods.yaml").exists()


def test_an_unfinished_run_is_cleaned_up_but_a_foreign_partial_is_not(
    kubeconfig: Path, tmp_path: Path
) -> None:
    partial = tmp_path / "snap.partial"
    partial.mkdir()
    (partial / "stuff").write_text("not ours")
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "snap"), "-q") == 2
    (partial / "stuff").unlink()
    (partial / ".koord-snapshot-partial").write_text("")
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "snap"), "-q") == 0
    assert not partial.exists()


def test_an_object_the_loader_would_refuse_is_left_out_and_named(
    example_cluster: MemoryCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeApiServer.from_cluster(example_cluster) as server:
        pods = server.objects("Pod")
        pods[0]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
        bad = f"{pods[0]['metadata']['namespace']}/{pods[0]['metadata']['name']}"
        kubeconfig = server.write_kubeconfig(tmp_path / "kc")
        assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "snap"), "-q") == 1
    err = capsys.readouterr().err
    assert f"skip Pod {bad}: the --cluster loader would refuse it" in err and "'lots'" in err
    loaded = MemoryCluster.from_paths([tmp_path / "snap"])  # loads: the bad pod is not there
    assert loaded.count("Pod") == 125


def test_progress_lines_and_quiet(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "a")) == 0
    err = capsys.readouterr().err.splitlines()
    assert any(line.startswith("Pod: 126 in ") and line.endswith("/s)") for line in err)
    assert err[-1].startswith(f"snapshot {tmp_path / 'a'}: complete, ")
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(tmp_path / "b"), "--quiet") == 0
    quiet = capsys.readouterr().err.splitlines()
    assert not any(line.startswith(("Pod:", "  ")) for line in quiet)
    assert len(quiet) == 3 and quiet[-1].startswith(
        f"snapshot {tmp_path / 'b'}: complete, "
    )  # 2 ConfigMaps absent


class _GeneratedSource:
    """Pods made on the fly, page by page: nothing but the current page exists at any time."""

    def __init__(self, pods: int) -> None:
        self.pods = pods
        self.expire_at: int | None = None

    def describe(self) -> str:
        return "generated"

    def check(self) -> None:
        return None

    def serves(self, kind: str) -> bool:
        return True

    def api_version(self, kind: str) -> str:
        return "v1"

    def pages(self, kind: str, page_size: int) -> Iterator[list[dict[str, Any]]]:
        for start in range(0, self.pods, page_size):
            if self.expire_at is not None and start >= self.expire_at:
                self.expire_at = None
                raise ExpiredError("continue expired")
            yield [_pod(i) for i in range(start, min(self.pods, start + page_size))]

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return None


def _pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"pod-{i:06d}",
            "namespace": f"team-{i % 40}",
            "uid": f"uid-{i}",
            "labels": {"app": f"app-{i % 300}", "koordinator.sh/qosClass": "LS"},
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}] * 3,
            "resourceVersion": str(i),
        },
        "spec": {
            "nodeName": f"node-{i % 500}",
            "schedulerName": "koord-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": f"registry.example/app-{i % 300}:v1",
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }


def test_a_large_cluster_streams_without_holding_it(tmp_path: Path) -> None:
    """Memory stays at about a page whatever the size: far below what holding every pod would take."""
    pods = 3000
    tracemalloc.start()
    try:
        held = [_pod(i) for i in range(500)]
        per_pod = tracemalloc.get_traced_memory()[0] / len(held)  # what one parsed pod of this shape takes
        del held
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        take_snapshot(
            _GeneratedSource(pods),
            SnapshotWriter(tmp_path / "snap"),
            KindRegistry.builtin(),
            SnapshotOptions(kinds=("Pod",), config_maps=(), page_size=100),
            Progress(quiet=True),
        )
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert index_of(tmp_path / "snap")["counts"]["Pod"] == pods
    assert peak < pods * per_pod / 4, (peak, per_pod)


def test_expired_list_starts_the_kind_again_without_duplicates(tmp_path: Path) -> None:
    source = _GeneratedSource(1000)
    source.expire_at = 600
    take_snapshot(
        source,
        SnapshotWriter(tmp_path / "snap"),
        KindRegistry.builtin(),
        SnapshotOptions(kinds=("Pod",), config_maps=(), page_size=200),
        Progress(quiet=True),
    )
    assert MemoryCluster.from_paths([tmp_path / "snap"]).count("Pod") == 1000


def test_kinds_dumps_only_the_named_kinds(kubeconfig: Path, tmp_path: Path) -> None:
    out = tmp_path / "snap"
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(out), "-q", "--kinds", "pods,NODE") == 0
    assert sorted(p.name for p in out.glob("*.yaml")) == ["nodes.yaml", "pods.yaml"]
    assert set(index_of(out)["counts"]) == {"Node", "Pod"}
    again = tmp_path / "again"
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(again), "-q", "--kinds", "configmaps") == 0
    assert sorted(p.name for p in again.glob("*.yaml")) == ["configmaps.yaml"]


def test_kinds_refuses_an_unknown_name_and_lists_the_known(
    kubeconfig: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "snap"
    assert snapshot("--kubeconfig", str(kubeconfig), "-o", str(out), "--kinds", "pods,widgets") == 2
    err = capsys.readouterr().err
    assert "unknown kind 'widgets'" in err and "Pod (pods)" in err and "ConfigMap (configmaps)" in err
    assert not out.exists()
