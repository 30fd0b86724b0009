"""koord runtime-proxy in front of a real containerd (Debian's 1.6, CRI plugin, runc, cgroup v1).

The test starts containerd on sockets, state and root under a temporary directory (its own config.toml,
cgroupfs driver, overlayfs or -- where the kernel will not mount it -- the native snapshotter), imports a
busybox image built here from Debian's static busybox (``busybox_image.py``) as both the sandbox image and
the container image, starts ``koord runtime-proxy`` in front of it and ``koord koordlet`` with the
project's five hook plugins (a NodeSLO with group identity on in its embedded cluster, the host's own ``/``
as its host root), which serves RuntimeHookService and registers itself in the proxy's hook config
directory. Then it acts as the kubelet over CRI through the proxy -- RunPodSandbox, CreateContainer,
StartContainer -- for an LS, an LSR (cpuset from ``resource-status``), a BE (batch resources) and a GPU
pod, and reads what the hooks set on the real cgroup v1 hierarchy and in the container's OCI spec. A
hook-server outage (the koordlet killed) is checked against both failure policies. Everything started is
stopped and removed, also when a test fails: containers and sandboxes through CRI, then the proxy's, the
koordlet's and containerd's process groups, leftover shims by pid, mounts, the cgroup dirs the test made,
and the directory.

Needs root, containerd, runc and busybox-static (``tests/e2e/setup.sh`` installs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from koord_framework.runtimeproxy.proto import api_pb2 as cri
from koord_framework.testing.probes import free_port, get
from tests.e2e.busybox_image import build as build_image

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "docker.io/koord-e2e/busybox:1"
CGROUP = Path("/sys/fs/cgroup")
RUNTIME = "runtime.v1.RuntimeService"
QOS_LABEL = "koordinator.sh/qosClass"
NODE = "e2e-node"
HOOKS = ["GroupIdentity", "BatchResource", "CPUSetAllocator", "GPUEnvInject", "CPUNormalization"]
GROUP_IDENTITY = {
    "policies": {"cpuPolicy": "groupIdentity"},
    "lsrClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
    "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
}
"""The NodeSLO's resourceQOSStrategy the koordlet runs with: group identity on (bvt 2 for LS)."""


def _wait(what: str, check: Any, timeout: float = 30.0) -> Any:
    end = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < end:
        try:
            last = check()
            if last:
                return last
        except Exception as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}: {last!r}")


def _kill_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


class CRI:
    """The kubelet's side: typed CRI calls on a socket."""

    def __init__(self, socket: str) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket}")

    def __call__(self, name: str, req: Any, resp_type: Any, timeout: float = 60.0) -> Any:
        fn = self.channel.unary_unary(
            f"/{RUNTIME}/{name}",
            request_serializer=type(req).SerializeToString,
            response_deserializer=resp_type.FromString,
        )
        return fn(req, timeout=timeout)


@dataclass
class Containerd:
    dir: Path
    proc: subprocess.Popen[bytes]
    snapshotter: str

    @property
    def socket(self) -> str:
        return str(self.dir / "containerd.sock")


def _config(d: Path, snapshotter: str) -> str:
    return f"""version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # Never ask for an oom_score_adj below containerd's own: this sandbox has no CAP_SYS_RESOURCE, and the
  # sandbox's -998 fails runc with "failed to update /proc/self/oom_score_adj: Permission denied".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "{snapshotter}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
"""


def _start_containerd(d: Path, snapshotter: str) -> subprocess.Popen[bytes]:
    (d / "config.toml").write_text(_config(d, snapshotter))
    log = (d / "containerd.log").open("ab")
    proc = subprocess.Popen(
        ["containerd", "--config", str(d / "config.toml")], stdout=log, stderr=log, start_new_session=True
    )
    cri_ = CRI(str(d / "containerd.sock"))
    try:
        _wait("containerd's CRI", lambda: cri_("Version", cri.VersionRequest(), cri.VersionResponse, 2.0))
    except AssertionError:
        _kill_group(proc)
        raise
    finally:
        cri_.channel.close()
    return proc


def _import(d: Path, snapshotter: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ctr", "-a", str(d / "containerd.sock"), "-n", "k8s.io", "images", "import",
         "--snapshotter", snapshotter, str(d / "image.tar")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _cleanup_runtime(d: Path) -> None:
    """Remove every sandbox (and so its containers and shims) containerd still has."""
    sock = d / "containerd.sock"
    if not sock.exists():
        return
    c = CRI(str(sock))
    try:
        pods = c("ListPodSandbox", cri.ListPodSandboxRequest(), cri.ListPodSandboxResponse, 10)
        for p in pods.items:
            with contextlib.suppress(grpc.RpcError):
                c(
                    "StopPodSandbox",
                    cri.StopPodSandboxRequest(pod_sandbox_id=p.id),
                    cri.StopPodSandboxResponse,
                )
            with contextlib.suppress(grpc.RpcError):
                c(
                    "RemovePodSandbox",
                    cri.RemovePodSandboxRequest(pod_sandbox_id=p.id),
                    cri.RemovePodSandboxResponse,
                )
    except grpc.RpcError:
        pass
    finally:
        c.channel.close()


def _kill_shims(d: Path) -> None:
    """Shims daemonize out of containerd's process group: find ours by the address in their command line."""
    needle = str(d / "containerd.sock").encode()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"containerd-shim" in cmdline and needle in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _unmount_under(d: Path) -> None:
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for m in sorted((m for m in mounts if m.startswith(str(d))), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)


def _dirs_below(root: Path) -> set[Path]:
    return {Path(dirpath) for dirpath, _d, _f in os.walk(root)} if root.is_dir() else set()


def _kubepods_dirs() -> set[Path]:
    """Every kubepods dir of every cgroup v1 subsystem (runc makes the pod's parents in all of them)."""
    out: set[Path] = set()
    for subsystem in CGROUP.iterdir():
        out |= _dirs_below(subsystem / "kubepods")
    return out


def _remove_new_dirs(before: set[Path], now: set[Path]) -> list[Path]:
    """rmdir what the test made, deepest first (a cgroup dir goes once its tasks are gone: retried)."""
    left = []
    for path in sorted(now - before, key=lambda p: len(p.parts), reverse=True):
        for _ in range(50):
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        else:
            left.append(path)
    return left


@pytest.fixture(scope="module")
def containerd() -> Iterator[Containerd]:
    if os.geteuid() != 0:
        pytest.fail("the runtime-proxy e2e needs root (containerd, cgroups)")
    missing = [b for b in ("containerd", "runc", "ctr") if shutil.which(b) is None]
    if missing or not Path("/bin/busybox").exists():
        pytest.fail(f"missing {missing or ['/bin/busybox']}: run `bash tests/e2e/setup.sh` (installs them)")
    if not (CGROUP / "cpu" / "cpu.shares").exists():
        pytest.fail("needs the cgroup v1 hierarchy at /sys/fs/cgroup (cpu, cpuset, memory)")
    cgroups_before = _kubepods_dirs()
    # containerd keeps shim sockets and fifos under /run/containerd whatever its config says.
    run_before = _dirs_below(Path("/run/containerd"))
    run_existed = Path("/run/containerd").exists()
    d = Path(tempfile.mkdtemp(prefix="koord-ctrd-", dir="/tmp"))
    (d / "cni" / "bin").mkdir(parents=True)
    (d / "cni" / "conf").mkdir(parents=True)
    build_image(d / "image.tar", IMAGE)
    proc: subprocess.Popen[bytes] | None = None
    try:
        snapshotter = "overlayfs"
        proc = _start_containerd(d, snapshotter)
        imported = _import(d, snapshotter)
        if imported.returncode != 0:  # no overlay mounts here: the native snapshotter copies instead
            _kill_group(proc)
            snapshotter = "native"
            proc = _start_containerd(d, snapshotter)
            imported = _import(d, snapshotter)
        assert imported.returncode == 0, f"ctr images import: {imported.stderr}"
        yield Containerd(d, proc, snapshotter)
    finally:
        _cleanup_runtime(d)
        if proc is not None:
            _kill_group(proc)
        _kill_shims(d)
        _unmount_under(d)
        shutil.rmtree(d, ignore_errors=True)
        left = _remove_new_dirs(cgroups_before, _kubepods_dirs())
        _remove_new_dirs(run_before, _dirs_below(Path("/run/containerd")))
        if not run_existed:
            with contextlib.suppress(OSError):
                Path("/run/containerd").rmdir()
        assert not left, f"cgroup dirs the test made could not be removed: {left}"


def _koordlet_files(d: Path) -> None:
    """The koordlet's configuration and its embedded cluster (the Node and its NodeSLO)."""
    (d / "cluster").mkdir()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}
    slo = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": NODE},
        "spec": {"resourceQOSStrategy": GROUP_IDENTITY},
    }
    (d / "cluster" / "node.yaml").write_text(yaml.safe_dump_all([node, slo]))
    config = {
        "apiVersion": "koordlet.koordinator.sh/v1alpha1",
        "kind": "KoordletConfiguration",
        "nodeName": NODE,
        # No QoS strategy: they would act on the real host's cgroups; only the hook server is under test.
        "qosStrategies": [],
        # Fixed: the kubepods dirs may not exist yet when the koordlet starts (detection says systemd).
        "cgroupDriver": "cgroupfs",
        "runtimeHooks": {"enabled": HOOKS},
    }
    (d / "koordlet.yaml").write_text(yaml.safe_dump(config))


@dataclass
class Koordlet:
    """``koord koordlet`` serving RuntimeHookService, in its own process group."""

    dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> str:
        return str(self.dir / "koordlet.sock")

    @property
    def registration(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.dir / "hookserver.d" / "koordlet.json").read_text())
        return data

    def start(self, policy: str) -> None:
        """(Re)start it registering ``policy`` as the proxy's failure policy; wait for /readyz (ready only
        while the hook server serves) and for the proxy to see the registration."""
        self.stop()
        port = free_port()
        with (self.dir / "koordlet.log").open("ab") as log:  # the child has its own copy of the fd
            self.proc = proc = subprocess.Popen(
                [sys.executable, "-m", "koord_framework.cli.main", "koordlet",
                 "--cluster", str(self.dir / "cluster"),
                 "--config", str(self.dir / "koordlet.yaml"),
                 # The real host: pod-level writes land on /sys/fs/cgroup, where the kubelet (the test) made
                 # the pod's dirs.
                 "--host-root", "/",
                 "--health-address", f"127.0.0.1:{port}",
                 "--runtime-hooks-addr", self.socket,
                 "--runtime-hooks-host-endpoint", self.socket,  # no container: the proxy sees the same path
                 "--runtime-hooks-config-path", str(self.dir / "hookserver.d"),
                 "--runtime-hooks-failure-policy", policy,
                 # Koordinator gates these two hooks off by default; a GPU node turns them on.
                 "--feature-gates", "GPUEnvInject=true,CPUNormalization=true"],
                stdout=log, stderr=log, start_new_session=True, cwd=ROOT,
            )  # fmt: skip
        _wait(
            "the koordlet's /readyz",
            lambda: proc.poll() is not None or get(port, "/readyz")[0] == 200,
            timeout=120,
        )
        assert proc.poll() is None, (self.dir / "koordlet.log").read_text()
        assert self.registration["remote-endpoint"] == self.socket
        assert self.registration["failure-policy"] == policy
        time.sleep(1.2)  # the proxy re-reads its hook config dir at most once a second

    def stop(self) -> None:
        """The outage: the koordlet's process group ends (its registration stays, as Koordinator's)."""
        if self.proc is not None:
            _kill_group(self.proc)
        assert not Path(self.socket).exists(), "the koordlet removes its socket on shutdown"


@dataclass
class Proxy:
    dir: Path
    proc: subprocess.Popen[bytes]
    koordlet: Koordlet
    kubelet: CRI
    sandboxes: list[str] = field(default_factory=list)

    def pod_dirs(self, parent: str) -> None:
        """What the kubelet does before RunPodSandbox: the pod's cgroup in every subsystem it writes."""
        for subsystem in ("cpu", "cpuacct", "memory", "cpuset"):
            path = CGROUP / subsystem
            for part in parent.strip("/").split("/"):
                path = path / part
                if not path.exists():
                    path.mkdir()  # removed by the containerd fixture with the dirs runc made
                    if subsystem == "cpuset":  # a new cpuset dir starts empty: inherit the parent's
                        for f in ("cpuset.cpus", "cpuset.mems"):
                            (path / f).write_text((path.parent / f).read_text().strip())


@pytest.fixture
def proxy(containerd: Containerd) -> Iterator[Proxy]:
    d = Path(tempfile.mkdtemp(prefix="koord-proxy-", dir="/tmp"))
    (d / "hookserver.d").mkdir()
    _koordlet_files(d)
    koordlet = Koordlet(d)
    log = (d / "proxy.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "koord_framework.cli.main", "runtime-proxy",
         "--koord-runtimeproxy-endpoint", str(d / "proxy.sock"),
         "--remote-runtime-service-endpoint", containerd.socket,
         "--hook-config-dir", str(d / "hookserver.d"),
         "--runtime-hook-timeout", "3s",
         "--health-address", "127.0.0.1:0"],
        stdout=log, stderr=log, start_new_session=True, cwd=ROOT,
    )  # fmt: skip
    kubelet = CRI(str(d / "proxy.sock"))
    p = Proxy(d, proc, koordlet, kubelet)
    try:
        _wait("the proxy's socket", lambda: (d / "proxy.sock").exists() or proc.poll() is not None)
        assert proc.poll() is None, (d / "proxy.log").read_text()
        _wait(
            "CRI through the proxy", lambda: kubelet("Version", cri.VersionRequest(), cri.VersionResponse, 2)
        )
        koordlet.start("Ignore")
        yield p
    finally:
        for sandbox in p.sandboxes:  # through the proxy: the post-stop hooks run too
            with contextlib.suppress(grpc.RpcError):
                kubelet(
                    "StopPodSandbox",
                    cri.StopPodSandboxRequest(pod_sandbox_id=sandbox),
                    cri.StopPodSandboxResponse,
                )
            with contextlib.suppress(grpc.RpcError):
                kubelet(
                    "RemovePodSandbox",
                    cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox),
                    cri.RemovePodSandboxResponse,
                )
        kubelet.channel.close()
        _kill_group(proc)
        if koordlet.proc is not None:
            _kill_group(koordlet.proc)
        if os.environ.get("KOORD_E2E_KEEP_LOGS"):
            for name in ("proxy.log", "koordlet.log"):
                with contextlib.suppress(OSError):
                    print((d / name).read_text(), file=sys.stderr)
        shutil.rmtree(d, ignore_errors=True)


@dataclass
class Pod:
    sandbox_id: str
    container_id: str
    parent: str


def run_pod(
    p: Proxy,
    name: str,
    qos_dir: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    resources: cri.LinuxContainerResources | None = None,
    start: bool = True,
) -> Pod:
    uid = str(uuid.uuid4())
    parent = f"/kubepods/{qos_dir}/pod{uid}".replace("//", "/")
    p.pod_dirs(parent)
    config = cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name=name, uid=uid, namespace="koord-e2e"),
        log_directory=str(p.dir / "logs" / uid),
        labels={"io.kubernetes.pod.name": name, **(labels or {})},
        annotations=annotations or {},
        linux=cri.LinuxPodSandboxConfig(
            cgroup_parent=parent,
            # host network: no CNI here. No hostname then: runc cannot set one without a UTS namespace.
            security_context=cri.LinuxSandboxSecurityContext(
                namespace_options=cri.NamespaceOption(network=cri.NODE)
            ),
        ),
    )
    sandbox_id = p.kubelet(
        "RunPodSandbox", cri.RunPodSandboxRequest(config=config), cri.RunPodSandboxResponse
    ).pod_sandbox_id
    p.sandboxes.append(sandbox_id)
    container = cri.ContainerConfig(
        metadata=cri.ContainerMetadata(name="main"),
        image=cri.ImageSpec(image=IMAGE),
        command=["/bin/sleep", "3600"],
        envs=[cri.KeyValue(key="POD_NAME", value=name)],
        log_path="main.log",
        linux=cri.LinuxContainerConfig(resources=resources or cri.LinuxContainerResources()),
    )
    created = p.kubelet(
        "CreateContainer",
        cri.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=container, sandbox_config=config),
        cri.CreateContainerResponse,
    )
    if start:
        p.kubelet(
            "StartContainer",
            cri.StartContainerRequest(container_id=created.container_id),
            cri.StartContainerResponse,
        )
    return Pod(sandbox_id, created.container_id, parent)


def cg(subsystem: str, parent: str, name: str, container_id: str = "") -> str:
    path = CGROUP / subsystem / parent.strip("/") / container_id / name
    return path.read_text().strip()


def spec_env(p: Proxy, container_id: str) -> dict[str, str]:
    """The env containerd put in the container's OCI spec (CRI ContainerStatus, verbose: crictl inspect)."""
    status = p.kubelet(
        "ContainerStatus",
        cri.ContainerStatusRequest(container_id=container_id, verbose=True),
        cri.ContainerStatusResponse,
    )
    info = json.loads(status.info["info"])
    return dict(kv.split("=", 1) for kv in info["runtimeSpec"]["process"]["env"])


def last_cpu() -> str:
    cpus = (CGROUP / "cpuset" / "cpuset.effective_cpus").read_text().strip()
    last = cpus.split(",")[-1]
    return last.split("-")[-1]


# --- the pods -----------------------------------------------------------------------------------------------
def test_ls_pod_keeps_what_the_kubelet_asked(proxy: Proxy) -> None:
    res = cri.LinuxContainerResources(
        cpu_period=100000, cpu_quota=50000, cpu_shares=512, memory_limit_in_bytes=64 << 20
    )
    pod = run_pod(proxy, "ls", "burstable", labels={QOS_LABEL: "LS"}, resources=res)
    assert cg("cpu", pod.parent, "cpu.shares", pod.container_id) == "512"
    assert cg("cpu", pod.parent, "cpu.cfs_quota_us", pod.container_id) == "50000"
    assert cg("memory", pod.parent, "memory.limit_in_bytes", pod.container_id) == str(64 << 20)
    assert spec_env(proxy, pod.container_id)["POD_NAME"] == "ls"


def test_lsr_pod_gets_the_cpuset_of_its_resource_status(proxy: Proxy) -> None:
    cpu = last_cpu()
    res = cri.LinuxContainerResources(
        cpu_period=100000, cpu_quota=100000, cpu_shares=1024, memory_limit_in_bytes=64 << 20
    )
    pod = run_pod(
        proxy,
        "lsr",
        "",
        labels={QOS_LABEL: "LSR"},
        annotations={"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": cpu})},
        resources=res,
    )
    assert cg("cpuset", pod.parent, "cpuset.cpus", pod.container_id) == cpu
    # CPUSetAllocator unsets the cfs quota of a pod bound to a cpuset (pod and container).
    assert cg("cpu", pod.parent, "cpu.cfs_quota_us", pod.container_id) == "-1"
    assert cg("cpu", pod.parent, "cpu.cfs_quota_us") == "-1"
    assert cg("cpu", pod.parent, "cpu.shares", pod.container_id) == "1024"


BE_SPEC = {
    "containers": {
        "main": {
            "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "64Mi"},
            "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "128Mi"},
        }
    }
}


def test_be_pod_gets_its_batch_resources(proxy: Proxy) -> None:
    pod = run_pod(
        proxy,
        "be",
        "besteffort",
        labels={QOS_LABEL: "BE"},
        annotations={"node.koordinator.sh/extended-resource-spec": json.dumps(BE_SPEC)},
        resources=cri.LinuxContainerResources(cpu_shares=2),
    )
    shares, quota, memory = str(500 * 1024 // 1000), str(1000 * 100), str(128 << 20)
    assert cg("cpu", pod.parent, "cpu.shares", pod.container_id) == shares
    assert cg("cpu", pod.parent, "cpu.cfs_quota_us", pod.container_id) == quota
    assert cg("memory", pod.parent, "memory.limit_in_bytes", pod.container_id) == memory
    # The pod level, written by the koordlet's hook server itself before the sandbox ran.
    assert cg("cpu", pod.parent, "cpu.shares") == shares
    assert cg("cpu", pod.parent, "cpu.cfs_quota_us") == quota
    assert cg("memory", pod.parent, "memory.limit_in_bytes") == memory


def test_gpu_pod_container_gets_nvidia_visible_devices(proxy: Proxy) -> None:
    allocated = {"gpu": [{"minor": 0, "resources": {}}, {"minor": 1, "resources": {}}]}
    pod = run_pod(
        proxy,
        "gpu",
        "besteffort",
        annotations={"scheduling.koordinator.sh/device-allocated": json.dumps(allocated)},
    )
    env = spec_env(proxy, pod.container_id)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "0,1"
    assert env["POD_NAME"] == "gpu"  # the kubelet's own env kept


def test_bvt_where_the_kernel_has_it(proxy: Proxy) -> None:
    if not (CGROUP / "cpu" / "cpu.bvt_warp_ns").exists():
        release = os.uname().release
        pytest.skip(f"kernel {release} has no cpu.bvt_warp_ns (group identity needs an Anolis kernel)")
    pod = run_pod(proxy, "ls-bvt", "burstable", labels={QOS_LABEL: "LS"})
    assert cg("cpu", pod.parent, "cpu.bvt_warp_ns") == "2"  # lsClass groupIdentity of the koordlet's NodeSLO


# --- outage ---------------------------------------------------------------------------------------------
def test_hook_server_down_with_fail_policy_refuses_the_pod(proxy: Proxy) -> None:
    proxy.koordlet.start("Fail")
    proxy.koordlet.stop()
    with pytest.raises(grpc.RpcError) as info:
        run_pod(proxy, "refused", "besteffort", labels={QOS_LABEL: "BE"})
    err: Any = info.value
    assert "koord-e2e/refused" in err.details() and "PreRunPodSandbox" in err.details()
    assert "UNAVAILABLE" in err.details()


def test_hook_server_down_with_ignore_policy_runs_the_pod_unhooked(proxy: Proxy) -> None:
    proxy.koordlet.stop()  # registered with Ignore by the fixture
    pod = run_pod(
        proxy,
        "unhooked",
        "besteffort",
        labels={QOS_LABEL: "BE"},
        annotations={"node.koordinator.sh/extended-resource-spec": json.dumps(BE_SPEC)},
        resources=cri.LinuxContainerResources(cpu_shares=2),
    )
    assert cg("cpu", pod.parent, "cpu.shares", pod.container_id) == "2"  # the kubelet's, not the batch 512


def test_skip_label_pod_runs_while_the_hook_server_is_down(proxy: Proxy) -> None:
    proxy.koordlet.start("Fail")
    proxy.koordlet.stop()
    pod = run_pod(
        proxy, "koordlet", "burstable", labels={"runtimeproxy.koordinator.sh/skip-hookserver": "true"}
    )
    assert pod.container_id
