"""The plugin API: the framework modules a plugin (or a family library) may import.

Everything else under ``koord_framework`` is the runtime's own and may change without notice. The split is
pytest's ``pytest`` / ``_pytest`` one, written down instead of encoded in underscores: this table is the
source of truth, ``tools/importlinter_config.py`` turns it into the import-linter contract "plugins import
only the public API" (run by ``make imports``, part of ``make test``), and ``docs/writing-plugins.md``
lists the same modules (``tests/docs/test_public_api.py`` checks both against this table).

An entry names one module; ``name.**`` names a package and every module below it. An entry may name a
module that does not exist yet (a public module another change is adding): the contract generator keeps
only the modules it finds on disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

PUBLIC_MODULES: dict[str, str] = {
    # --- every component ---
    "koord_framework.plugin": "Plugin, PluginArgs, NoArgs, ExtensionPoint: the base of every plugin class",
    "koord_framework.errors": "the exceptions plugins raise and catch (ClusterError, NotFoundError, ...)",
    "koord_framework.handle": "BaseHandle: cluster, clock, metrics registry, shared(key, factory)",
    "koord_framework.api.**": "objects (PodInfo, NodeRecord), selectors, resources, qos, quantity, constants",
    "koord_framework.cluster.port": "ClusterPort, Informer, WatchEvent, EventRecord",
    "koord_framework.cluster.events": "EventRecorder/EventCorrelator (client-go's), BAD_ANNOTATIONS",
    "koord_framework.cluster.clock": "Clock, time parsing and formatting",
    "koord_framework.cluster.manifests": "load_manifests: read a cluster folder (a plugin's CLI subcommand)",
    "koord_framework.cluster.records": "rebound: a pod record after a bind without parsing the pod again",
    "koord_framework.cluster.kinds": "KindInfo, KindValidator: how a distribution contributes a CRD kind",
    "koord_framework.cluster.field_checks": "FieldChecks: strict field checks for a kind's validator",
    "koord_framework.config.common": "args building blocks: Duration, LabelSelector, ConfigModel",
    "koord_framework.testing.**": "the testing kit: builders, harnesses, conformance (tests)",
    "koord_framework.docs.**": "README checks and args tables (a plugin's own tests)",
    "koord_framework.explain.hooks": "ExplainSection, the koord explain hooks plugins implement",
    # --- scheduler ---
    "koord_framework.scheduler.interface": "extension points, Handle, SnapshotView, vector forms",
    "koord_framework.scheduler.status": "Status, Code, score bounds",
    "koord_framework.scheduler.cycle_state": "CycleState",
    "koord_framework.scheduler.nodeinfo": "NodeInfo and request helpers",
    "koord_framework.scheduler.table": "NodeTable and its array types",
    "koord_framework.scheduler.constant_arrays": "shared read-only all-pass / filled arrays",
    "koord_framework.scheduler.frameworkext": "Koordinator's framework extensions",
    "koord_framework.scheduler.topologymanager": "the NUMA topology manager",
    # --- descheduler ---
    "koord_framework.descheduler.interface": "extension points, Handle, Evictor, EvictionFailed",
    "koord_framework.descheduler.args": "shared args models (Namespaces, PriorityThreshold) and their checks",
    "koord_framework.descheduler.selectors": "the label-selector string parser descheduler args use",
    "koord_framework.descheduler.node_usage": "NodeMetric usage per node and pod, thresholds as matrices",
    # --- koordlet ---
    "koord_framework.koordlet.qos": "QOSStrategy, QOSContext, IntervalArgs",
    "koord_framework.koordlet.states": "the node's and pods' states a strategy reads",
    "koord_framework.koordlet.nodeslo": "NodeSLO and Koordinator's defaults merge",
    "koord_framework.koordlet.cgroups": "cgroup v1/v2 layout and typed reads",
    "koord_framework.koordlet.executor": "ResourceExecutor: validated, audited cgroup and file writes",
    "koord_framework.koordlet.system": "host facts (CPU topology, kernel features)",
    "koord_framework.koordlet.helpers": "helpers strategies share (resource arithmetic, pod filters)",
    "koord_framework.koordlet.cpuset": "cpuset list parsing and formatting",
    "koord_framework.koordlet.eviction": "EvictTask, ReleaseTarget: asking the evictor",
    "koord_framework.koordlet.metrics.cache": "MetricCache: the node's and pods' recent usage",
    "koord_framework.koordlet.runtimehooks.**": "RuntimeHook, hookimpl, requests/responses, HookManager",
    # --- manager ---
    "koord_framework.manager.noderesource": (
        "NodeResourcePlugin (pre_update), ResourceItem, ResourceMetrics, NodeResourceContext: calculators"
    ),
    "koord_framework.manager.controllerplugin": (
        "ManagerController, ControllerContext: a controller koord-manager runs (--controllers)"
    ),
    "koord_framework.manager.colocation": "ColocationStrategy: the colocation-config model and its merge",
    "koord_framework.manager.nodestrategies": "NodeStrategies[S]: an slo-controller-config key per node",
    "koord_framework.manager.webhook.admission": (
        "AdmissionHandler, AdmissionRequest, Denied, Lister, Writer: webhooks"
    ),
}
"""Public module (or ``package.**``) → what a plugin finds there (the list ``docs/writing-plugins.md``
shows)."""


def is_public(module: str, entries: Iterable[str] = PUBLIC_MODULES) -> bool:
    """Whether ``module`` is part of the plugin API."""
    for entry in entries:
        if entry.endswith(".**"):
            base = entry[:-3]
            if module == base or module.startswith(base + "."):
                return True
        elif module == entry:
            return True
    return False


def framework_modules(root: Path | None = None) -> list[str]:
    """Every module of the ``koord_framework`` package found on disk (packages by their ``__init__``)."""
    base = root if root is not None else Path(__file__).resolve().parent
    found = []
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(base.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found.append(".".join(parts))
    return found


def private_modules(root: Path | None = None) -> list[str]:
    """The smallest set of modules and packages that covers everything private: what the import contract
    forbids plugins. A package holding a public module is not listed itself (forbidding it would forbid
    its public children); its private children are."""
    modules = framework_modules(root)
    public = [m for m in modules if is_public(m)]
    ancestors = {".".join(p.split(".")[:i]) for p in public for i in range(1, p.count(".") + 1)}
    private = [m for m in modules if not is_public(m) and m not in ancestors]
    return [m for m in private if not any(m.startswith(o + ".") for o in private if o != m)]


def existing_public_modules(root: Path | None = None) -> list[str]:
    """The public modules present on disk."""
    return [m for m in framework_modules(root) if is_public(m)]
