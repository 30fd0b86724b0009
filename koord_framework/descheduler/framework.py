"""One descheduler profile: its plugins instantiated once, the evictor proxy, and the plugin runners.

Koordinator's ``pkg/descheduler/framework/runtime`` (``frameworkImpl`` and ``evictorProxy``):

* each plugin the profile names at any point is constructed once, with its validated args and the handle;
* a plugin named at a point must implement that point's ABC, and may be named there once;
* exactly one Evict plugin ("no evict plugin is enabled" / "only one evict plugin can be enabled");
* ``evictor().evict(pod)``: the limiter must allow it; in the framework's dry run nothing is called and the
  eviction counts as done; otherwise the Evict plugin decides; a success is counted by the limiter.

Every eviction request lands in the round report with its plugin, reason and result, and in the
``koord_descheduler_pods_evicted_total`` counter.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from koord_framework.api.objects import NodeRecord, PodInfo
from koord_framework.cluster.clock import Clock
from koord_framework.cluster.port import ClusterPort
from koord_framework.descheduler.handle import EvictionEntry, Services
from koord_framework.descheduler.interface import (
    PROFILE_KEYS,
    BackgroundPlugin,
    BalancePlugin,
    DeschedulePlugin,
    DeschedulerPlugin,
    EvictOptions,
    Evictor,
    EvictPlugin,
    FilterPlugin,
    Handle,
    PreEvictionFilterPlugin,
    Status,
)
from koord_framework.descheduler.interface import EvictionFailed as EvictionFailed  # public there
from koord_framework.descheduler.node_usage import NodeMetricInfo, NodePods
from koord_framework.errors import KoordError, Problem, ValidationError
from koord_framework.plugin import Plugin, PluginArgs, close_plugins

if TYPE_CHECKING:
    from koord_framework.config.loader import ResolvedDeschedulerProfile


@dataclass(frozen=True)
class ProfileSpec:
    """A profile ready to instantiate: plugin names per point, their classes and validated args."""

    name: str
    points: Mapping[str, tuple[str, ...]]
    """``deschedule`` / ``balance`` / ``evict`` / ``filter`` -> plugin names in call order."""
    classes: Mapping[str, type[Plugin]]
    args: Mapping[str, PluginArgs] = field(default_factory=dict)
    node_selector: Mapping[str, Any] | None = None
    """A LabelSelector mapping; None means every node."""

    @classmethod
    def from_resolved(cls, profile: ResolvedDeschedulerProfile) -> ProfileSpec:
        """From the configuration loader's resolved profile."""
        selector = None
        if profile.node_selector is not None:
            sel = profile.node_selector
            selector = {
                "matchLabels": dict(sel.match_labels),
                "matchExpressions": [
                    {"key": r.key, "operator": r.operator, "values": list(r.values)}
                    for r in sel.match_expressions
                ],
            }
        return cls(
            name=profile.name,
            points=dict(profile.plugins.points),
            classes=dict(profile.plugins.classes),
            args=dict(profile.args),
            node_selector=selector,
        )


class _EvictorProxy(Evictor):
    def __init__(self, framework: DeschedulerFramework) -> None:
        self._fw = framework

    def filter(self, pod: PodInfo) -> bool:
        for plugin in self._fw.filter_plugins:
            if not plugin.filter(pod):
                self._fw.services.refused(pod, plugin, "Filter")
                return False
        return True

    def pre_eviction_filter(self, pod: PodInfo) -> bool:
        for plugin in self._fw.pre_eviction_filter_plugins:
            if not plugin.pre_eviction_filter(pod):
                self._fw.services.refused(pod, plugin, "PreEvictionFilter")
                return False
        return True

    def evict(self, pod: PodInfo, options: EvictOptions) -> bool:
        fw = self._fw
        services = fw.services
        plugin_name = options.plugin_name or fw.current_plugin
        if plugin_name != options.plugin_name:
            options = EvictOptions(plugin_name, options.reason, options.delete_options)

        def record(result: str, metric: str, message: str = "") -> None:
            entry = EvictionEntry(
                pod=pod.key,
                node=pod.node_name,
                plugin=plugin_name,
                reason=options.reason,
                profile=fw.profile_name,
                result=result,  # type: ignore[arg-type]
                message=message,
            )
            if result in ("evicted", "dry-run"):
                services.report.evictions.append(entry)
            else:
                services.report.failures.append(entry)
            services.metrics.count_eviction(metric, plugin_name, pod.namespace, pod.node_name)

        if services.stopping.is_set():
            record("refused", "limited", "the descheduler is stopping: no new evictions")
            return False
        if not services.limiter.allow_evict(pod):
            record("refused", "limited", "eviction limit per node, namespace or cycle reached")
            return False
        if services.dry_run:
            record("dry-run", "dry-run")
        else:
            evict_plugin = fw.evict_plugin
            try:
                done = evict_plugin.evict(pod, options)
                message = "" if done else f"{fw.evict_plugin_name} refused the eviction"
            except EvictionFailed as err:
                done, message = False, str(err)
            except KoordError as err:
                done, message = False, f"{type(err).__name__}: {err}"
            if not done:
                record("failed", "error", message)
                return False
            record("evicted", "success")
        services.limiter.done(pod)
        return True


class DeschedulerFramework(Handle):
    """A profile's plugins and the handle they were given."""

    def __init__(self, spec: ProfileSpec, services: Services, *, where: str = "profiles[0]") -> None:
        self.spec = spec
        self.profile_name = spec.name
        self.services = services
        self.where = where
        self.current_plugin = ""
        self._evictor = _EvictorProxy(self)
        self.plugins: dict[str, DeschedulerPlugin] = {}
        self.closed = False
        self.deschedule_plugins: list[DeschedulePlugin] = []
        self.balance_plugins: list[BalancePlugin] = []
        self.filter_plugins: list[FilterPlugin] = []
        self.pre_eviction_filter_plugins: list[PreEvictionFilterPlugin] = []
        self.evict_plugins: list[EvictPlugin] = []
        self._build()

    def close(self) -> None:
        """Every plugin's ``close()``, once, in reverse construction order."""
        if not self.closed:
            self.closed = True
            close_plugins(self.plugins, f"descheduler profile {self.profile_name}")

    def _component_slots(self) -> dict[Any, Any]:
        return self.services.shared_slots

    # --- construction ---------------------------------------------------------------------------------
    def _build(self) -> None:
        problems: list[Problem] = []
        needed: list[str] = []
        for key in PROFILE_KEYS:
            for name in self.spec.points.get(key, ()):
                if name not in needed:
                    needed.append(name)
        for key in self.spec.points:
            if key not in PROFILE_KEYS:
                problems.append(
                    Problem(
                        f"{self.where}.plugins.{key}",
                        f"unknown extension point; expected one of {', '.join(PROFILE_KEYS)}",
                    )
                )
        for name in needed:
            cls = self.spec.classes.get(name)
            at = f"{self.where}.pluginConfig[{name}].args"
            if cls is None:
                problems.append(Problem(f"{self.where}.plugins", f'plugin "{name}" is not installed'))
                continue
            if not issubclass(cls, DeschedulerPlugin):
                problems.append(
                    Problem(f"{self.where}.plugins", f'plugin "{name}" is not a descheduler plugin')
                )
                continue
            try:
                args = self.spec.args.get(name) or cls.parse_args(None)
                self.plugins[name] = cls(args, self)
            except KoordError:
                raise
            except Exception as err:  # a plugin refusing its args at construction
                problems.append(Problem(at, f"initializing plugin {name!r}: {err}"))
        if problems:
            raise ValidationError(f"descheduler profile {self.profile_name!r}", problems)
        abcs: dict[str, type[Any]] = {
            "deschedule": DeschedulePlugin,
            "balance": BalancePlugin,
            "evict": EvictPlugin,
            "filter": FilterPlugin,
        }
        lists: dict[str, list[Any]] = {
            "deschedule": self.deschedule_plugins,
            "balance": self.balance_plugins,
            "evict": self.evict_plugins,
            "filter": self.filter_plugins,
        }
        for key, abc_cls in abcs.items():
            seen: set[str] = set()
            for i, name in enumerate(self.spec.points.get(key, ())):
                plugin = self.plugins[name]
                at = f"{self.where}.plugins.{key}.enabled[{i}]"
                if not isinstance(plugin, abc_cls):
                    problems.append(Problem(at, f'plugin "{name}" does not extend {abc_cls.__name__}'))
                elif name in seen:
                    problems.append(
                        Problem(at, f'plugin "{name}" already registered as "{abc_cls.__name__}"')
                    )
                else:
                    seen.add(name)
                    lists[key].append(plugin)
                    if key == "filter" and isinstance(plugin, PreEvictionFilterPlugin):
                        self.pre_eviction_filter_plugins.append(plugin)
        if not problems:
            if not self.evict_plugins:
                problems.append(Problem(f"{self.where}.plugins.evict", "no evict plugin is enabled"))
            elif len(self.evict_plugins) > 1:
                problems.append(
                    Problem(f"{self.where}.plugins.evict", "only one evict plugin can be enabled")
                )
        if problems:
            raise ValidationError(f"descheduler profile {self.profile_name!r}", problems)

    @property
    def evict_plugin(self) -> EvictPlugin:
        return self.evict_plugins[0]

    @property
    def evict_plugin_name(self) -> str:
        return self.spec.points["evict"][0]

    @property
    def background_plugins(self) -> list[BackgroundPlugin]:
        return [p for p in self.plugins.values() if isinstance(p, BackgroundPlugin)]

    # --- running --------------------------------------------------------------------------------------
    def run_deschedule_plugins(self, nodes: Sequence[NodeRecord]) -> list[str]:
        return self._run(
            "Deschedule", list(zip(self.spec.points.get("deschedule", ()), self.deschedule_plugins)), nodes
        )

    def run_balance_plugins(self, nodes: Sequence[NodeRecord]) -> list[str]:
        return self._run(
            "Balance", list(zip(self.spec.points.get("balance", ()), self.balance_plugins)), nodes
        )

    def _run(self, point: str, plugins: list[tuple[str, Any]], nodes: Sequence[NodeRecord]) -> list[str]:
        errors: list[str] = []
        histogram = self.services.metrics.plugin_duration
        for name, plugin in plugins:
            self.current_plugin = name
            start = time.perf_counter()
            outcome = "Success"
            try:
                status: Status | None = (
                    plugin.deschedule(nodes) if point == "Deschedule" else plugin.balance(nodes)
                )
                if status is not None and status.error is not None:
                    outcome = "Error"
                    errors.append(f"{name}: {status.error}")
            except Exception as err:
                outcome = "Error"
                errors.append(f"{name}: {type(err).__name__}: {err}")
            finally:
                self.current_plugin = ""
                histogram.labels(name, point, outcome).observe(time.perf_counter() - start)
        return errors

    # --- Handle -----------------------------------------------------------------------------------
    @property
    def cluster(self) -> ClusterPort:
        return self.services.cluster

    @property
    def clock(self) -> Clock:
        return self.services.clock

    @property
    def metrics(self) -> CollectorRegistry:
        return self.services.registry

    @property
    def dry_run(self) -> bool:
        return self.services.dry_run

    @property
    def instance_name(self) -> str:
        return self.services.instance_name

    @property
    def descheduling_interval(self) -> float:
        """Seconds between cycles (0: one cycle); LowNodeLoad keeps its detectors at least this long."""
        return self.services.descheduling_interval

    @property
    def node_selector(self) -> Mapping[str, Any] | None:
        return self.spec.node_selector

    def evictor(self) -> Evictor:
        return self._evictor

    def pods_on_node(self, node_name: str) -> list[PodInfo]:
        return self.services.cache.pods_on_node(node_name)

    def ready_nodes(self, label_selector: str = "") -> list[NodeRecord]:
        return self.services.ready_nodes(label_selector)

    def node(self, name: str) -> NodeRecord | None:
        return self.services.cache.node(name)

    def node_metric(self, name: str) -> NodeMetricInfo | None:
        return self.services.cache.node_metric(name)

    def node_pods(self, node_name: str) -> NodePods:
        return self.services.cache.node_pods(node_name)

    def pods_owned_by(self, owner_uid: str) -> list[PodInfo]:
        return self.services.cache.pods_owned_by(owner_uid)

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        return self.services.cache.namespace_labels(name)

    def list_objects(self, kind: str, namespace: str | None = None) -> list[Mapping[str, Any]]:
        return list(self.services.cache.informer.list(kind, namespace))

    def report_nodes(self, plugin: str, high: Sequence[str], low: Sequence[str]) -> None:
        self.services.report.add_nodes(high, low)
