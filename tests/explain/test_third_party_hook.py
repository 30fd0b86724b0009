"""A third-party plugin adds its own section to ``koord explain node``, with the public hook only."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from koord_framework.api.objects import PodInfo
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.config.loader import LoadedSchedulerConfig, load_text
from koord_framework.explain.hooks import ExplainSection, NodeExplainer
from koord_framework.explain.node import explain_node
from koord_framework.explain.pod import explain_pod
from koord_framework.plugin import NoArgs, PluginArgs
from koord_framework.registry import PluginRegistry
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import FilterPlugin, SchedulerPlugin
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Status

EXAMPLES = str(Path(__file__).resolve().parents[2] / "configs" / "examples" / "cluster")
WIDGET_LABEL = "example.com/widgets"


class Widgets(SchedulerPlugin[NoArgs], FilterPlugin, NodeExplainer):
    """Rejects nodes labelled with no widgets left; says how many each node has."""

    name: ClassVar[str] = "Widgets"
    Args: ClassVar[type[PluginArgs]] = NoArgs

    def _widgets(self, node_name: str) -> int:
        node = self.handle.cluster.try_get("Node", node_name) or {}
        labels = (node.get("metadata") or {}).get("labels") or {}
        return int(labels.get(WIDGET_LABEL, "1"))

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if self._widgets(node.name) < 1:
            return Status.unschedulable("no widgets left")
        return Status.success()

    def explain_node(self, node_name: str) -> ExplainSection:
        left = self._widgets(node_name)
        return ExplainSection("Widgets", [f"{left} widget(s) left"], {"widgets": left})


CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    plugins:
      filter:
        enabled:
          - name: Widgets
"""


def _config() -> LoadedSchedulerConfig:
    registry = PluginRegistry.discover("scheduler").with_classes([Widgets])
    loaded = load_text(CONFIG, "widgets.yaml", component="scheduler", registries={"scheduler": registry})
    assert isinstance(loaded, LoadedSchedulerConfig)
    return loaded


def test_a_third_party_plugin_adds_its_section_and_its_filter_verdict() -> None:
    cluster = MemoryCluster.from_paths([EXAMPLES])
    cluster.patch("Node", "node-18", "", {"metadata": {"labels": {WIDGET_LABEL: "0"}}})
    config = _config()
    ex = explain_node(cluster, config, "node-18")
    section = next(s for s in ex.sections if s.plugin == "Widgets")
    assert section.section is not None and section.section.data == {"widgets": 0}
    pod = explain_pod(MemoryCluster.from_paths([EXAMPLES]), config, "shop/web-1")
    assert pod.status == "Scheduled" and "Widgets" in pod.filter_plugins
    cluster2 = MemoryCluster.from_paths([EXAMPLES])
    cluster2.patch("Node", "node-18", "", {"metadata": {"labels": {WIDGET_LABEL: "0"}}})
    pod = explain_pod(cluster2, config, "shop/web-1", focus="node-18")
    node = next(v for v in pod.nodes if v.name == "node-18")
    assert not node.feasible and node.plugin == "Widgets" and node.reason == "no widgets left"
