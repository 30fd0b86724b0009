"""A fake host for koordlet tests: procfs, sysfs CPU topology, a cgroup v1 or v2 kubepods tree (systemd or
cgroupfs naming) and resctrl, all as plain files under one directory.

Plugin authors get it through the ``koord_host_tree`` pytest fixture (a factory) or build it directly::

    tree = FakeHostTree(tmp_path, version=1, driver="systemd", cpus=8)
    pod = tree.add_pod(manifest)            # pod and container dirs from status.containerStatuses
    tree.add_cpu_usage(pod.cgroup_dir, seconds=0.5)
    tree.write("cpu.cfs_quota_us", tree.layout.qos_dir(KubeQoS.BEST_EFFORT), "-1")
    agent = KoordletAgent("node-1", cluster, host=tree.paths, clock=clock)

Files hold what the kernel would show, with the same names and formats on each version (``cpu.max``,
``cpu.stat usage_usec``, ``memory.stat`` v1 ``total_*`` keys or v2 names), so the code under test cannot
tell it from a host. Counters only move when the test moves them, which makes CPU rates exact.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from koord_framework.api.qos import KubeQoS, kube_qos
from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.port import ClusterPort
from koord_framework.koordlet.cgroups import (
    CgroupDriver,
    CgroupLayout,
    CgroupVersion,
    parse_kv,
    resource,
)
from koord_framework.koordlet.cpuset import format_cpuset
from koord_framework.koordlet.eviction import Evictor
from koord_framework.koordlet.executor import ResourceExecutor
from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.metrics.cache import MetricCache
from koord_framework.koordlet.metrics.collector import NODE_CPU_INFO_KEY
from koord_framework.koordlet.qos import QOSContext
from koord_framework.koordlet.states import NodeState, build_state
from koord_framework.koordlet.system import NodeCPUInfo, ProcessorInfo, read_node_cpu_info
from koord_framework.testing.resctrl import FakeResctrl

__all__ = ["FakeHostTree", "FakePod", "Processor", "QOSHarness", "make_running_pod"]

_V1_MEMORY_STAT_KEYS = (
    "cache",
    "rss",
    "inactive_file",
    "active_file",
    "inactive_anon",
    "active_anon",
    "unevictable",
)
_V2_MEMORY_STAT_KEYS = (
    "file",
    "anon",
    "inactive_file",
    "active_file",
    "inactive_anon",
    "active_anon",
    "unevictable",
)
_UNLIMITED_V1_MEMORY = "9223372036854771712"


@dataclass(frozen=True, slots=True)
class Processor:
    """One logical CPU of the fake host (``core`` is per socket, as sysfs reports it)."""

    cpu: int
    core: int
    socket: int = 0
    node: int = 0


@dataclass(frozen=True, slots=True)
class FakePod:
    uid: str
    qos: KubeQoS
    cgroup_dir: str
    containers: Mapping[str, str]
    """Container name -> cgroup parent dir."""


def _topology(cpus: int, sockets: int, threads_per_core: int) -> list[Processor]:
    per_socket = max(cpus // sockets, 1)
    out = []
    for cpu in range(cpus):
        socket = min(cpu // per_socket, sockets - 1)
        local = cpu - socket * per_socket
        out.append(Processor(cpu=cpu, core=local // threads_per_core, socket=socket, node=socket))
    return out


class FakeHostTree:
    """Builder and editor of the fake host under ``root``."""

    def __init__(
        self,
        root: str | Path,
        *,
        version: int | CgroupVersion = 1,
        driver: str | CgroupDriver = "systemd",
        cpus: int | Sequence[Processor] = 8,
        sockets: int = 1,
        threads_per_core: int = 2,
        memory_bytes: int = 64 * 1024**3,
        vendor: str = "GenuineIntel",
        cpu_flags: Iterable[str] = ("fpu", "vme", "sse", "sse2"),
        cpu_burst: bool = True,
    ) -> None:
        self.root = Path(root)
        self.paths = HostPaths.under(self.root)
        self.version = CgroupVersion(int(version))
        self.driver = CgroupDriver(str(driver))
        self.layout = CgroupLayout(self.paths, self.version, self.driver)
        self.processors: list[Processor] = (
            _topology(cpus, sockets, threads_per_core) if isinstance(cpus, int) else list(cpus)
        )
        self.cpu_burst = cpu_burst
        self._busy_ticks = 0
        self._idle_ticks = 0
        self.memory_total = memory_bytes
        self.live_threads: set[int] = set()
        self.resctrl: FakeResctrl | None = None
        self._write_proc(vendor, cpu_flags)
        self.set_meminfo(total=memory_bytes, available=memory_bytes)
        self._write_sys()
        self._init_cgroup_root()
        for qos in (KubeQoS.GUARANTEED, KubeQoS.BURSTABLE, KubeQoS.BEST_EFFORT):
            self.ensure_cgroup(self.layout.qos_dir(qos))

    # --- procfs / sysfs ----------------------------------------------------------------------------------
    @property
    def all_cpus(self) -> str:
        return format_cpuset(p.cpu for p in self.processors)

    def _write_proc(self, vendor: str, flags: Iterable[str]) -> None:
        self.paths.proc.mkdir(parents=True, exist_ok=True)
        self.set_cpuinfo(vendor=vendor, flags=flags)
        self.set_cmdline("BOOT_IMAGE=/boot/vmlinuz root=/dev/vda1")
        self._write_stat()

    def set_cpuinfo(self, *, vendor: str = "GenuineIntel", flags: Iterable[str] = ()) -> None:
        """Write ``/proc/cpuinfo`` with one block per processor (``flags\\t\\t: a b c``)."""
        flag_line = " ".join(flags)
        blocks = []
        for p in self.processors:
            blocks.append(
                f"processor\t: {p.cpu}\nvendor_id\t: {vendor}\nphysical id\t: {p.socket}\n"
                f"core id\t\t: {p.core}\nflags\t\t: {flag_line}\n"
            )
        (self.paths.proc / "cpuinfo").write_text("\n".join(blocks))

    def set_raw_cpuinfo(self, content: str) -> None:
        (self.paths.proc / "cpuinfo").write_text(content)

    def set_cmdline(self, content: str) -> None:
        (self.paths.proc / "cmdline").write_text(content + "\n")

    def _write_stat(self) -> None:
        n = max(len(self.processors), 1)
        lines = [f"cpu  {self._busy_ticks} 0 0 {self._idle_ticks} 0 0 0 0 0 0"]
        for p in self.processors:
            lines.append(f"cpu{p.cpu} {self._busy_ticks // n} 0 0 {self._idle_ticks // n} 0 0 0 0 0 0")
        lines += ["intr 0", "ctxt 0", "btime 0", "processes 1"]
        (self.paths.proc / "stat").write_text("\n".join(lines) + "\n")

    def add_node_cpu(self, *, seconds: float, wall_seconds: float | None = None) -> None:
        """Let the node spend ``seconds`` of CPU time (user ticks); idle fills the rest of the wall time."""
        busy = round(seconds * 100)
        self._busy_ticks += busy
        if wall_seconds is not None:
            self._idle_ticks += max(round(wall_seconds * 100 * len(self.processors)) - busy, 0)
        self._write_stat()

    def set_meminfo(self, *, total: int, available: int, free: int | None = None) -> None:
        kb = 1024
        free_kb = (free if free is not None else available) // kb
        content = (
            f"MemTotal:       {total // kb} kB\nMemFree:        {free_kb} kB\n"
            f"MemAvailable:   {available // kb} kB\nBuffers:        0 kB\nCached:         0 kB\n"
        )
        (self.paths.proc / "meminfo").write_text(content)

    def set_node_memory_used(self, used: int) -> None:
        self.set_meminfo(total=self.memory_total, available=self.memory_total - used)

    def _write_sys(self) -> None:
        cpu_root = self.paths.sys / "devices" / "system" / "cpu"
        cpu_root.mkdir(parents=True, exist_ok=True)
        (cpu_root / "online").write_text(self.all_cpus + "\n")
        nodes: dict[int, list[int]] = {}
        for p in self.processors:
            topo = cpu_root / f"cpu{p.cpu}" / "topology"
            topo.mkdir(parents=True, exist_ok=True)
            (topo / "core_id").write_text(f"{p.core}\n")
            (topo / "physical_package_id").write_text(f"{p.socket}\n")
            nodes.setdefault(p.node, []).append(p.cpu)
        node_root = self.paths.sys / "devices" / "system" / "node"
        for node, cpus in nodes.items():
            d = node_root / f"node{node}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "cpulist").write_text(format_cpuset(cpus) + "\n")
            # The kernel's per-node meminfo; memory split evenly over the NUMA nodes.
            kb = self.memory_total // 1024 // max(len({p.node for p in self.processors}), 1)
            (d / "meminfo").write_text(
                f"Node {node} MemTotal:       {kb} kB\nNode {node} MemFree:        {kb} kB\n"
            )

    # --- cgroups -----------------------------------------------------------------------------------------
    def _init_cgroup_root(self) -> None:
        if self.version is CgroupVersion.V2:
            self.paths.cgroup.mkdir(parents=True, exist_ok=True)
            (self.paths.cgroup / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
        self.ensure_cgroup("")

    def _defaults(self, subsystem: str) -> dict[str, str]:
        if self.version is CgroupVersion.V1:
            table = {
                "cpu": {
                    "cpu.shares": "1024",
                    "cpu.cfs_quota_us": "-1",
                    "cpu.cfs_period_us": "100000",
                    "cpu.stat": "nr_periods 0\nnr_throttled 0\nthrottled_time 0",
                    "tasks": "",
                    "cgroup.procs": "",
                },
                "cpuacct": {"cpuacct.usage": "0", "tasks": "", "cgroup.procs": ""},
                "cpuset": {"cpuset.cpus": self.all_cpus, "cpuset.mems": "0", "tasks": "", "cgroup.procs": ""},
                "memory": {
                    "memory.limit_in_bytes": _UNLIMITED_V1_MEMORY,
                    "memory.usage_in_bytes": "0",
                    "memory.stat": "\n".join(f"total_{k} 0" for k in _V1_MEMORY_STAT_KEYS),
                    "tasks": "",
                    "cgroup.procs": "",
                },
            }
            files = dict(table.get(subsystem, {}))
            if subsystem == "cpu" and self.cpu_burst:
                files["cpu.cfs_burst_us"] = "0"
            return files
        files = {
            "cpu.max": "max 100000",
            "cpu.weight": "100",
            "cpu.stat": "\n".join(
                f"{k} 0"
                for k in (
                    "usage_usec",
                    "user_usec",
                    "system_usec",
                    "nr_periods",
                    "nr_throttled",
                    "throttled_usec",
                )
            ),
            "cpuset.cpus": "",
            "cpuset.cpus.effective": self.all_cpus,
            "cpuset.mems": "",
            "memory.max": "max",
            "memory.current": "0",
            "memory.stat": "\n".join(f"{k} 0" for k in _V2_MEMORY_STAT_KEYS),
            "cgroup.procs": "",
            "cgroup.threads": "",
        }
        if self.cpu_burst:
            files["cpu.max.burst"] = "0"
        return files

    def cgroup_dirs(self, parent_dir: str) -> list[Path]:
        if self.version is CgroupVersion.V2:
            return [self.layout.dir_path("cpu", parent_dir)]
        return [self.layout.dir_path(s, parent_dir) for s in ("cpu", "cpuacct", "cpuset", "memory")]

    def ensure_cgroup(self, parent_dir: str, files: Mapping[str, str] | None = None) -> str:
        """Create a cgroup (every v1 subsystem, or the v2 dir) with kernel-like default files; ``files``
        sets some by v1 resource name (``{"cpuset.cpus": "0-3"}``). Existing files are kept."""
        subsystems = ("cpu",) if self.version is CgroupVersion.V2 else ("cpu", "cpuacct", "cpuset", "memory")
        for sub in subsystems:
            d = self.layout.dir_path(sub, parent_dir)
            d.mkdir(parents=True, exist_ok=True)
            for name, content in self._defaults(sub).items():
                f = d / name
                if not f.exists():
                    f.write_text(content + ("\n" if content else ""))
        for name, value in (files or {}).items():
            self.write(name, parent_dir, value)
        return parent_dir

    def remove_cgroup(self, parent_dir: str) -> None:
        for d in self.cgroup_dirs(parent_dir):
            shutil.rmtree(d, ignore_errors=True)

    def path(self, resource_name: str, parent_dir: str) -> Path:
        return self.layout.file_path(resource(resource_name), parent_dir)

    def write(self, resource_name: str, parent_dir: str, value: str) -> None:
        """Write a file by its v1 resource name as the kernel would hold it (on v2: ``cpu.max`` keeps the
        other field, ``-1`` becomes ``max``, shares become a weight)."""
        p = self.path(resource_name, parent_dir)
        p.parent.mkdir(parents=True, exist_ok=True)
        text = value
        if self.version is CgroupVersion.V2:
            if resource_name in ("cpu.cfs_quota_us", "cpu.cfs_period_us"):
                quota, period = (
                    [*p.read_text().split(), "max", "100000"][:2] if p.exists() else ("max", "100000")
                )
                if resource_name == "cpu.cfs_quota_us":
                    quota = "max" if value.strip() == "-1" else value.strip()
                else:
                    period = value.strip()
                text = f"{quota} {period}"
            elif resource_name == "memory.limit_in_bytes" and value.strip() == "-1":
                text = "max"
        p.write_text(text + "\n")

    def read(self, resource_name: str, parent_dir: str) -> str:
        return self.path(resource_name, parent_dir).read_text().strip()

    def add_cpu_usage(self, parent_dir: str, *, seconds: float) -> None:
        """Let a cgroup consume ``seconds`` of CPU (``cpuacct.usage`` or v2 ``usage_usec``)."""
        if self.version is CgroupVersion.V1:
            p = self.path("cpuacct.usage", parent_dir)
            p.write_text(f"{int(p.read_text().strip() or 0) + round(seconds * 1e9)}\n")
            return
        p = self.path("cpu.stat", parent_dir)
        kv = parse_kv(p.read_text())
        kv["usage_usec"] = str(int(kv.get("usage_usec", "0")) + round(seconds * 1e6))
        p.write_text("\n".join(f"{k} {v}" for k, v in kv.items()) + "\n")

    def set_throttled(self, parent_dir: str, *, nr_periods: int, nr_throttled: int) -> None:
        p = self.path("cpu.stat", parent_dir)
        kv = parse_kv(p.read_text())
        kv["nr_periods"] = str(nr_periods)
        kv["nr_throttled"] = str(nr_throttled)
        p.write_text("\n".join(f"{k} {v}" for k, v in kv.items()) + "\n")

    def set_memory_usage(self, parent_dir: str, *, anon: int, file: int = 0) -> None:
        """Set a cgroup's ``memory.stat`` (anon in active_anon, page cache in active_file) and usage."""
        if self.version is CgroupVersion.V1:
            values = dict.fromkeys(_V1_MEMORY_STAT_KEYS, 0)
            values.update(rss=anon, active_anon=anon, cache=file, active_file=file)
            content = "\n".join(f"total_{k} {v}" for k, v in values.items())
        else:
            values = dict.fromkeys(_V2_MEMORY_STAT_KEYS, 0)
            values.update(anon=anon, active_anon=anon, file=file, active_file=file)
            content = "\n".join(f"{k} {v}" for k, v in values.items())
        self.path("memory.stat", parent_dir).write_text(content + "\n")
        self.path("memory.usage_in_bytes", parent_dir).write_text(f"{anon + file}\n")

    # --- pods --------------------------------------------------------------------------------------------
    def add_pod(self, manifest: Mapping[str, Any], files: Mapping[str, str] | None = None) -> FakePod:
        """Create the pod's cgroup and one per container that has a ``containerID`` in its status."""
        meta = manifest.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            raise ValueError("pod manifest needs metadata.uid to place its cgroup")
        qos = kube_qos(manifest)
        pod_dir = self.ensure_cgroup(self.layout.pod_dir(qos, uid), files)
        containers: dict[str, str] = {}
        status = manifest.get("status") or {}
        for cs in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
            cid = str(cs.get("containerID") or "")
            if not cid:
                continue
            cdir = self.ensure_cgroup(self.layout.container_dir(pod_dir, cid), files)
            containers[str(cs.get("name") or "")] = cdir
        return FakePod(uid, qos, pod_dir, containers)

    def remove_pod(self, pod: FakePod) -> None:
        for cdir in pod.containers.values():
            self.remove_cgroup(cdir)
        self.remove_cgroup(pod.cgroup_dir)

    # --- threads ---------------------------------------------------------------------------------------
    def add_threads(self, parent_dir: str, ids: Iterable[int]) -> None:
        """Threads that run in a cgroup: listed in its ``tasks`` (v1 cpu) or ``cgroup.threads`` (v2), and
        alive for the fake resctrl kernel (which refuses ids that are not)."""
        new = [int(i) for i in ids]
        if self.resctrl is not None:
            self.resctrl.start_threads(new)
        self.live_threads.update(new)
        p = self.path("tasks", parent_dir)
        have = [int(x) for x in p.read_text().split()] if p.exists() else []
        p.write_text("".join(f"{t}\n" for t in [*have, *(i for i in new if i not in have)]))

    def exit_threads(self, ids: Iterable[int], *, keep_listed: bool = False) -> None:
        """Threads exit. ``keep_listed`` leaves them in their cgroup files, as a listing taken just before
        the exit would show them (the race a bulk tasks write must survive)."""
        gone = set(ids)
        self.live_threads -= gone
        if self.resctrl is not None:
            self.resctrl.exit_threads(gone)
        if keep_listed:
            return
        for p in self.paths.cgroup.rglob("tasks" if self.version is CgroupVersion.V1 else "cgroup.threads"):
            have = [int(x) for x in p.read_text().split()]
            if gone.intersection(have):
                p.write_text("".join(f"{t}\n" for t in have if t not in gone))

    # --- resctrl -----------------------------------------------------------------------------------------
    def with_resctrl(
        self,
        *,
        cbm_mask: str = "7ff",
        cache_ids: Sequence[int] = (0,),
        mb: bool = True,
        groups: Iterable[str] = (),
        num_closids: int = 16,
        mounted: bool = True,
        mountable: bool = True,
        flags: Iterable[str] = (
            "cat_l3",
            "mba",
            "cqm_llc",
            "cqm_occup_llc",
            "cqm_mbm_total",
            "cqm_mbm_local",
        ),
    ) -> FakeHostTree:
        """Give the host resctrl: the CPU flags that make it capable, the L3 cache of each CPU in sysfs
        (CPUs spread evenly over ``cache_ids``), and a fake resctrl fs (``self.resctrl``, a kernel-like
        ``FakeResctrl``) mounted unless ``mounted=False`` (then ``mount`` creates it, or fails with ENODEV
        when not ``mountable``). ``groups`` are made right away."""
        vendor = "GenuineIntel"
        try:
            for line in (self.paths.proc / "cpuinfo").read_text().splitlines():
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        self.resctrl = FakeResctrl(
            self.paths.resctrl,
            vendor=vendor,
            cbm_mask=cbm_mask,
            cache_ids=cache_ids,
            mb=mb,
            num_closids=num_closids,
            live_threads=self.live_threads,
            mounted=mounted,
            mountable=mountable,
        )
        if mounted:
            for g in groups:
                if not self.paths.resctrl_file(g).exists():
                    self.resctrl.make_group(self.paths.resctrl_file(g))
        self._write_l3_caches(cache_ids)
        self.set_cpuinfo(vendor=vendor, flags=("fpu", "sse", *flags))
        return self

    def _write_l3_caches(self, cache_ids: Sequence[int]) -> None:
        ids = sorted(cache_ids) or [0]
        n = max(len(self.processors), 1)
        members: dict[int, list[int]] = {}
        for k, p in enumerate(self.processors):
            members.setdefault(ids[k * len(ids) // n], []).append(p.cpu)
        for cache_id, cpus in members.items():
            for cpu in cpus:
                d = self.paths.sys / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cache" / "index3"
                d.mkdir(parents=True, exist_ok=True)
                (d / "level").write_text("3\n")
                (d / "type").write_text("Unified\n")
                (d / "id").write_text(f"{cache_id}\n")
                (d / "shared_cpu_list").write_text(format_cpuset(cpus) + "\n")


class QOSHarness:
    """A QoS strategy's world on a fake host: node state from manifests, a metric cache, the executor, an
    evictor over a cluster port (an in-memory one by default), on a virtual clock.

    ``context`` is what a strategy is built with; ``set_state`` replaces the node snapshot (pods, Node,
    NodeSLO, NodeResourceTopology annotations) between ticks. Pod cgroups are created for every pod given
    (``create_cgroups=False`` to leave the tree alone)::

        h = QOSHarness(tree, node=node, pods=[ls_pod, be_pod], node_slo={"resourceUsedThresholdWithBE": ...})
        h.metrics.append(MetricKind.NODE_CPU_USAGE, h.clock.now(), 12.0)
        strategy = BECPUSuppress(BECPUSuppress.parse_args({}), h.context)
        strategy.tick(h.clock.now())
    """

    def __init__(
        self,
        tree: FakeHostTree,
        *,
        node: Mapping[str, Any] | None = None,
        pods: Sequence[Mapping[str, Any]] = (),
        node_slo: Mapping[str, Any] | None = None,
        topology_annotations: Mapping[str, str] | None = None,
        node_name: str = "test-node",
        clock: VirtualClock | None = None,
        cluster: ClusterPort | None = None,
        collect_interval_seconds: float = 1.0,
        create_cgroups: bool = True,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.tree = tree
        self.node_name = node_name
        self.clock: VirtualClock = clock or VirtualClock(1_700_000_000.0)
        if cluster is None:
            from koord_framework.cluster.memory import MemoryCluster

            cluster = MemoryCluster(self.clock)
        self.cluster = cluster
        self.registry = registry or CollectorRegistry()
        self.metrics = MetricCache(interval_seconds=collect_interval_seconds)
        cpu_info = read_node_cpu_info(tree.paths)
        self.metrics.set(NODE_CPU_INFO_KEY, cpu_info)
        self.executor = ResourceExecutor(
            tree.layout, clock=self.clock, node_cpus=cpu_info.cpu_ids, registry=self.registry
        )
        self.evictor = Evictor(cluster, clock=self.clock, registry=self.registry)
        self.create_cgroups = create_cgroups
        self.state = NodeState(node_name)
        self.set_state(node=node, pods=pods, node_slo=node_slo, topology_annotations=topology_annotations)
        self.context = QOSContext(
            node_name=node_name,
            host=tree.paths,
            layout=tree.layout,
            executor=self.executor,
            metrics=self.metrics,
            evictor=self.evictor,
            clock=self.clock,
            state_provider=lambda: self.state,
            registry=self.registry,
            collect_interval_seconds=collect_interval_seconds,
            cluster=cluster,
        )

    @classmethod
    def with_cluster(
        cls,
        tree: FakeHostTree,
        *,
        node: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]] = (),
        node_slo: Mapping[str, Any] | None = None,
    ) -> QOSHarness:
        """A harness whose in-memory cluster also holds ``node`` and ``pods``: an eviction strategy evicts
        through the cluster's Eviction API, which refuses pods the cluster does not know."""
        from koord_framework.cluster.memory import MemoryCluster

        clock = VirtualClock(1_700_000_000.0)
        cluster = MemoryCluster(clock)
        for obj in (node, *pods):
            cluster.create(dict(obj))
        return cls(tree, node=node, pods=pods, node_slo=node_slo, clock=clock, cluster=cluster)

    def set_state(
        self,
        *,
        node: Mapping[str, Any] | None = None,
        pods: Sequence[Mapping[str, Any]] = (),
        node_slo: Mapping[str, Any] | None = None,
        topology_annotations: Mapping[str, str] | None = None,
        has_topology: bool = True,
    ) -> NodeState:
        """Replace the snapshot strategies see. ``node_slo`` is a NodeSLO *spec* (or a whole NodeSLO);
        ``has_topology=False`` leaves the node without a NodeResourceTopology."""
        if self.create_cgroups:
            for pod in pods:
                if (pod.get("metadata") or {}).get("uid"):
                    self.tree.add_pod(pod)
        slo_obj: Mapping[str, Any] | None = None
        if node_slo is not None:
            slo_obj = (
                node_slo if "spec" in node_slo else {"metadata": {"name": self.node_name}, "spec": node_slo}
            )
        topology = (
            {"metadata": {"name": self.node_name, "annotations": dict(topology_annotations or {})}}
            if has_topology
            else None
        )

        def fail(what: str, err: Exception) -> None:
            raise err

        self.state = build_state(
            self.node_name,
            self.tree.layout,
            node=node,
            pods=pods,
            node_slo=slo_obj,
            topology=topology,
            on_error=fail,
        )
        return self.state

    def set_cpu_info(self, processors: Sequence[ProcessorInfo]) -> None:
        """Override the CPU topology strategies see (vectors give it explicitly)."""
        info = NodeCPUInfo(tuple(processors))
        self.metrics.set(NODE_CPU_INFO_KEY, info)
        self.executor.node_cpus = info.cpu_ids


def make_running_pod(
    name: str,
    *,
    uid: str | None = None,
    namespace: str = "default",
    node: str = "test-node",
    qos: str | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    containers: Sequence[str] = ("main",),
    runtime: str = "containerd",
    priority: int | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    creation_timestamp: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A pod bound to ``node`` and running, each container with a ``containerID`` (``<runtime>://<uid>-<name>``)
    and the same ``requests``/``limits``; ``qos`` sets the ``koordinator.sh/qosClass`` label."""
    uid = uid or f"uid-{name}"
    all_labels = dict(labels or {})
    if qos is not None:
        all_labels["koordinator.sh/qosClass"] = qos
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "labels": all_labels}
    if annotations:
        meta["annotations"] = dict(annotations)
    if creation_timestamp:
        meta["creationTimestamp"] = creation_timestamp
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": c, "resources": dict(resources)} for c in containers],
    }
    if priority is not None:
        spec["priority"] = priority
    status = {
        "phase": phase,
        "containerStatuses": [
            {"name": c, "containerID": f"{runtime}://{uid}-{c}", "state": {"running": {}}} for c in containers
        ],
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}
