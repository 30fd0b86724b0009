"""The chart's koord-device-daemon DaemonSet: identity, host paths, RBAC, and args the CLI accepts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "configs" / "helm" / "koord"


def _helm() -> Any:
    key = "koord_deploy_helm_render"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name("helm_render.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [obj for _, obj in _helm().render_chart(CHART, values)]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [match] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return match


def test_daemonset_runs_the_device_daemon_with_the_host_paths_it_reads() -> None:
    objects = render()
    ds = find(objects, "DaemonSet", "koord-device-daemon")
    pod = ds["spec"]["template"]["spec"]
    assert (
        ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    )
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["hostNetwork"] and pod["hostPID"] and pod["hostIPC"]
    [main] = pod["containers"]
    assert main["securityContext"]["privileged"] is True
    mounts = {m["name"]: m for m in main["volumeMounts"]}
    volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert volumes == {"host-sys": "/sys/", "host-dev": "/dev/"}
    assert mounts["host-sys"]["mountPath"] == "/host/sys" and mounts["host-sys"]["readOnly"]
    assert mounts["host-dev"]["mountPath"] == "/dev"
    env = {e["name"]: e for e in main["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["MIG_STRATEGY"]["value"] == "none"
    from koord_framework.cli.main import build_parser

    args = build_parser().parse_args(main["args"])
    assert args.command == "device-daemon"
    assert args.node_name == "$(NODE_NAME)" and args.kubeconfig == "" and args.host_root == "/host"
    assert args.sleep_interval == "60s" and not args.oneshot
    # The probes reach the component runner's /healthz and /readyz (issue 24) on the port it serves.
    [port] = main["ports"]
    assert args.health_address == f"0.0.0.0:{port['containerPort']}" and port["name"] == "http"
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    # --host-root=/host with /sys mounted at /host/sys: HostPaths.under("/host").sys is that mount.
    from koord_framework.koordlet.hostpaths import HostPaths

    assert str(HostPaths.under(args.host_root).sys) == mounts["host-sys"]["mountPath"]


def test_rbac_lets_it_write_devices_and_label_nodes() -> None:
    objects = render()
    role = find(objects, "ClusterRole", "koord-device-daemon-role")
    rules = {
        (g, r): set(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert {"create", "update", "get"} <= rules[("scheduling.koordinator.sh", "devices")]
    assert {"get", "patch"} <= rules[("", "nodes")]
    binding = find(objects, "ClusterRoleBinding", "koord-device-daemon-rolebinding")
    assert binding["subjects"][0]["name"] == "koord-device-daemon"
    find(objects, "ServiceAccount", "koord-device-daemon")


def test_values_flow_through_and_it_can_be_turned_off() -> None:
    objects = render({"deviceDaemon": {"sleepInterval": "5m", "nodeSelector": {"gpu": "true"}}})
    ds = find(objects, "DaemonSet", "koord-device-daemon")
    assert ds["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "true"}
    assert "--sleep-interval=5m" in ds["spec"]["template"]["spec"]["containers"][0]["args"]
    off = render({"deviceDaemon": {"enabled": False}})
    assert not [o for o in off if "device-daemon" in o["metadata"]["name"]]
