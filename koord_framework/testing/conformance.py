"""Conformance base classes: subclass one in a plugin's tests and the platform's contracts are checked.

    class TestConformance(SchedulerPluginConformance):
        plugin_class = LoadAwareScheduling
        invalid_args = [{"usageThresholds": {"cpu": 101}}]

Checked for every plugin (``PluginConformance``): the entry point exists under the plugin's group with the
class's ``name``; the default args validate; ``valid_args`` validate and ``invalid_args`` are refused; the
args JSON schema builds; the class implements at least one extension point. Then, per group, behaviour on
seeded random worlds:

* ``SchedulerPluginConformance``: Filter/Score never raise, scores stay within [0, 100] after normalisation,
  and the vectorised forms (``filter_all``/``score_all``) agree with the per-node forms exactly.
* ``DeschedulerPluginConformance``: Deschedule/Balance plugins report no error on random clusters and evict
  only through the profile's evictor — every eviction names the plugin and a reason, only pods the
  evictor's Filter admitted are evicted, and nothing in the cluster changes behind the evictor's back.
  Filter/PreEvictionFilter/Evict plugins answer with a bool for every pod and refuse only by returning
  False or raising ``EvictionFailed``.
* ``QOSStrategyConformance``: on fake hosts (cgroup v1 and v2) with random pods, usage and NodeSLOs,
  ``tick`` and ``on_disabled`` never raise, and every pod that leaves the cluster left through the
  koordlet's ``Evictor`` with a reason, once.
"""

from __future__ import annotations

import base64
import json
import random
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from koord_framework.plugin import Plugin
from koord_framework.registry import GROUPS, PluginRegistry

if TYPE_CHECKING:
    from koord_framework.api.objects import PodInfo
    from koord_framework.testing.descheduler import DeschedulerHarness
    from koord_framework.testing.hosttree import QOSHarness


class PluginConformance:
    plugin_class: ClassVar[type[Plugin]]
    group: ClassVar[str] = "scheduler"
    valid_args: ClassVar[list[dict[str, Any]]] = []
    invalid_args: ClassVar[list[dict[str, Any]]] = []
    require_entry_point: ClassVar[bool] = True
    """Set False for an in-tree example class that is deliberately not installed."""

    def test_entry_point_name_equals_class_name(self) -> None:
        if not self.require_entry_point:
            pytest.skip("plugin is not installed through an entry point")
        registry = PluginRegistry.discover(self.group)
        name = self.plugin_class.name
        assert name, "plugin class must set a non-empty `name`"
        assert name in registry, f"{name} is not registered under {GROUPS.get(self.group, self.group)}"
        assert registry.get(name) is self.plugin_class

    def test_default_args_validate(self) -> None:
        args = self.plugin_class.parse_args(None)
        assert isinstance(args, self.plugin_class.Args)

    def test_valid_args(self) -> None:
        for raw in self.valid_args:
            self.plugin_class.parse_args(raw)

    def test_invalid_args_rejected(self) -> None:
        from pydantic import ValidationError

        for raw in self.invalid_args:
            with pytest.raises(ValidationError):
                self.plugin_class.parse_args(raw)

    def test_args_are_frozen_and_strict(self) -> None:
        from pydantic import ValidationError

        with pytest.raises(ValidationError):
            self.plugin_class.parse_args({"noSuchFieldAnywhere": 1})

    def test_args_schema_builds(self) -> None:
        schema = self.plugin_class.Args.model_json_schema(by_alias=True)
        json.dumps(schema)
        assert schema.get("type") == "object"

    def test_implements_an_extension_point(self) -> None:
        assert self.plugin_class.extension_points(), "plugin implements no extension point"


class SchedulerPluginConformance(PluginConformance):
    """Adds behavioural checks on seeded random clusters through the ``SchedulerHarness``."""

    group: ClassVar[str] = "scheduler"
    harness_args: ClassVar[dict[str, Any] | None] = None
    """Args the behavioural checks run the plugin with (None: defaults)."""
    random_clusters: ClassVar[int] = 5
    extra_plugins: ClassVar[list[Any]] = []
    """Other plugins the harness needs alongside (classes or (class, args) pairs)."""

    def make_harness(self) -> Any:
        """The harness the behavioural checks use; override to pass ``now=`` or other options."""
        from koord_framework.testing.scheduler import SchedulerHarness

        plugin: Any = (self.plugin_class, self.harness_args) if self.harness_args else self.plugin_class
        return SchedulerHarness([plugin, *self.extra_plugins])

    def make_objects(self, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(objects to load, pending pods) of one random cluster; override to add the objects your plugin
        reads (NodeMetrics, CRDs). The default is ``koord_framework.testing.random_cluster``."""
        from koord_framework.testing import random_cluster

        return random_cluster(rng)

    def _clusters(self) -> list[tuple[Any, list[dict[str, Any]]]]:
        out = []
        for seed in range(self.random_clusters):
            harness = self.make_harness()
            objects, pending = self.make_objects(random.Random(seed))
            harness.add(*objects)
            out.append((harness, pending))
        return out

    def test_scores_in_range_and_vector_forms_agree(self) -> None:
        from koord_framework.scheduler.interface import FilterPlugin, ScorePlugin

        if not (issubclass(self.plugin_class, FilterPlugin) or issubclass(self.plugin_class, ScorePlugin)):
            pytest.skip("neither Filter nor Score")
        for harness, pending in self._clusters():
            for pod in pending:
                harness.check_vector_forms(pod, self.plugin_class.name)
                if issubclass(self.plugin_class, ScorePlugin):
                    for node, score in harness.normalized_scores(pod).items():
                        assert 0 <= score <= 100, f"{self.plugin_class.name} scored {node} {score}"


# --- descheduler ---------------------------------------------------------------------------------------
def _admitted(pod: PodInfo) -> bool:
    """A fixed, pod-dependent refusal of about a third of the pods, standing in for a profile's filters."""
    return zlib.crc32(pod.key.encode()) % 3 != 0


class DeschedulerPluginConformance(PluginConformance):
    """Adds behavioural checks on seeded random clusters through the ``DeschedulerHarness``.

    Deschedule/Balance plugins run with the ``RecordingEvictor``, whose Filter refuses a fixed third of the
    pods; Filter/PreEvictionFilter/Evict plugins are the harness's evictor and are asked about every pod.
    """

    group: ClassVar[str] = "descheduler"
    harness_args: ClassVar[dict[str, Any] | None] = None
    """Args the behavioural checks run the plugin with (None: defaults). Give thresholds that make a
    balance plugin act on the random clusters, or the eviction checks have nothing to look at."""
    random_clusters: ClassVar[int] = 5
    expect_evictions: ClassVar[bool] = False
    """Set True when ``harness_args`` should make a Deschedule/Balance plugin evict on some random cluster:
    the check then fails if it never does (a plugin that evicts nothing passes every other check)."""

    def make_harness(self) -> DeschedulerHarness:
        """The harness the behavioural checks use; override to pass ``now=``, ``evictor=`` or options."""
        from koord_framework.descheduler.interface import EvictPlugin, FilterPlugin
        from koord_framework.testing.descheduler import DeschedulerHarness

        spec: Any = (self.plugin_class, self.harness_args) if self.harness_args else self.plugin_class
        if issubclass(self.plugin_class, EvictPlugin | FilterPlugin):
            return DeschedulerHarness([], evictor=spec)
        return DeschedulerHarness([spec])

    def make_objects(self, rng: random.Random) -> list[dict[str, Any]]:
        """Objects of one random cluster (nodes, running pods, NodeMetrics); override to add what your
        plugin reads (workloads, PDBs, CRDs). The default is ``random_cluster`` without pending pods."""
        from koord_framework.testing import random_cluster

        objects, _pending = random_cluster(rng, nodes=(3, 10))
        return objects

    def _clusters(self) -> list[DeschedulerHarness]:
        out = []
        for seed in range(self.random_clusters):
            harness = self.make_harness()
            harness.add(*self.make_objects(random.Random(seed)))
            out.append(harness)
        return out

    def test_evicts_only_through_the_evictor_with_a_reason(self) -> None:
        from koord_framework.descheduler.interface import BalancePlugin, DeschedulePlugin

        if not issubclass(self.plugin_class, BalancePlugin | DeschedulePlugin):
            pytest.skip("neither Deschedule nor Balance")
        name = self.plugin_class.name
        evicted_somewhere = False
        for harness in self._clusters():
            recorder = harness.recorder
            recorder.admit = _admitted
            before = _pod_keys(harness)
            for point, plugin_cls in (("deschedule", DeschedulePlugin), ("balance", BalancePlugin)):
                if issubclass(self.plugin_class, plugin_cls):
                    report = harness.balance() if point == "balance" else harness.deschedule()
                    assert not report.errors, f"{name} {point} reported errors: {report.errors}"
            for e in recorder.evictions:
                assert e.plugin == name, f"eviction of {e.pod} attributed to {e.plugin!r}, not {name}"
                assert e.reason.strip(), f"{name} evicted {e.pod} without a reason"
                on_node = harness.handle.pods_on_node(e.node)
                assert any(p.key == e.pod and _admitted(p) for p in on_node), (
                    f"{name} evicted {e.pod}: not on {e.node}, or refused by the evictor's Filter"
                )
            keys = [e.pod for e in recorder.evictions]
            assert len(keys) == len(set(keys)), f"{name} evicted a pod twice in one round: {keys}"
            assert _pod_keys(harness) == before, f"{name} changed pods in the cluster behind the evictor"
            evicted_somewhere = evicted_somewhere or bool(keys)
        if self.expect_evictions:
            assert evicted_somewhere, f"{name} evicted nothing on {self.random_clusters} random clusters"

    def test_evictor_answers_for_every_pod(self) -> None:
        from koord_framework.descheduler.framework import EvictionFailed
        from koord_framework.descheduler.interface import (
            EvictOptions,
            EvictPlugin,
            FilterPlugin,
            PreEvictionFilterPlugin,
        )

        if not issubclass(self.plugin_class, EvictPlugin | FilterPlugin | PreEvictionFilterPlugin):
            pytest.skip("neither Filter, PreEvictionFilter nor Evict")
        name = self.plugin_class.name
        for harness in self._clusters():
            plugin = harness.plugin(name)
            pods = [
                p for node in harness.handle.ready_nodes() for p in harness.handle.pods_on_node(node.name)
            ]
            for pod in pods:
                admitted = True
                if isinstance(plugin, FilterPlugin):
                    admitted = plugin.filter(pod)
                    assert isinstance(admitted, bool), f"{name}.filter returned {admitted!r}"
                if isinstance(plugin, PreEvictionFilterPlugin):
                    answer = plugin.pre_eviction_filter(pod)
                    assert isinstance(answer, bool), f"{name}.pre_eviction_filter returned {answer!r}"
                if isinstance(plugin, EvictPlugin) and admitted:
                    try:
                        done = plugin.evict(
                            pod, EvictOptions(plugin_name="Conformance", reason="conformance")
                        )
                    except EvictionFailed:
                        continue
                    assert isinstance(done, bool), f"{name}.evict returned {done!r}"


def _pod_keys(harness: DeschedulerHarness) -> list[str]:
    pods, _ = harness.cluster.list("Pod")
    return sorted(
        f"{(p.get('metadata') or {}).get('namespace') or 'default'}/{(p.get('metadata') or {}).get('name')}"
        for p in pods
    )


# --- koordlet QoS strategies -----------------------------------------------------------------------------
_QOS_CLASSES = ("LSE", "LSR", "LS", "BE", None)
QOSObjects = tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]
"""(Node manifest, running pod manifests, NodeSLO spec)."""


def _files(root: Path) -> dict[Path, bytes]:
    """Every file under ``root`` with its content, to see what a strategy changed."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def random_node_slo(rng: random.Random) -> dict[str, Any]:
    """A NodeSLO spec that switches every threshold feature on, with thresholds low enough to act."""
    threshold = rng.choice((40, 60, 80))
    return {
        "resourceUsedThresholdWithBE": {
            "enable": True,
            "cpuSuppressThresholdPercent": rng.choice((50, 65, 80)),
            "cpuSuppressPolicy": rng.choice(("cpuset", "cfsQuota")),
            "memoryEvictThresholdPercent": threshold,
            "memoryAllocatableEvictThresholdPercent": rng.choice((50, 80)),
            "cpuEvictBESatisfactionLowerPercent": 30,
            "cpuEvictBESatisfactionUpperPercent": 50,
            "cpuEvictThresholdPercent": threshold,
            "cpuAllocatableEvictThresholdPercent": rng.choice((50, 80)),
            "evictEnabledPriorityThreshold": 9999,
            "allocatableEvictPriorityThreshold": 7999,
        },
        "cpuBurstStrategy": {
            "policy": rng.choice(("auto", "cpuBurstOnly", "cfsQuotaBurstOnly", "none")),
            "cpuBurstPercent": rng.choice((100, 500, 1000)),
            "cfsQuotaBurstPercent": rng.choice((150, 300)),
            "sharePoolThresholdPercent": rng.choice((30, 50, 90)),
        },
    }


def random_node_pods(
    rng: random.Random, node: str, cpus: int, memory_gi: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Node manifest with batch resources and 3..10 running pods of every QoS class."""
    from koord_framework.testing.hosttree import make_running_pod

    batch_cpu = cpus * 1000 // 2
    node_obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node},
        "status": {
            "capacity": {
                "cpu": str(cpus),
                "memory": f"{memory_gi}Gi",
                "kubernetes.io/batch-cpu": str(batch_cpu),
                "kubernetes.io/batch-memory": f"{memory_gi // 2}Gi",
            },
            "allocatable": {
                "cpu": str(cpus),
                "memory": f"{memory_gi}Gi",
                "kubernetes.io/batch-cpu": str(batch_cpu),
                "kubernetes.io/batch-memory": f"{memory_gi // 2}Gi",
            },
        },
    }
    pods = []
    for i in range(rng.randint(3, 10)):
        qos = rng.choice(_QOS_CLASSES)
        if qos == "BE":
            res = {
                "kubernetes.io/batch-cpu": str(rng.choice((500, 1000, 2000))),
                "kubernetes.io/batch-memory": "1Gi",
            }
            requests, limits = res, res
        else:
            cores = rng.choice((1, 2))
            requests = {"cpu": str(cores), "memory": f"{rng.choice((1, 2))}Gi"}
            limits = {"cpu": str(cores * rng.choice((1, 2))), "memory": requests["memory"]}
        labels = {"koordinator.sh/eviction-enabled": "true"} if rng.random() < 0.5 else None
        pods.append(
            make_running_pod(
                f"pod-{i}",
                node=node,
                qos=qos,
                requests=requests,
                limits=limits,
                containers=("main", "side")[: rng.randint(1, 2)],
                priority=rng.choice((None, 9500, 7500, 5500, 3500)),
                labels=labels,
            )
        )
    return node_obj, pods


class QOSStrategyConformance(PluginConformance):
    """Adds behavioural checks of a QoS strategy on fake host trees (``FakeHostTree`` + ``QOSHarness``).

    Each random host has 4, 8 or 16 CPUs, pods of every QoS class with cgroups, usage that moves between
    ticks (CPU time, memory, throttling, node memory pressure) collected by the koordlet's collector into
    the metric cache, and a NodeSLO that switches every threshold feature on. The strategy is driven as the
    agent drives it: ``tick`` while ``enabled``, else ``on_disabled``.
    """

    group: ClassVar[str] = "qos"
    harness_args: ClassVar[dict[str, Any] | None] = None
    """Args the behavioural checks run the strategy with (None: defaults)."""
    random_hosts: ClassVar[int] = 4
    ticks: ClassVar[int] = 6
    layouts: ClassVar[Sequence[tuple[int, str]]] = ((1, "systemd"), (2, "cgroupfs"))
    """(cgroup version, driver) pairs; host ``i`` uses ``layouts[i % len(layouts)]``."""

    def make_objects(self, rng: random.Random) -> QOSObjects:
        """(Node, running pods, NodeSLO spec) of one random host; override to add what your strategy reads."""
        cpus = rng.choice((4, 8, 16))
        node, pods = random_node_pods(rng, "test-node", cpus, cpus * rng.choice((2, 4)))
        return node, pods, random_node_slo(rng)

    def make_harness(self, root: Path, objects: QOSObjects, layout: tuple[int, str]) -> QOSHarness:
        """A fake host under ``root`` for ``objects`` (the pods get cgroups and are in the cluster too)."""
        from koord_framework.cluster.clock import VirtualClock
        from koord_framework.cluster.memory import MemoryCluster
        from koord_framework.testing.hosttree import FakeHostTree, QOSHarness

        node, pods, slo = objects
        capacity = node["status"]["capacity"]
        memory = int(str(capacity["memory"]).removesuffix("Gi")) * 1024**3
        tree = FakeHostTree(
            root, version=layout[0], driver=layout[1], cpus=int(capacity["cpu"]), memory_bytes=memory
        )
        clock = VirtualClock(1_700_000_000.0)
        cluster = MemoryCluster(clock)
        for obj in (node, *pods):
            cluster.create(obj)
        return QOSHarness(tree, node=node, pods=pods, node_slo=slo, clock=clock, cluster=cluster)

    def _move_usage(self, h: QOSHarness, rng: random.Random, seconds: float) -> None:
        """Let time pass on the host: CPU time, memory, throttling of every pod; node CPU and memory."""
        tree = h.tree
        cpus = len(tree.processors)
        busy = 0.0
        for meta in h.state.pods:
            used = rng.uniform(0, 2) * seconds
            busy += used
            tree.add_cpu_usage(meta.cgroup_dir, seconds=used)
            tree.set_memory_usage(meta.cgroup_dir, anon=rng.randint(0, 2) * 1024**3)
            running = [c for c in meta.containers if c.cgroup_dir]
            for c in running:
                tree.add_cpu_usage(c.cgroup_dir, seconds=used / len(running))
                tree.set_throttled(c.cgroup_dir, nr_periods=100, nr_throttled=rng.randint(0, 100))
        node_busy = min(busy + rng.uniform(0, cpus * seconds), cpus * seconds)
        tree.add_node_cpu(seconds=node_busy, wall_seconds=seconds)
        tree.set_node_memory_used(int(tree.memory_total * rng.uniform(0.3, 0.99)))

    def _run(self, root: Path, seed: int, *, switched_off: bool) -> tuple[QOSHarness, int]:
        """Drive the strategy on one random host; returns the harness and how many ticks ran ``tick``."""
        from koord_framework.koordlet.metrics.collector import ResourceCollector
        from koord_framework.koordlet.qos import QOSStrategy

        cls = self.plugin_class
        assert issubclass(cls, QOSStrategy), f"{cls.__name__} is not a QOSStrategy"
        rng = random.Random(seed)
        node, pods, slo = self.make_objects(rng)
        if switched_off:
            slo = {"resourceUsedThresholdWithBE": {"enable": False}, "cpuBurstStrategy": {"policy": "none"}}
        h = self.make_harness(root, (node, pods, slo), self.layouts[seed % len(self.layouts)])
        strategy = cls(cls.parse_args(self.harness_args), h.context)
        collector = ResourceCollector(h.tree.paths, h.tree.layout, h.metrics)
        ticked = 0
        for _ in range(self.ticks):
            self._move_usage(h, rng, strategy.interval_seconds)
            h.clock.advance(strategy.interval_seconds)
            now = h.clock.now()
            collector.collect(h.state, now)
            before = _files(h.tree.paths.cgroup)
            if strategy.enabled(h.state.node_slo):
                strategy.tick(now)
                ticked += 1
            else:
                strategy.on_disabled(now)
            after = _files(h.tree.paths.cgroup)
            changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
            through_executor = {Path(r.path) for r in h.executor.audit_since(now)}
            behind = sorted(str(p) for p in changed - through_executor)
            assert not behind, f"{cls.name} changed host files without the executor: {behind}"
        return h, ticked

    def test_ticks_on_random_hosts_act_only_through_the_context(self, tmp_path: Path) -> None:
        """Writes go through ``context.executor`` (checked every tick in ``_run``); evictions through
        ``context.evictor``, with a reason, never twice."""
        from koord_framework.cluster.memory import MemoryCluster

        name = self.plugin_class.name
        ticked = 0
        for seed in range(self.random_hosts):
            h, n = self._run(tmp_path / f"host-{seed}", seed, switched_off=False)
            ticked += n
            done = [r for r in h.evictor.records if r.ok]
            for r in done:
                assert r.reason.strip(), f"{name} evicted {r.namespace}/{r.name} without a reason"
            uids = [r.uid for r in done]
            assert len(uids) == len(set(uids)), f"{name} evicted a pod twice: {uids}"
            assert isinstance(h.cluster, MemoryCluster)
            by_cluster = sorted(e.uid for e in h.cluster.evictions)
            assert by_cluster == sorted(uids), f"{name} evicted pods other than through context.evictor"
            pods, _ = h.cluster.list("Pod")
            left = {(p.get("metadata") or {}).get("uid") for p in pods}
            assert left == {m.uid for m in h.state.pods} - set(uids), (
                f"{name} deleted pods behind the evictor"
            )
        assert ticked, (
            f"{name} was never enabled on {self.random_hosts} random hosts: override make_objects with a "
            "NodeSLO that switches it on, or nothing above was checked"
        )

    def test_switched_off_by_the_node_slo_never_raises_nor_evicts(self, tmp_path: Path) -> None:
        for seed in range(2):
            h, _ = self._run(tmp_path / f"host-{seed}", seed, switched_off=True)
            assert not [r for r in h.evictor.records if r.ok], "evicted while switched off"


class NodeResourcePluginConformance(PluginConformance):
    """koord-manager's node-resource calculators: items only for the resources and annotations the plugin
    owns, a reset that removes its resources, and degradation rather than a crash when the node has no
    NodeMetric (the plugin bound to an empty context: no other objects, no ``slo-controller-config``)."""

    group: ClassVar[str] = "noderesource"

    def _plugin(self) -> Any:
        plugin: Any = self.plugin_class()

        class _EmptyContext:
            def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
                return None

            def slo_config(self, key: str) -> dict[str, Any]:
                return {}

            def feature_enabled(self, name: str) -> bool:
                from koord_framework.featuregates import gates_for

                return gates_for("manager").enabled(name)

        plugin.bind(_EmptyContext())
        return plugin

    def test_owns_resources(self) -> None:
        cls: Any = self.plugin_class
        assert tuple(cls.resource_names) or tuple(cls.annotation_names), (
            "resource_names and annotation_names are empty"
        )

    def test_reset_removes_every_owned_resource(self) -> None:
        items = self._plugin().reset({"metadata": {"name": "n"}}, "why")
        assert {i.name for i in items} == set(self.plugin_class.resource_names)  # type: ignore[attr-defined]
        assert all(i.reset for i in items)

    def test_no_node_metric_does_not_raise(self) -> None:
        from koord_framework.manager.noderesource import ColocationStrategy, ResourceMetrics

        cls: Any = self.plugin_class
        node = {
            "metadata": {"name": "n"},
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi"},
                "allocatable": {"cpu": "4", "memory": "8Gi"},
            },
        }
        strategy = ColocationStrategy.from_mapping({"enable": True})
        items = self._plugin().calculate(strategy, node, [], ResourceMetrics(None, 0.0))
        for item in items:
            if item.quantity is not None or item.reset:
                assert item.name in cls.resource_names, f"item for {item.name}, not an owned resource"
            assert set(item.annotations) <= set(cls.annotation_names), "annotation the plugin does not own"


class AdmissionHandlerConformance(PluginConformance):
    """koord-manager's admission handlers (``koord.manager.webhooks``): a path and policy the server can
    serve, a registered feature gate, and on malformed or random objects only ``Denied`` or ``ValueError``
    (a denial or a 400 answer) -- never another exception, which the server would turn into the handler's
    failure policy -- and a mutated object that is still JSON."""

    group: ClassVar[str] = "webhooks"
    cluster_objects: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    """What the handler's lister returns, by kind (profiles, namespaces, ...)."""

    def _handler(self) -> Any:
        handler: Any = self.plugin_class()
        objects = self.cluster_objects

        class _Lister:
            def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
                found = [o for o in objects.get(kind, []) if (o.get("metadata") or {}).get("name") == name]
                return found[0] if found else None

            def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
                return list(objects.get(kind, []))

        handler.bind(_Lister())
        return handler

    def test_path_policy_and_gate(self) -> None:
        from koord_framework.featuregates import gates_for

        cls: Any = self.plugin_class
        assert cls.path.startswith("/"), f"path {cls.path!r} must start with '/'"
        assert cls.failure_policy in ("Fail", "Ignore")
        if cls.gate:
            assert cls.gate in gates_for("manager").specs, f"gate {cls.gate} is not a koord-manager gate"

    def _objects(self, rnd: random.Random) -> list[Any]:
        values: list[Any] = [None, 1, "x", [], {"a": 1}, True]
        out: list[Any] = [{}, {"metadata": None}, {"spec": None}, {"metadata": {"labels": None}}]
        for _ in range(60):
            obj: dict[str, Any] = {
                "metadata": {
                    "name": f"o{rnd.randrange(9)}",
                    "namespace": rnd.choice(["default", "", "other"]),
                    "labels": rnd.choice(
                        [
                            {},
                            {"koordinator.sh/qosClass": rnd.choice(["BE", "LSR", "LS", "x"])},
                            {"app": "a"},
                            rnd.choice(values),
                        ]
                    ),
                    "annotations": rnd.choice([{}, {"node.koordinator.sh/extended-resource-spec": "{bad"}]),
                },
                "spec": {
                    "priority": rnd.choice([None, 0, 3500, 5500, 7500, 9500, "high"]),
                    "containers": rnd.choice(
                        [
                            [],
                            [
                                {
                                    "name": "c",
                                    "resources": {
                                        "requests": {
                                            "cpu": rnd.choice(["1", "100m", "lots", 2]),
                                            "memory": "1Gi",
                                        }
                                    },
                                }
                            ],
                            [{"name": "c", "resources": {"limits": {"kubernetes.io/batch-cpu": "1000"}}}],
                            [{"name": "c", "resources": rnd.choice(values)}],
                            rnd.choice(values),
                        ]
                    ),
                    "min": rnd.choice([None, {"cpu": "1"}, {"cpu": "bad"}]),
                    "max": rnd.choice([None, {"cpu": "2"}, "x"]),
                },
            }
            out.append(obj)
        return out

    def test_malformed_objects_are_denied_or_refused_cleanly(self) -> None:
        from koord_framework.manager.webhook.admission import (
            AdmissionRequest,
            GroupVersionKind,
            GroupVersionResource,
        )
        from koord_framework.manager.webhook.dispatch import Dispatcher

        cls: Any = self.plugin_class
        rnd = random.Random(zlib.crc32(cls.name.encode()))
        handler = self._handler()
        resource = (cls.resources or ("pods",))[0]
        for obj in self._objects(rnd):
            for op in ("CREATE", "UPDATE"):
                request = AdmissionRequest(
                    uid="u",
                    kind=GroupVersionKind("", "v1", ""),
                    resource=GroupVersionResource("", "v1", resource),
                    operation=op,
                    namespace="default",
                    object=obj,
                    old_object=obj if op == "UPDATE" else None,
                )
                response = Dispatcher.admit([handler], request)
                status = response.get("status") or {}
                assert response["allowed"] or status.get("code") in (400, 403), (
                    f"{cls.name} raised on {op} {json.dumps(obj)[:300]}: {status.get('message')}"
                )
                if response.get("patch"):
                    json.loads(base64.b64decode(response["patch"]))


class ManagerControllerConformance(PluginConformance):
    """koord-manager's controller plugins (``koord.manager.controllers``): watched kinds the cluster knows,
    and on malformed or random objects of those kinds (read from the context as the cache would hold them,
    unvalidated) a reconcile that returns or raises ``KoordError`` (logged and retried with backoff) --
    never another exception -- and a deleted key that is forgotten (``None``)."""

    group: ClassVar[str] = "controllers"
    objects: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    """Well-formed objects the context holds besides the random ones, by kind."""
    spec_fields: ClassVar[Sequence[str]] = ()
    """Spec fields the random objects fill with values of every JSON type."""

    def _bind(self, objects: dict[str, list[dict[str, Any]]]) -> tuple[Any, Any]:
        from koord_framework.cluster.clock import VirtualClock
        from koord_framework.cluster.memory import MemoryCluster

        cluster = MemoryCluster(VirtualClock(0.0), seed=0)
        controller: Any = self.plugin_class()

        class _Context:
            @property
            def cluster(self) -> Any:
                return cluster

            def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
                for o in objects.get(kind, []):
                    raw = o.get("metadata")
                    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
                    if meta.get("name") == name and (meta.get("namespace") or "") in (namespace, ""):
                        return o
                return None

            def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
                return list(objects.get(kind, []))

            def feature_enabled(self, name: str) -> bool:
                from koord_framework.featuregates import gates_for

                return gates_for("manager").enabled(name)

        controller.bind(_Context())
        return controller, cluster

    def test_watches_known_kinds(self) -> None:
        from koord_framework.cluster.clock import VirtualClock
        from koord_framework.cluster.memory import MemoryCluster

        kinds = MemoryCluster(VirtualClock(0.0), seed=0).kinds
        cls: Any = self.plugin_class
        for kind in cls.watches:
            assert kind in kinds, f"{cls.name} watches {kind}, which no installed distribution contributes"

    def test_deleted_key_is_forgotten(self) -> None:
        controller, _ = self._bind({})
        assert list(controller.all_keys()) == []
        assert controller.reconcile("default/absent") is None

    def test_malformed_objects_raise_only_koord_errors(self) -> None:
        from koord_framework.errors import KoordError

        cls: Any = self.plugin_class
        rnd = random.Random(zlib.crc32(cls.name.encode()))
        values: list[Any] = [None, 1, "x", [], {"a": 1}, True, "-1", "1e400"]
        for round_ in range(40):
            objects = {k: [dict(o) for o in v] for k, v in self.objects.items()}
            for kind in cls.watches:
                spec = {f: rnd.choice(values) for f in (*self.spec_fields, "a")}
                objects.setdefault(kind, []).append(
                    {
                        "metadata": {
                            "name": f"o{round_}",
                            "namespace": "default",
                            "labels": rnd.choice([{}, {"k": "v"}, None]),
                            "annotations": rnd.choice([{}, None, {"x": "y"}]),
                        },
                        "spec": rnd.choice([spec, None, {}]),
                        "status": rnd.choice([None, {}, {"allocatable": {"cpu": rnd.choice(values)}}]),
                    }
                )
            controller, _ = self._bind(objects)
            for key in list(controller.all_keys()):
                try:
                    result = controller.reconcile(key)
                except KoordError:
                    continue
                assert result is None or result >= 0, f"{cls.name}: requeue after {result!r}"
