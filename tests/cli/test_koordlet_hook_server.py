"""``koord koordlet`` with runtime hooks serves RuntimeHookService: registration, readiness only while
serving, the socket removed on shutdown, bad flags refused."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import yaml

from koord_framework.cli import koordlet
from koord_framework.cli.main import build_parser
from koord_framework.koordlet.runtimehooks.client import (
    ContainerMetadata,
    ContainerResourceHookRequest,
    LinuxContainerResources,
    PodSandboxHookRequest,
    PodSandboxMetadata,
    RuntimeHookClient,
)
from koord_framework.testing.hosttree import FakeHostTree, make_running_pod
from koord_framework.testing.probes import free_port, get, wait_for

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1"},
    "status": {"capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "8", "memory": "16Gi"}},
}
SLO = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeSLO",
    "metadata": {"name": "node-1"},
    "spec": {},
}
CONFIG = """\
apiVersion: koordlet.koordinator.sh/v1alpha1
kind: KoordletConfiguration
nodeName: node-1
qosStrategies: []
runtimeHooks:
  enabled: [BatchResource, GroupIdentity]
"""


def test_koordlet_serves_runtime_hooks_until_stopped(tmp_path: Path) -> None:
    tree = FakeHostTree(tmp_path / "host", version=1, driver="cgroupfs", cpus=8)
    be = make_running_pod("be", node="node-1", qos="BE", requests={"kubernetes.io/batch-cpu": "1000"})
    tree.add_pod(be)
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    (cluster / "objects.yaml").write_text(yaml.safe_dump_all([NODE, SLO, be]))
    (tmp_path / "koordlet.yaml").write_text(CONFIG)
    sock = tmp_path / "run" / "koordlet.sock"
    port = free_port()
    argv = ["koordlet", "--cluster", str(cluster), "--host-root", str(tree.root), "--config"]
    argv += [str(tmp_path / "koordlet.yaml"), "--health-address", f"127.0.0.1:{port}"]
    argv += ["--runtime-hooks-addr", str(sock), "--runtime-hooks-disable-stages", "PostStopContainer"]
    args = build_parser().parse_args(argv)
    stop = threading.Event()
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(koordlet.run(args, stop=stop)), daemon=True)
    thread.start()
    try:
        wait_for(lambda: get(port, "/readyz") == (200, "ok"), 30, "/readyz 200")
        assert sock.exists()
        registered = json.loads((tree.root / "etc/runtime/hookserver.d/koordlet.json").read_text())
        assert registered["remote-endpoint"] == "/var/run/koordlet/koordlet.sock"
        assert registered["failure-policy"] == "Ignore"
        assert "PostStopContainer" not in registered["runtime-hooks"]
        assert "PreCreateContainer" in registered["runtime-hooks"]
        spec = {"containers": {"main": {"limits": {"kubernetes.io/batch-cpu": "1000"}}}}
        with RuntimeHookClient(str(sock)) as client:
            got = client.pre_create_container_hook(
                ContainerResourceHookRequest(
                    pod_meta=PodSandboxMetadata(name="be", namespace="default", uid="uid-be"),
                    container_meta=ContainerMetadata(name="main"),
                    pod_labels={"koordinator.sh/qosClass": "BE"},
                    pod_annotations={"node.koordinator.sh/extended-resource-spec": json.dumps(spec)},
                    container_resources=LinuxContainerResources(cpu_shares=2),
                )
            )
            # BatchResource: a 1-core batch limit is a 100 ms quota per 100 ms period.
            assert got.container_resources.cpu_quota == 100000
            pod = client.pre_run_pod_sandbox_hook(
                PodSandboxHookRequest(
                    pod_meta=PodSandboxMetadata(name="be", namespace="default", uid="uid-be")
                )
            )
            assert pod.cgroup_parent == ""
        status, metrics = get(port, "/metrics")
        assert status == 200 and "koordlet_runtime_hook_invoked_duration_milliseconds" in metrics
    finally:
        stop.set()
        thread.join(15)
    assert result == [0]
    assert not sock.exists(), "the socket is removed on shutdown"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--runtime-hooks-disable-stages", "PreFoo"], "PreFoo"),
        (["--runtime-hooks-timeout", "0"], "--runtime-hooks-timeout"),
    ],
)
def test_bad_hook_server_flags(
    tmp_path: Path, flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = FakeHostTree(tmp_path / "host")
    (tmp_path / "koordlet.yaml").write_text(CONFIG)
    argv = ["koordlet", "--host-root", str(tree.root), "--config", str(tmp_path / "koordlet.yaml")]
    argv += ["--runtime-hooks-addr", str(tmp_path / "k.sock"), *flags]
    assert koordlet.run(build_parser().parse_args(argv)) == 2
    assert message in capsys.readouterr().err


def test_unknown_hook_name_is_a_startup_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under either failure policy: a typo would otherwise leave every container without its hook while the
    koordlet looks healthy (``koord profile validate`` says the same before a rollout)."""
    from koord_framework.cli.main import main

    tree = FakeHostTree(tmp_path / "host")
    for policy in ("Ignore", "Fail"):
        cfg = tmp_path / f"koordlet-{policy}.yaml"
        cfg.write_text(
            CONFIG.replace("[BatchResource, GroupIdentity]", "[GroupIdentity, CoreSchedd]")
            + f"  failurePolicy: {policy}\n"
        )
        argv = ["koordlet", "--host-root", str(tree.root), "--config", str(cfg), "--runtime-hooks-addr", ""]
        assert main(argv) == 1  # koord's status for an invalid configuration file
        err = capsys.readouterr().err
        assert "runtimeHooks.enabled[1]" in err and "CoreSchedd" in err and "GroupIdentity" in err
