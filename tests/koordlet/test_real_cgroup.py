"""The koordlet against the real kernel: a kubepods tree in a private cgroup v1 sub-hierarchy, busy processes
as an LS and a BE container, the agent's BECPUSuppress loop, and the BE container's measured CPU afterwards.

The tree lives in ``/sys/fs/cgroup/<subsystem>/koord-e2e-<uuid>``; the agent's cgroup root is a directory of
symlinks (``cpu -> /sys/fs/cgroup/cpu/koord-e2e-<uuid>``, ...), so it sees an ordinary cgroupfs-driver
kubepods tree. Everything created is removed in ``finally`` and again by the fixture's finalizer:
processes killed, stray tasks moved out, directories removed leaf first.

Skipped (with the reason) only when ``/sys/fs/cgroup/cpu`` is not a writable cgroup v1 hierarchy or the
test does not run as root.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from koord_framework.api.qos import KubeQoS
from koord_framework.cluster.clock import WallClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.koordlet.agent import AgentOptions, KoordletAgent
from koord_framework.koordlet.cgroups import CgroupDriver, CgroupLayout, CgroupVersion
from koord_framework.koordlet.executor import CgroupUpdate, ResourceExecutor, WriteStatus
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.qos import QOSStrategy
from koord_framework.registry import PluginRegistry

CGROUP = Path("/sys/fs/cgroup")
SUBSYSTEMS = ("cpu", "cpuacct", "cpuset", "memory")
NCPU = os.cpu_count() or 1


def _why_not_runnable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in SUBSYSTEMS:
        root = CGROUP / sub
        if not (root / "cgroup.procs").is_file() or (root / "cgroup.controllers").exists():
            return f"{root} is not a cgroup v1 hierarchy"
        if not os.access(root, os.W_OK):
            return f"{root} is not writable"
    probe = CGROUP / "cpu" / f"koord-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        return f"cannot create a cgroup under {CGROUP / 'cpu'}: {err.strerror}"
    return None


SKIP_REASON = _why_not_runnable()
pytestmark = [pytest.mark.cgroup, pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")]


@dataclass
class Sandbox:
    """A private sub-hierarchy per subsystem plus the symlink farm the agent uses as its cgroup root."""

    name: str = field(default_factory=lambda: f"koord-e2e-{uuid.uuid4().hex[:10]}")
    farm: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="koord-e2e-cg-")))
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def base(self, sub: str) -> Path:
        return CGROUP / sub / self.name

    def create(self) -> None:
        for sub in SUBSYSTEMS:
            base = self.base(sub)
            base.mkdir()
            (self.farm / sub).symlink_to(base)
        cpuset = self.base("cpuset")
        for f in ("cpuset.cpus", "cpuset.mems"):
            (cpuset / f).write_text((CGROUP / "cpuset" / f).read_text())
        # children inherit cpus and mems on creation, as under a kubelet-managed kubepods tree
        (cpuset / "cgroup.clone_children").write_text("1")
        # isolate the experiment from whatever else runs on the machine
        (self.base("cpu") / "cpu.shares").write_text("262144")

    def mkdir(self, rel: str) -> None:
        for sub in SUBSYSTEMS:
            (self.base(sub) / rel).mkdir(parents=True, exist_ok=True)

    def spawn_busy(self, rel: str, count: int) -> None:
        for _ in range(count):
            proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            self.procs.append(proc)
            for sub in SUBSYSTEMS:
                (self.base(sub) / rel / "cgroup.procs").write_text(str(proc.pid))

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        self.procs.clear()
        for sub in SUBSYSTEMS:
            base = self.base(sub)
            if not base.exists():
                continue
            dirs = sorted((Path(d) for d, _, _ in os.walk(base)), key=lambda p: len(p.parts), reverse=True)
            for d in dirs:  # move stray tasks to the hierarchy root, then remove leaf first
                with contextlib.suppress(OSError):
                    for pid in (d / "cgroup.procs").read_text().split():
                        with contextlib.suppress(OSError):
                            (CGROUP / sub / "cgroup.procs").write_text(pid)
                for attempt in range(50):
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError as err:
                        if err.errno != errno.EBUSY or attempt == 49:
                            raise
                        time.sleep(0.1)
        shutil.rmtree(self.farm, ignore_errors=True)

    def leftovers(self) -> list[str]:
        return [str(self.base(s)) for s in SUBSYSTEMS if self.base(s).exists()]


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox()
    try:
        box.create()
        yield box
    finally:
        box.cleanup()
    assert box.leftovers() == []


def _cpu_seconds(path: Path) -> float:
    return int(path.read_text()) / 1e9


def _pod(name: str, uid: str, cid: str, qos: str, resources: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": uid,
            "labels": {"koordinator.sh/qosClass": qos},
        },
        "spec": {
            "nodeName": "e2e-node",
            "containers": [{"name": "main", "image": "busy", "resources": resources}],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "main", "containerID": f"containerd://{cid}", "state": {"running": {}}}
            ],
        },
    }


def _expected_quota(decision: dict[str, Any], capacity_milli: int) -> tuple[int, int | None]:
    """Koordinator's formulas, written out independently of the plugin: BE may use
    capacity x 65% - LS used - max(node used - all pods, 0), floored at capacity x 10%; quota = that x 100
    (at least 2000), skipped when it moves less than 1% of the node, rising at most 10% of it from a set
    quota."""
    used = decision["podUsedCores"]
    node_used = decision["nodeUsedCores"]
    ls_used = used.get("uid-ls", 0.0)
    system = max(node_used - sum(used.values()), 0.0)
    suppress = capacity_milli * 65 // 100 - int(ls_used * 1000) - int(system * 1000)
    suppress = max(suppress, capacity_milli * 10 // 100)
    new = max(suppress * 100, 2000)
    cur = decision["currentQuota"]
    cores = -(-capacity_milli // 1000)
    if abs(new - cur) < cores * 100000 * 0.01 and new != 2000:
        return suppress, None
    if new - cur > cores * 100000 * 0.1 and cur != -1:
        new = cur + int(cores * 100000 * 0.1)
    return suppress, new


def test_be_quota_follows_the_formula_and_be_cpu_falls_to_it(sandbox: Sandbox) -> None:
    box = sandbox
    ls_dir, be_dir = "kubepods/burstable/poduid-ls/ls-main", "kubepods/besteffort/poduid-be/be-main"
    box.mkdir(ls_dir)
    box.mkdir(be_dir)
    capacity_milli = NCPU * 1000
    cluster = MemoryCluster(WallClock())
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "e2e-node"},
            "status": {
                "capacity": {"cpu": str(NCPU), "memory": "8Gi"},
                "allocatable": {"cpu": str(NCPU), "memory": "8Gi"},
            },
        }
    )
    cluster.create(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeSLO",
            "metadata": {"name": "e2e-node"},
            "spec": {
                "resourceUsedThresholdWithBE": {
                    "enable": True,
                    "cpuSuppressPolicy": "cfsQuota",
                    "cpuSuppressThresholdPercent": 65,
                    "cpuSuppressMinPercent": 10,
                }
            },
        }
    )
    cluster.create(
        _pod("ls", "uid-ls", "ls-main", "LS", {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}})
    )
    cluster.create(_pod("be", "uid-be", "be-main", "BE", {"requests": {"kubernetes.io/batch-cpu": "1000"}}))
    host = HostPaths(proc=Path("/proc"), cgroup=box.farm, sys=Path("/sys"), resctrl=Path("/sys/fs/resctrl"))
    layout = CgroupLayout.detect(host)
    assert (layout.version, layout.driver) == (CgroupVersion.V1, CgroupDriver.CGROUPFS)
    suppress_cls = PluginRegistry.discover("qos").get("BECPUSuppress")
    assert issubclass(suppress_cls, QOSStrategy)
    agent = KoordletAgent(
        "e2e-node",
        cluster,
        host=host,
        options=AgentOptions(report_node_metric=False),
        strategies=[suppress_cls],
        clock=WallClock(),
    )
    be_qos = layout.qos_dir(KubeQoS.BEST_EFFORT)
    assert be_qos == "kubepods/besteffort"
    quota_file = box.base("cpu") / be_qos / "cpu.cfs_quota_us"
    be_usage = box.base("cpuacct") / be_qos / "cpuacct.usage"
    assert quota_file.read_text().strip() == "-1"
    try:
        box.spawn_busy(ls_dir, 1)
        box.spawn_busy(be_dir, NCPU)  # BE wants every CPU: far more than it may get
        stop = threading.Event()
        runner = threading.Thread(target=agent.run, args=(stop,), kwargs={"duration": 4.5})
        runner.start()
        runner.join(timeout=20)
        stop.set()
        assert not runner.is_alive()

        decisions = [d.details for d in agent.context.journal if "targetQuota" in d.details]
        assert decisions, [d.summary for d in agent.context.journal]
        last_target = None
        for details in decisions:
            suppress, target = _expected_quota(details, capacity_milli)
            assert details["suppressMilli"] == suppress
            assert details["targetQuota"] == target
            if target is not None:
                last_target = target
        assert last_target is not None
        quota = int(quota_file.read_text())
        assert quota == last_target
        assert quota >= capacity_milli * 10 // 100 * 100  # the configured floor
        agent_quota_path = str(layout.file_path("cpu.cfs_quota_us", be_qos))  # through the symlink farm
        writes = [r for r in agent.executor.audit if r.path == agent_quota_path]
        assert writes and all(r.status is WriteStatus.WRITTEN for r in writes)

        # With the quota fixed, BE's measured CPU falls to quota / period (within 10 %). The quota is a
        # ceiling the kernel enforces in every window; reaching it needs idle CPU, which a loaded 2-core
        # machine does not always have, so up to four 2-second windows are measured and one must land
        # within 10 % of the target, while none may exceed it by more than 10 %.
        time.sleep(0.5)
        target_cores = quota / 100000
        windows: list[float] = []
        for _ in range(4):
            t0, u0 = time.monotonic(), _cpu_seconds(be_usage)
            time.sleep(2.0)
            t1, u1 = time.monotonic(), _cpu_seconds(be_usage)
            windows.append((u1 - u0) / (t1 - t0))
            assert windows[-1] <= 1.1 * target_cores, (windows, target_cores)
            if abs(windows[-1] - target_cores) <= 0.1 * target_cores:
                break
        assert abs(windows[-1] - target_cores) <= 0.1 * target_cores, (windows, target_cores)
    finally:
        agent.stop()
        box.cleanup()
    assert box.leftovers() == []


def test_executor_orders_cpuset_shrink_for_the_kernel(sandbox: Sandbox) -> None:
    """The kernel refuses to shrink a parent cpuset below a child's (EBUSY): a naive top-down batch fails and
    is rolled back; the leveled update writes bottom-up and succeeds. Bad values never reach the kernel."""
    if NCPU < 2:
        pytest.skip("needs two CPUs to shrink a cpuset")
    box = sandbox
    box.mkdir("kubepods/besteffort/podx")
    host = HostPaths(proc=Path("/proc"), cgroup=box.farm, sys=Path("/sys"), resctrl=Path("/sys/fs/resctrl"))
    layout = CgroupLayout.detect(host)
    executor = ResourceExecutor(layout, node_cpus=range(NCPU))
    parent, child = "kubepods/besteffort", "kubepods/besteffort/podx"
    cpus = (box.base("cpuset") / parent / "cpuset.cpus").read_text().strip()

    naive = executor.transaction(
        [CgroupUpdate("cpuset.cpus", parent, "0"), CgroupUpdate("cpuset.cpus", child, "0")]
    )
    assert naive[0].status is WriteStatus.FAILED
    assert "busy" in (naive[0].error or "").lower()
    assert (box.base("cpuset") / parent / "cpuset.cpus").read_text().strip() == cpus

    results = executor.leveled_update(
        [[CgroupUpdate("cpuset.cpus", parent, "0")], [CgroupUpdate("cpuset.cpus", child, "0")]]
    )
    assert all(r.ok for r in results)
    assert (box.base("cpuset") / child / "cpuset.cpus").read_text().strip() == "0"
    assert (box.base("cpuset") / parent / "cpuset.cpus").read_text().strip() == "0"

    # growing again: parent first (pass 1 loosens top-down), then the child
    grow = executor.leveled_update(
        [[CgroupUpdate("cpuset.cpus", parent, cpus)], [CgroupUpdate("cpuset.cpus", child, cpus)]]
    )
    assert all(r.ok for r in grow)
    assert (box.base("cpuset") / child / "cpuset.cpus").read_text().strip() == cpus

    refused = executor.update(CgroupUpdate("cpu.cfs_quota_us", parent, "500"))
    assert refused.status is WriteStatus.INVALID
    assert (box.base("cpu") / parent / "cpu.cfs_quota_us").read_text().strip() == "-1"
    outside = executor.update(CgroupUpdate("cpuset.cpus", child, f"0-{NCPU}"))
    assert outside.status is WriteStatus.INVALID
