"""The koordlet DaemonSet mounts exactly the host paths the koordlet uses under ``--host-root``, no more."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from koord_framework.koordlet.hostpaths import HostPaths

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "configs" / "helm" / "koord"


def _load(name: str) -> ModuleType:
    key = f"koord_deploy_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def koordlet(values: dict[str, Any] | None = None) -> dict[str, Any]:
    objects = [obj for _, obj in _load("helm_render").render_chart(CHART, values)]
    [daemonset] = [o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "koordlet"]
    assert isinstance(daemonset, dict)
    return daemonset


def _needed(host_root: str) -> dict[Path, bool]:
    """What the koordlet reads (False) or writes (True), as HostPaths lays the host out under the root."""
    paths = HostPaths.under(host_root)
    return {
        paths.proc: False,
        paths.cgroup: True,
        paths.resctrl: True,
        paths.sys_file("devices", "system"): False,  # CPU topology and NUMA nodes
        paths.kubelet_root: False,  # cpu_manager_state
    }


def test_mounts_are_the_host_paths_the_koordlet_uses_under_host_root() -> None:
    pod = koordlet()["spec"]["template"]["spec"]
    [main] = pod["containers"]
    host_root = next(a.split("=", 1)[1] for a in main["args"] if a.startswith("--host-root="))
    mounts = {Path(m["mountPath"]): m for m in main["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    needed = _needed(host_root)
    assert set(mounts) == set(needed), "a mount for every path the koordlet uses, and none other"
    for path, writes in needed.items():
        mount = mounts[path]
        assert mount.get("readOnly", False) is not writes, f"{path}: read-only unless the koordlet writes it"
        host = volumes[mount["name"]]["hostPath"]["path"]
        # The host path is the same path below /: /host/sys/fs/cgroup <- /sys/fs/cgroup.
        assert Path(host) == Path("/") / path.relative_to(host_root), f"{path} <- {host}"


def test_kubelet_dir_follows_values() -> None:
    values = {"koordlet": {"hostDirs": {"kubeletLibDir": "/data/kubelet/"}}}
    pod = koordlet(values)["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "host-kubelet-rootdir"]
    assert volume["hostPath"]["path"] == "/data/kubelet/"


def test_privileges_are_the_node_agents() -> None:
    pod = koordlet()["spec"]["template"]["spec"]
    [main] = pod["containers"]
    # Root for cgroup and resctrl files, privileged for the resctrl mount; host network for its port on
    # every node, host PID so that pids in cgroup tasks files are the ones it sees in /proc.
    assert main["securityContext"]["runAsUser"] == 0
    assert main["securityContext"]["privileged"] is True
    assert pod["hostNetwork"] is True and pod["hostPID"] is True
    assert pod["serviceAccountName"] == "koordlet"
