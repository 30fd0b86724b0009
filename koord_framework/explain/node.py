"""``koord explain node`` and ``koord explain quota``: the sections the enabled plugins contribute.

The scheduler of the configuration is built over the copy of the cluster and started (its caches and the
plugins' own caches fill from the objects), nothing is scheduled, and every plugin of its profiles that
implements a hook of ``koord_framework.explain.hooks`` is asked for its section. For a node, koord-manager's
installed node-resource calculators follow, on the node's colocation strategy from the cluster's
``slo-controller-config``. A hook that raises leaves a section saying so; the other sections still print.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from koord_framework.api.resources import format_resource_list
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.config.loader import LoadedSchedulerConfig
from koord_framework.errors import KoordError
from koord_framework.explain.hooks import ExplainSection, NodeExplainer, NodeResourceExplainer, QuotaExplainer
from koord_framework.explain.source import unknown
from koord_framework.manager.noderesource import GROUP, NodeResourcePlugin, ResourceMetrics
from koord_framework.plugin import Plugin
from koord_framework.scheduler.scheduler import Scheduler

__all__ = ["Explanation", "SectionResult", "explain_node", "explain_quota"]


@dataclass
class SectionResult:
    plugin: str
    section: ExplainSection | None
    error: str = ""
    """The hook's exception, when it raised (the section is then None)."""

    def to_dict(self) -> dict[str, Any]:
        if self.section is None:
            return {"plugin": self.plugin, "title": self.plugin, "lines": [], "data": {}, "error": self.error}
        return {
            "plugin": self.plugin,
            "title": self.section.title or self.plugin,
            "lines": list(self.section.lines),
            "data": dict(self.section.data),
            "error": "",
        }


@dataclass
class Explanation:
    kind: str
    """``node`` or ``quota``."""
    name: str
    sections: list[SectionResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "sections": [s.to_dict() for s in self.sections]}


def _ask(plugin: str, call: Callable[[], ExplainSection | None]) -> SectionResult | None:
    try:
        section = call()
    except Exception as exc:  # a plugin's hook must not take the other sections down
        return SectionResult(plugin, None, f"{type(exc).__name__}: {exc}")
    return None if section is None else SectionResult(plugin, section)


def _plugins(sched: Scheduler) -> Iterator[tuple[str, Plugin]]:
    """Every plugin instance of every profile, once (profiles may share one)."""
    seen: set[int] = set()
    for fw in sched.frameworks.values():
        for name, plugin in fw.plugins.items():
            if id(plugin) not in seen:
                seen.add(id(plugin))
                yield name, plugin


def _started(cluster: MemoryCluster, config: LoadedSchedulerConfig) -> Scheduler:
    sched = Scheduler.from_config(cluster, config, seed=0)
    sched.start()
    sched.cache.update_snapshot(sched.snapshot)
    return sched


# --- node -------------------------------------------------------------------------------------------------
def explain_node(cluster: MemoryCluster, config: LoadedSchedulerConfig, name: str) -> Explanation:
    """The node as the scheduler sees it, then each enabled plugin's section, then koord-manager's."""
    if cluster.try_get("Node", name) is None:
        nodes, _ = cluster.list("Node")
        raise unknown("node", name, [n["metadata"]["name"] for n in nodes])
    out = Explanation("node", name)
    sched = _started(cluster, config)
    try:
        out.sections.append(SectionResult("scheduler", _node_summary(sched, name)))
        for plugin_name, plugin in _plugins(sched):
            if isinstance(plugin, NodeExplainer):
                result = _ask(plugin_name, partial(plugin.explain_node, name))
                if result is not None:
                    out.sections.append(result)
    finally:
        sched.close()
    out.sections.extend(_manager_sections(cluster, name))
    return out


def _node_summary(sched: Scheduler, name: str) -> ExplainSection:
    ni = sched.snapshot.get(name)
    if ni is None:
        return ExplainSection("Node", [f"{name}: not in the scheduler's snapshot"], {"inSnapshot": False})
    requested = {k: v for k, v in ni.requested.items() if v}
    alloc = format_resource_list(dict(ni.allocatable))
    req = format_resource_list(requested)
    node = ni.node
    taints = [f"{t.key}={t.value}:{t.effect}" for t in node.taints]
    lines = [
        f"allocatable: {_pairs(alloc)}",
        f"requested:   {_pairs(req) or '-'}  ({len(ni.pods)} pods)",
    ]
    if taints:
        lines.append(f"taints: {', '.join(taints)}")
    if node.unschedulable:
        lines.append("unschedulable (cordoned)")
    return ExplainSection(
        "Node",
        lines,
        {
            "allocatable": alloc,
            "requested": req,
            "pods": sorted(p.key for p in ni.pods.values()),
            "taints": taints,
            "unschedulable": node.unschedulable,
        },
    )


def _pairs(resources: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in resources.items())


def _calculators() -> list[tuple[str, NodeResourcePlugin[Any]]]:
    from koord_framework.registry import PluginRegistry

    out: list[tuple[str, NodeResourcePlugin[Any]]] = []
    for name, cls in sorted(PluginRegistry.discover(GROUP).load_all().items()):
        if isinstance(cls, type) and issubclass(cls, NodeResourcePlugin):
            out.append((name, cls()))
    return out


def _manager_sections(cluster: MemoryCluster, name: str) -> list[SectionResult]:
    """koord-manager's node-resource calculators on the node (its colocation strategy, pods, NodeMetric)."""
    from koord_framework.manager.sloconfig import CONFIG_MAP_NAME, DEFAULT_CONFIG_NAMESPACE, SLOConfig

    calculators = _calculators()
    if not calculators:
        return []
    node = cluster.get("Node", name)
    slo = SLOConfig()
    cm = cluster.try_get("ConfigMap", CONFIG_MAP_NAME, DEFAULT_CONFIG_NAMESPACE)
    problems = slo.update((cm or {}).get("data") or {})
    labels = (node.get("metadata") or {}).get("labels") or {}
    strategy = slo.colocation(labels)
    pods_all, _ = cluster.list("Pod")
    pods = [p for p in pods_all if (p.get("spec") or {}).get("nodeName") == name]
    metric = cluster.try_get("NodeMetric", name)
    metrics = ResourceMetrics(metric, cluster.clock.now())
    results: list[SectionResult] = []
    for plugin_name, calc in calculators:
        title = f"{plugin_name} (koord-manager)"
        if not strategy.enable:
            lines = ["colocation is not enabled for this node (colocation-config enable=false): its"]
            lines.append(f"resources are reset ({', '.join(calc.resource_names)})")
            results.append(SectionResult(plugin_name, ExplainSection(title, lines, {"enabled": False})))
            continue
        result = _ask(plugin_name, partial(_calculator_section, title, calc, strategy, node, pods, metrics))
        if result is not None:
            if result.section is not None:
                result.section.title = result.section.title or title
                result.section.lines += [f"slo-controller-config: {p}" for p in problems]
            results.append(result)
    return results


def _calculator_section(
    title: str, calc: NodeResourcePlugin[Any], strategy: Any, node: Any, pods: Any, metrics: ResourceMetrics
) -> ExplainSection:
    """The calculator's own section when it has the hook, else the items ``calculate`` returns."""
    if isinstance(calc, NodeResourceExplainer):
        return calc.explain_resources(strategy, node, pods, metrics)
    return _items_section(title, calc, strategy, node, pods, metrics)


def _items_section(
    title: str, calc: NodeResourcePlugin[Any], strategy: Any, node: Any, pods: Any, metrics: ResourceMetrics
) -> ExplainSection:
    items = calc.calculate(strategy, node, pods, metrics)
    lines, data = [], []
    for item in items:
        value = "reset" if item.reset else str(item.quantity)
        lines.append(f"{item.name}: {value}" + (f"  ({item.message})" if item.message else ""))
        data.append(
            {"name": item.name, "quantity": item.quantity, "reset": item.reset, "message": item.message}
        )
    return ExplainSection(title, lines, {"items": data})


# --- quota ------------------------------------------------------------------------------------------------
def explain_quota(cluster: MemoryCluster, config: LoadedSchedulerConfig, name: str) -> Explanation:
    """Each enabled plugin's section about ElasticQuota ``name`` (the ElasticQuota plugin's runtime)."""
    if "ElasticQuota" not in cluster.kinds:
        raise KoordError("no installed distribution serves the ElasticQuota kind (koord-plugin-elasticquota)")
    quotas, _ = cluster.list("ElasticQuota")
    names = sorted({str((q.get("metadata") or {}).get("name") or "") for q in quotas})
    if name not in names:
        raise unknown("quota", name, names)
    out = Explanation("quota", name)
    sched = _started(cluster, config)
    try:
        explainers = [(n, p) for n, p in _plugins(sched) if isinstance(p, QuotaExplainer)]
        if not explainers:
            raise KoordError(
                "no plugin of the scheduler configuration explains quotas"
                " (enable ElasticQuota in the profile)"
            )
        for plugin_name, plugin in explainers:
            assert isinstance(plugin, QuotaExplainer)
            result = _ask(plugin_name, partial(plugin.explain_quota, name))
            if result is not None:
                out.sections.append(result)
    finally:
        sched.close()
    return out
