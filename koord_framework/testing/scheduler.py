"""``SchedulerHarness``: run scheduler plugins against an in-memory cluster, one extension point at a time.

    h = SchedulerHarness([LoadAwareScheduling, (NodeResourcesFit, {"scoringStrategy": {...}})])
    h.add(make_node("n1"), make_node_metric("n1", cpu="1"), make_pod("p", cpu="1"))
    assert h.filter(pod, "n1").is_success
    assert h.score(pod, "n1") == 72
    result = h.schedule_one(pod)            # full scheduling + binding cycle, with per-plugin details

The harness runs a real ``Scheduler`` (the same code ``koord simulate`` runs) with one profile, on a
``MemoryCluster`` whose clock is a ``VirtualClock`` starting at ``now`` (2024-01-01T00:00:00Z by default).
Without ``profile`` every given plugin is enabled at every extension point it implements, weight 1, in the
given order; with ``profile`` (a ``KubeSchedulerProfile`` mapping: ``plugins``, ``pluginConfig``, ...) the
plugins merge with kube-scheduler's defaults as a configuration file's would, restricted to the given
classes. When no given plugin sorts the queue or binds, stand-ins named ``PrioritySort`` and
``DefaultBinder`` (priority order; ``cluster.bind``) are added.

``pod`` arguments may be manifest dicts or ``PodInfo`` records; a pod need not exist in the cluster except
for ``schedule_one`` (which creates it when given a dict of a pod the cluster does not hold).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

import numpy as np

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.clock import VirtualClock, parse_time
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import KoordError, NotFoundError
from koord_framework.plugin import Plugin, PluginArgs
from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.framework import Framework, PluginLayout, VectorFilterStatuses
from koord_framework.scheduler.handle import SchedulerHandle
from koord_framework.scheduler.interface import (
    BindPlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    SchedulerPlugin,
    ScorePlugin,
    VectorFilter,
    VectorScore,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.scheduler import ProfileSpec, Scheduler
from koord_framework.scheduler.status import Code, Status

DEFAULT_NOW = 1_704_067_200.0
"""2024-01-01T00:00:00Z, the instant Koordinator's test vectors use as ``now``."""

PluginSpec = type[Plugin] | tuple[type[Plugin], Mapping[str, Any] | PluginArgs | None]


class PluginScore(NamedTuple):
    raw: int
    normalized: int
    weighted: int


@dataclass
class ScheduleResult:
    """What one ``schedule_one`` did, with every plugin's verdicts."""

    node: str | None
    status: Status
    outcome: str
    """``Scheduled``, ``Unschedulable``, ``Waiting`` (held at Permit) or ``Binding``."""
    message: str = ""
    filter: dict[str, Status] = field(default_factory=dict)
    """Node → the status of the plugin that rejected it."""
    scores: dict[str, dict[str, PluginScore]] = field(default_factory=dict)
    """Node → plugin → its raw, normalized and weighted score."""
    totals: dict[str, int] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    """What PreBind plugins wrote on the pod."""

    @property
    def scheduled(self) -> bool:
        return self.outcome == "Scheduled"


# --- stand-ins for the plugins every profile needs --------------------------------------------------------
class HarnessQueueSort(SchedulerPlugin, QueueSortPlugin):
    """Higher priority first, then earlier queue time (PrioritySort's order)."""

    name: ClassVar[str] = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority_value, b.pod.priority_value
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, info: QueuedPodInfo) -> tuple[int, float]:
        """``less`` as a key, which the queue compares in C."""
        return (-info.pod.priority_value, info.timestamp)


class HarnessBinder(SchedulerPlugin, BindPlugin):
    """Binds through the cluster port (DefaultBinder's behaviour)."""

    name: ClassVar[str] = "DefaultBinder"

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        try:
            self.handle.cluster.bind(pod.namespace, pod.name, node_name, pod.uid)
        except KoordError as exc:
            return Status.as_error(exc)
        return Status()


def _start_time(now: float | str | datetime | None) -> float:
    if now is None:
        return DEFAULT_NOW
    if isinstance(now, (int, float)):
        return float(now)
    parsed = parse_time(now)
    assert parsed is not None
    return parsed


class SchedulerHarness:
    """A one-profile scheduler for plugin tests; see the module docstring."""

    def __init__(
        self,
        plugins: Sequence[PluginSpec],
        *,
        cluster: MemoryCluster | None = None,
        profile: Mapping[str, Any] | None = None,
        now: float | str | datetime | None = None,
        seed: int = 0,
        scheduler_name: str = "default-scheduler",
        percentage_of_nodes_to_score: int = 0,
        feature_gates: str = "",
    ) -> None:
        """``feature_gates``: koord-scheduler's ``--feature-gates`` text (``SkipReservationFitsNode=true``),
        which the plugins read through ``Handle.feature_enabled``."""
        from koord_framework.featuregates import gates_for

        classes: list[type[Plugin]] = []
        args: dict[str, Any] = {}
        for given in plugins:
            if isinstance(given, tuple):
                klass, raw = given
                args[klass.name] = raw
            else:
                klass = given
            classes.append(klass)
        self.classes = classes
        extra: list[type[Plugin]] = []
        if not any(issubclass(c, QueueSortPlugin) for c in classes):
            extra.append(HarnessQueueSort)
        if not any(issubclass(c, BindPlugin) for c in classes):
            extra.append(HarnessBinder)
        self.cluster = cluster if cluster is not None else MemoryCluster(VirtualClock(_start_time(now)))
        if profile is None:
            spec = ProfileSpec(scheduler_name, PluginLayout.every_point([*classes, *extra]), args)
        else:
            spec = self._resolve(profile, [*classes, *extra], args, scheduler_name)
        self.scheduler = Scheduler(
            self.cluster,
            [spec],
            seed=seed,
            explain=True,
            record_outcomes=True,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            feature_gates=gates_for("scheduler").parse(feature_gates),
        )
        self.scheduler.start()
        self.profile_name = spec.scheduler_name
        self._states: dict[str, CycleState] = {}

    @staticmethod
    def _resolve(
        profile: Mapping[str, Any], classes: list[type[Plugin]], args: Mapping[str, Any], scheduler_name: str
    ) -> ProfileSpec:
        from koord_framework.config.scheduler import KubeSchedulerProfile, effective_plugins

        raw = dict(profile)
        raw.setdefault("schedulerName", scheduler_name)
        prof = KubeSchedulerProfile.model_validate(raw)
        eff = effective_plugins(
            prof, PluginRegistry.from_classes("scheduler", classes), source="<harness profile>"
        )
        merged: dict[str, Any] = dict(args)
        for entry in prof.plugin_config:
            merged[entry.name] = entry.args
        return ProfileSpec(prof.scheduler_name or scheduler_name, PluginLayout.from_effective(eff), merged)

    # --- access ---------------------------------------------------------------------------------------
    @property
    def framework(self) -> Framework:
        return self.scheduler.frameworks[self.profile_name]

    @property
    def handle(self) -> SchedulerHandle:
        return self.scheduler.handles[self.profile_name]

    @property
    def clock(self) -> VirtualClock:
        clock = self.cluster.clock
        assert isinstance(clock, VirtualClock)
        return clock

    def plugin(self, name: str) -> Plugin:
        """The instance of the plugin called ``name`` in the harness profile."""
        return self.framework.plugin(name)

    def add(self, *manifests: Mapping[str, Any]) -> None:
        """Create objects in the cluster (nodes, pods — bound when ``spec.nodeName`` is set —, CRDs, ...)."""
        for obj in manifests:
            self.cluster.create(dict(obj))

    def node_info(self, name: str) -> NodeInfo:
        self._refresh()
        ni = self.scheduler.snapshot.get(name)
        if ni is None:
            raise KeyError(f"no node {name!r} in the harness cluster")
        return ni

    # --- one extension point at a time --------------------------------------------------------------------
    def filter(self, pod: Mapping[str, Any] | PodInfo, node_name: str) -> Status:
        """PreFilter then Filter of every harness plugin on one node, as the framework runs them."""
        p = self._pod(pod)
        state, s, allowed = self._pre_filter(p)
        if not s.is_success:
            return s
        if allowed is not None and node_name not in allowed:
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("node(s) didn't satisfy the PreFilter result",)
            )
        return self.framework.run_filter(state, p, self.node_info(node_name))

    def score(self, pod: Mapping[str, Any] | PodInfo, node_name: str, plugin: str | None = None) -> int:
        """The raw Score of ``plugin`` (default: the first given Score plugin) for one node.

        PreFilter and PreScore run first (PreScore over the nodes that pass Filter); a plugin whose PreScore
        returned Skip scores 0.
        """
        p = self._pod(pod)
        name = self._score_plugin(plugin)
        state, _ = self._pre_score(p)
        if name in state.skip_score:
            return 0
        inst = self.framework.plugin(name)
        assert isinstance(inst, ScorePlugin)
        value, s = inst.score(state, p, self.node_info(node_name))
        if not s.is_success:
            raise AssertionError(f"{name}.score failed on {node_name}: {s}")
        return int(value)

    def normalized_scores(
        self, pod: Mapping[str, Any] | PodInfo, plugin: str | None = None
    ) -> dict[str, int]:
        """Node → score of ``plugin`` after NormalizeScore (before weights) over the feasible nodes."""
        p = self._pod(pod)
        name = self._score_plugin(plugin)
        state, nodes = self._pre_score(p)
        if name in state.skip_score or not nodes:
            return {}
        rows = np.fromiter((ni.row for ni in nodes), dtype=np.int64, count=len(nodes))
        outcome, s = self.framework.run_score(state, p, rows, nodes, explain=True, only={name})
        if outcome is None or outcome.plugins is None:
            raise AssertionError(f"scoring with {name} failed: {s}")
        norm = outcome.plugins[name].normalized
        return {ni.name: int(v) for ni, v in zip(nodes, norm.tolist())}

    def reserve(self, pod: Mapping[str, Any] | PodInfo, node_name: str) -> Status:
        """Assume the pod on the node and run every Reserve plugin (after PreFilter, as in a cycle)."""
        p = self._pod(pod)
        state, s, _ = self._pre_filter(p)
        assumed = _on_node(p, node_name)
        self.scheduler.cache.assume_pod(assumed)
        self._states[p.uid] = state
        s = self.framework.run_reserve(state, assumed, node_name)
        return s

    def unreserve(self, pod: Mapping[str, Any] | PodInfo, node_name: str) -> None:
        """Every Reserve plugin's Unreserve (reverse order) and forget the assumed pod."""
        p = self._pod(pod)
        state = self._states.pop(p.uid, None) or CycleState()
        assumed = _on_node(p, node_name)
        self.framework.run_unreserve(state, assumed, node_name)
        self.scheduler.cache.forget_pod(assumed)

    def schedule_one(self, pod: Mapping[str, Any] | PodInfo) -> ScheduleResult:
        """A full scheduling cycle (and binding cycle) for this pod; creates it in the cluster if needed."""
        p = self._ensure_pending(pod)
        info = self.scheduler.queue.take(p.uid)
        if info is None:
            raise AssertionError(f"pod {p.key} is not waiting to be scheduled (bound, in flight or not ours)")
        self.scheduler._scheduling_cycle(info)
        self.scheduler._drain_bindings()
        return self.result(p)

    def run_until_idle(self) -> int:
        """Schedule every pending pod the way ``koord simulate`` does (virtual time moves as needed)."""
        return self.scheduler.run_until_idle()

    def result(self, pod: Mapping[str, Any] | PodInfo) -> ScheduleResult:
        """The latest outcome of a pod."""
        p = self._pod(pod)
        o = self.scheduler.outcomes.get(p.uid)
        if o is None:
            raise KeyError(f"pod {p.key} has not been tried yet")
        status = Status(o.code, (o.message,) if o.message else (), o.plugin)
        scores = {
            node: {pl: PluginScore(*v) for pl, v in per.items()} for node, per in (o.scores or {}).items()
        }
        return ScheduleResult(
            o.node,
            status,
            o.status,
            o.message,
            dict(o.filter or {}),
            scores,
            dict(o.totals or {}),
            dict(o.annotations),
        )

    # --- conformance ----------------------------------------------------------------------------------
    def check_vector_forms(self, pod: Mapping[str, Any] | PodInfo, plugin: str) -> None:
        """Assert that ``filter_all``/``score_all`` of ``plugin`` agree with ``filter``/``score`` per node."""
        p = self._pod(pod)
        inst = self.framework.plugin(plugin)
        state, s, _ = self._pre_filter(p)
        if not s.is_success:
            return
        snap = self.scheduler.snapshot
        rows, nodes = snap.rows, snap.node_list
        if isinstance(inst, VectorFilter) and plugin not in state.skip_filter:
            mask = np.asarray(inst.filter_all(state, p, snap.table, rows), dtype=bool)
            for ni, ok in zip(nodes, mask.tolist()):
                single = inst.filter(state, p, ni)  # type: ignore[attr-defined]
                if bool(ok) != single.is_success:
                    raise AssertionError(
                        f"{plugin}: filter_all says {'pass' if ok else 'fail'} on {ni.name}, "
                        f"filter says {single}"
                    )
            if isinstance(inst, VectorFilterStatuses) and not mask.all():
                rejected = [ni for ni, ok in zip(nodes, mask.tolist()) if not ok]
                rrows = np.fromiter((ni.row for ni in rejected), dtype=np.int64, count=len(rejected))
                bulk = list(inst.filter_statuses(state, p, snap.table, rrows))
                for ni, got in zip(rejected, bulk, strict=True):
                    want = inst.filter(state, p, ni)  # type: ignore[attr-defined]
                    if (got.code, got.reasons) != (want.code, want.reasons):
                        raise AssertionError(
                            f"{plugin}: filter_statuses gives {got} on {ni.name}, filter gives {want}"
                        )
        if isinstance(inst, VectorScore):
            state2, feasible = self._pre_score(p)
            if plugin in state2.skip_score or not feasible:
                return
            frows = np.fromiter((ni.row for ni in feasible), dtype=np.int64, count=len(feasible))
            vec = np.asarray(inst.score_all(state2, p, snap.table, frows), dtype=np.int64)
            for ni, v in zip(feasible, vec.tolist()):
                single, st = inst.score(state2, p, ni)  # type: ignore[attr-defined]
                if not st.is_success or int(single) != int(v):
                    raise AssertionError(
                        f"{plugin}: score_all gives {v} on {ni.name}, score gives {single} ({st})"
                    )

    # --- internals ----------------------------------------------------------------------------------
    def _refresh(self) -> None:
        self.scheduler.cache.update_snapshot(self.scheduler.snapshot)

    def _pod(self, pod: Mapping[str, Any] | PodInfo) -> PodInfo:
        if isinstance(pod, PodInfo):
            return pod
        meta = pod.get("metadata") or {}
        cached = self.scheduler.pod_cache.get(meta.get("namespace") or "default", meta.get("name") or "")
        if cached is not None and (not meta.get("uid") or cached.uid == meta.get("uid")):
            return cached
        return PodInfo.from_manifest(pod)

    def _ensure_pending(self, pod: Mapping[str, Any] | PodInfo) -> PodInfo:
        if isinstance(pod, PodInfo):
            return pod
        meta = pod.get("metadata") or {}
        try:
            self.cluster.get("Pod", meta.get("name") or "", meta.get("namespace") or "default")
        except NotFoundError:
            self.cluster.create(dict(pod))
        return self._pod(pod)

    def _pre_filter(self, p: PodInfo) -> tuple[CycleState, Status, set[str] | None]:
        self._refresh()
        state = CycleState()
        state.record_metrics = False
        pre, s = self.framework.run_pre_filter(state, p)
        allowed = set(pre.node_names) if pre is not None and pre.node_names is not None else None
        return state, s, allowed

    def _pre_score(self, p: PodInfo) -> tuple[CycleState, list[NodeInfo]]:
        state, s, allowed = self._pre_filter(p)
        if not s.is_success:
            raise AssertionError(f"PreFilter rejected pod {p.key}: {s}")
        nodes = [
            ni
            for ni in self.scheduler.snapshot.node_list
            if (allowed is None or ni.name in allowed) and self.framework.run_filter(state, p, ni).is_success
        ]
        if nodes:
            s = self.framework.run_pre_score(state, p, nodes)
            if not s.is_success:
                raise AssertionError(f"PreScore failed for pod {p.key}: {s}")
        return state, nodes

    def _score_plugin(self, plugin: str | None) -> str:
        if plugin is not None:
            return plugin
        for klass in self.classes:
            if issubclass(klass, ScorePlugin):
                return klass.name
        raise AssertionError("no Score plugin among the harness plugins")


def _on_node(pod: PodInfo, node_name: str) -> PodInfo:
    import dataclasses

    return dataclasses.replace(pod, node_name=node_name)
