"""The container image (`make image`), run with podman: the CLI, a simulation, and `koord scheduler` binding a
pod on the real kube-apiserver; and the chart's image, commands, args and mounts checked against the image.

The image is built once per session by tools/image/build.sh (cached by a hash of its inputs, so a run with
an unchanged checkout only re-tags it). podman's runtime and rlimit flags come from tools/image/engine.sh,
which knows what this kind of host needs (see docs/image.md, "Running it in a sandbox").
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from koord_framework.cluster.kube import KubeCluster
from koord_framework.testing import make_node, make_pod

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "configs" / "helm" / "koord"
EXAMPLE_CLUSTER = ROOT / "configs" / "examples" / "cluster"
# The image's user for every component but the koordlet (the chart runs that one as root).
NONROOT = "65532"


def _load_renderer() -> ModuleType:
    key = "koord_deploy_helm_render"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, ROOT / "tests" / "deploy" / "helm_render.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


class Podman:
    """podman with this host's flags (tools/image/engine.sh), running one image."""

    def __init__(self, image: str) -> None:
        self.image = image
        out = subprocess.run(
            ["bash", str(ROOT / "tools" / "image" / "engine.sh")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        self.global_flags = [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("global ")]
        self.run_flags = [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("run ")]

    def command(self, *args: str) -> list[str]:
        return ["podman", *self.global_flags, *args]

    def run(
        self, *args: str, options: tuple[str, ...] = (), timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``podman run --rm [options] IMAGE args`` (args go to the entrypoint, ``koord``)."""
        return subprocess.run(
            self.command("run", "--rm", *self.run_flags, *options, self.image, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def shell(self, script: str, *, user: str | None = None) -> subprocess.CompletedProcess[str]:
        options = ("--entrypoint", "/bin/sh") + (("--user", user) if user else ())
        return self.run("-c", script, options=options)

    def inspect(self) -> dict[str, Any]:
        out = subprocess.run(
            self.command("image", "inspect", self.image), capture_output=True, text=True, check=True
        ).stdout
        data: dict[str, Any] = json.loads(out)[0]
        return data


def _fail(what: str, done: subprocess.CompletedProcess[str]) -> str:
    command = shlex.join(done.args)
    return f"{what}: exit {done.returncode}\n{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``make image`` (cached); the chart's default reference to it, ``koord:<version>``."""
    log = tmp_path_factory.mktemp("image") / "build.log"
    with open(log, "w") as out:
        done = subprocess.run(
            ["bash", str(ROOT / "tools" / "image" / "build.sh")], stdout=out, stderr=subprocess.STDOUT
        )
    text = log.read_text()
    assert done.returncode == 0, f"tools/image/build.sh failed:\n{text[-5000:]}"
    [line] = [ln for ln in text.splitlines() if ln.startswith("image: ")]
    return line.split()[1]


@pytest.fixture(scope="session")
def podman(image: str) -> Podman:
    engine = Podman(image)
    probe = engine.run("--version")
    assert probe.returncode == 0, _fail("podman cannot run the image on this host", probe)
    return engine


def _host_koord(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "koord_framework.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def _rendered() -> list[dict[str, Any]]:
    return [obj for _, obj in _load_renderer().render_chart(CHART)]


def _workloads() -> list[dict[str, Any]]:
    return [o for o in _rendered() if o["kind"] in ("Deployment", "DaemonSet")]


# --- the image itself --------------------------------------------------------------------------------
def test_version_is_the_checkout_s(podman: Podman) -> None:
    done = podman.run("--version")
    assert done.returncode == 0, _fail("koord --version", done)
    host = _host_koord("--version")
    assert done.stdout.strip() == host.stdout.strip() != ""


def test_plugins_list_matches_the_checkout(podman: Podman) -> None:
    done = podman.run("plugins", "list", "--json")
    assert done.returncode == 0, _fail("koord plugins list --json", done)
    inside = json.loads(done.stdout)
    host = json.loads(_host_koord("plugins", "list", "--json").stdout)
    assert inside == host, "the image holds exactly the plugins of this checkout"
    assert inside, "and there are some"


def test_runs_as_nonroot_on_bookworm_python_3_11_without_a_compiler(podman: Podman) -> None:
    config = podman.inspect()["Config"]
    assert config["User"] == f"{NONROOT}:{NONROOT}"
    assert config["Entrypoint"] == ["koord"]
    done = podman.shell(
        "id -u; python3 -c 'import sys; print(sys.version_info[:2])';"
        " . /etc/os-release; echo $VERSION_CODENAME; command -v koord;"
        " for t in gcc cc c++ ld as make pip pip3; do command -v $t; done; true"
    )
    assert done.returncode == 0, _fail("inspecting the image", done)
    lines = done.stdout.split()
    assert lines[:3] == [NONROOT, "(3,", "11)"], done.stdout
    assert lines[3] == "bookworm"
    assert lines[4] == "/opt/koord/bin/koord"
    assert lines[5:] == [], f"build tools left in the image: {lines[5:]}"


def test_koord_native_is_compiled_into_the_image(podman: Podman) -> None:
    if importlib.util.find_spec("koord_native") is None:
        pytest.skip("koord-native was not built on this machine either (no C compiler)")
    done = podman.shell("python3 -c 'import koord_native._rdt as m; print(m.__file__)'")
    assert done.returncode == 0, _fail("import koord_native._rdt", done)
    # The cffi extension was compiled in the builder stage: the image has the shared object, no compiler.
    path = done.stdout.strip()
    assert path.startswith("/opt/koord/lib/python3.11/site-packages/koord_native/_rdt"), path
    assert path.endswith(".so"), path


def _untimed(text: str) -> str:
    return re.sub(r" in [0-9.]+ s \([0-9.]+ pods/s\)", "", text)


def test_simulate_the_example_cluster_as_on_the_host(podman: Podman) -> None:
    args = ("simulate", "--seed", "1", "--now", "2024-01-01T00:00:00Z")
    # The profile the checkout's `make demo` uses (Koordinator's shipped ConfigMap), mounted like the cluster.
    profile = ROOT / "configs" / "scheduler"
    done = podman.run(
        *args,
        "--cluster=/cluster",
        "--config=/profile/koord-scheduler.yaml",
        options=(
            *("--volume", f"{EXAMPLE_CLUSTER}:/cluster:ro", "--volume", f"{profile}:/profile:ro"),
            *("--env", "PYTHONHASHSEED=0"),
        ),
    )
    # One hash seed for both: the quota table lists a quota's resources in set order.
    host = _host_koord(
        *args,
        f"--cluster={EXAMPLE_CLUSTER}",
        f"--config={profile / 'koord-scheduler.yaml'}",
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    # The example cluster leaves pods unscheduled by design: exit 1 says so (see `make demo`).
    assert host.returncode in (0, 1), host.stderr
    assert done.returncode == host.returncode, _fail("koord simulate", done)
    # The same placements and reasons; only the summary's wall time differs.
    assert _untimed(done.stdout) == _untimed(host.stdout)
    assert "Scheduled" in done.stdout


# --- the chart against the image ---------------------------------------------------------------------
def test_chart_image_reference_is_the_built_image(image: str) -> None:
    version = image.rsplit(":", 1)[1]
    for workload in _workloads():
        for c in workload["spec"]["template"]["spec"]["containers"]:
            # koord:<version> is what `make image` tags (podman resolves the short name to localhost/).
            assert c["image"] == f"koord:{version}", f"{workload['metadata']['name']}/{c['name']}"


def test_chart_commands_and_args_are_what_the_image_runs(podman: Podman) -> None:
    components = set()
    for workload in _workloads():
        for c in workload["spec"]["template"]["spec"]["containers"]:
            where = f"{workload['metadata']['name']}/{c['name']}"
            command = c.get("command") or podman.inspect()["Config"]["Entrypoint"]
            assert command == ["koord"], where
            components.add(c["args"][0])
    assert {"scheduler", "descheduler", "koordlet"} <= components
    # Each component the chart starts is a subcommand of the image's koord, with every flag the chart gives.
    for workload in _workloads():
        for c in workload["spec"]["template"]["spec"]["containers"]:
            done = podman.run(c["args"][0], "--help")
            assert done.returncode == 0, _fail(f"koord {c['args'][0]} --help", done)
            for arg in c["args"][1:]:
                flag = arg.split("=", 1)[0]
                if flag.startswith("--"):
                    assert flag in done.stdout, f"{workload['metadata']['name']}: {flag} unknown to the image"


def test_chart_mounts_fit_the_image(podman: Podman) -> None:
    # Nothing the chart mounts may hide a part of the image, and files the args name lie under a mount.
    listing = podman.shell("ls -d /opt/koord /usr/lib/python3.11 /usr/bin/python3; ls /").stdout.split()
    image_paths = {"/opt/koord", "/usr/lib/python3.11", "/usr/bin/python3"}
    assert image_paths <= set(listing)
    for workload in _workloads():
        pod = workload["spec"]["template"]["spec"]
        for c in pod["containers"]:
            where = f"{workload['metadata']['name']}/{c['name']}"
            mounts = [m["mountPath"].rstrip("/") or "/" for m in c.get("volumeMounts") or ()]
            for path in mounts:
                for kept in image_paths | {"/usr", "/usr/bin", "/usr/lib", "/opt", "/bin", "/lib"}:
                    assert not kept.startswith(path + "/") and kept != path, f"{where}: {path} hides {kept}"
            for arg in c["args"]:
                value = arg.split("=", 1)[1] if "=" in arg else ""
                if value.startswith("/") and not value.startswith("/host"):
                    assert any(value == m or value.startswith(m + "/") for m in mounts), (
                        f"{where}: {arg} names a file no volume provides"
                    )
            security = c.get("securityContext") or {}
            if workload["kind"] == "DaemonSet":
                # The node agents (koordlet: cgroups, resctrl; device daemon: devices) run the image as root.
                assert security.get("runAsUser") == 0, where
                host_root = next(a.split("=", 1)[1] for a in c["args"] if a.startswith("--host-root="))
                assert any(m.startswith(host_root + "/") for m in mounts)
            else:
                assert security.get("runAsUser") in (None, int(NONROOT)), where
                assert not security.get("privileged"), where


# --- the scheduler from the image, on the real API server --------------------------------------------
@pytest.fixture
def scheduler_container(podman: Podman) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        subprocess.run(podman.command("rm", "-f", "-t", "5", name), capture_output=True, check=False)


def test_scheduler_from_the_image_binds_a_pod(
    podman: Podman,
    scheduler_container: list[str],
    kube: KubeCluster,
    namespace: str,
    koordinator_system: str,
    koord_crds: list[str],
    kube_apiserver: Any,
    e2e_harness: Any,
    tmp_path: Path,
) -> None:
    objects = _rendered()
    [deployment] = [
        o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "koord-scheduler"
    ]
    [main] = deployment["spec"]["template"]["spec"]["containers"]
    [config_map] = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "koord-scheduler-config"
    ]
    # The chart's ConfigMap as the chart's volume lays it out (items: key -> path), with a Lease of its own.
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"]
    [mount] = [m for m in main["volumeMounts"] if m["name"] == "config"]
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    lease = f"image-{namespace}"
    for item in volume["configMap"]["items"]:
        config = yaml.safe_load(config_map["data"][item["key"]])
        config["leaderElection"]["resourceName"] = lease
        (config_dir / item["path"]).write_text(yaml.safe_dump(config))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(Path(kube_apiserver.kubeconfig).read_text())
    for path in (config_dir, *config_dir.iterdir(), kubeconfig):
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the image's user

    port = e2e_harness.free_port()
    args = [a if not a.startswith("--address=") else f"--address=127.0.0.1:{port}" for a in main["args"]]
    args.append("--kubeconfig=/etc/koord/kubeconfig")
    name = f"koord-e2e-scheduler-{uuid.uuid4().hex[:8]}"
    scheduler_container.append(name)
    # The session's API server holds other tests' nodes too: the pod may only go to this test's node.
    kube.create(make_node(f"{namespace}-n", cpu="4", memory="8Gi", labels={"e2e-image": namespace}))
    pod = make_pod("from-image", namespace, cpu="100m", memory="64Mi", scheduler_name="koord-scheduler")
    pod["spec"]["nodeSelector"] = {"e2e-image": namespace}
    kube.create(pod)
    started = subprocess.run(
        podman.command(
            "run",
            "-d",
            "--name",
            name,
            *podman.run_flags,
            "--network=host",
            "--env",
            f"POD_NAME={name}",
            "--env",
            f"POD_NAMESPACE={koordinator_system}",
            "--volume",
            f"{config_dir}:{mount['mountPath']}:ro",
            "--volume",
            f"{kubeconfig}:/etc/koord/kubeconfig:ro",
            podman.image,
            *args,
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    assert started.returncode == 0, _fail("podman run koord scheduler", started)

    def logs() -> str:
        out = subprocess.run(podman.command("logs", name), capture_output=True, text=True, check=False)
        return (out.stdout + out.stderr)[-4000:]

    deadline = time.monotonic() + 90
    node_name = ""
    while time.monotonic() < deadline and not node_name:
        node_name = kube.get("Pod", "from-image", namespace)["spec"].get("nodeName") or ""
        state = subprocess.run(
            podman.command("inspect", "--format", "{{.State.Running}}", name),
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        assert state == "true" or node_name, f"the scheduler container stopped:\n{logs()}"
        time.sleep(0.5)
    assert node_name, f"the pod was not bound in 90 s:\n{logs()}"
    assert node_name == f"{namespace}-n", f"the pod was bound to {node_name}, not the test's node:\n{logs()}"
    # The container ran as the image's user, and served its probes on the chart's port name.
    user = subprocess.run(
        podman.command("exec", name, "id", "-u"), capture_output=True, text=True, check=False
    ).stdout.strip()
    assert user == NONROOT
