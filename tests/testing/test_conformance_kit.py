"""The conformance kit's behavioural checks catch the plugins they are meant to catch, and pass well-behaved
ones: a QoS strategy writing the host or evicting behind the context's back, a balance plugin evicting
without a reason, past the evictor's Filter, or deleting pods itself."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from koord_framework.api.objects import NodeRecord
from koord_framework.descheduler.interface import (
    BalancePlugin,
    DeschedulerPlugin,
    EvictOptions,
    Status,
    list_pods_on_node,
)
from koord_framework.koordlet.nodeslo import NodeSLO
from koord_framework.koordlet.qos import IntervalArgs, QOSStrategy
from koord_framework.plugin import PluginArgs
from koord_framework.testing.conformance import DeschedulerPluginConformance, QOSStrategyConformance


# --- QoS strategies ---------------------------------------------------------------------------------------
class PoliteEvictor(QOSStrategy):
    """Evicts one BE-labelled pod per tick through ``context.evictor``: what the contract asks."""

    name: ClassVar[str] = "PoliteEvictor"
    Args: ClassVar[type[PluginArgs]] = IntervalArgs

    def enabled(self, node_slo: NodeSLO | None) -> bool:
        return True  # no Koordinator feature switch of its own

    def tick(self, now: float) -> None:
        for meta in self.context.state.pods:
            if not self.context.evictor.is_evicted(meta):
                self.context.evictor.evict(meta, "trigger by koordlet feature Polite, kill pod: x")
                return


class HostWriter(PoliteEvictor):
    name: ClassVar[str] = "HostWriter"

    def tick(self, now: float) -> None:
        (self.context.host.cgroup / "written-behind-the-executor").write_text(str(now))


class ClusterEvictor(PoliteEvictor):
    name: ClassVar[str] = "ClusterEvictor"

    def tick(self, now: float) -> None:
        cluster = self.context.cluster
        assert cluster is not None
        for meta in self.context.state.pods:
            if cluster.try_get("Pod", meta.pod.name, meta.pod.namespace) is not None:
                cluster.evict(meta.pod.namespace, meta.pod.name, reason="rogue", requested_by="rogue")
                return


def _qos_kit(cls: type[QOSStrategy]) -> QOSStrategyConformance:
    class Kit(QOSStrategyConformance):
        plugin_class = cls
        random_hosts = 2
        ticks = 3

    return Kit()


def test_qos_kit_passes_a_strategy_that_keeps_the_contract(tmp_path: Path) -> None:
    _qos_kit(PoliteEvictor).test_ticks_on_random_hosts_act_only_through_the_context(tmp_path)


def test_qos_kit_fails_a_strategy_it_never_saw_enabled(tmp_path: Path) -> None:
    class NeverOn(PoliteEvictor):
        name: ClassVar[str] = "NeverOn"

        def enabled(self, node_slo: NodeSLO | None) -> bool:
            return False

    with pytest.raises(AssertionError, match="NeverOn was never enabled"):
        _qos_kit(NeverOn).test_ticks_on_random_hosts_act_only_through_the_context(tmp_path)


def test_qos_kit_catches_host_writes_behind_the_executor(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="HostWriter changed host files without the executor"):
        _qos_kit(HostWriter).test_ticks_on_random_hosts_act_only_through_the_context(tmp_path)


def test_qos_kit_catches_evictions_behind_the_evictor(tmp_path: Path) -> None:
    with pytest.raises(
        AssertionError, match=r"ClusterEvictor evicted pods other than through context\.evictor"
    ):
        _qos_kit(ClusterEvictor).test_ticks_on_random_hosts_act_only_through_the_context(tmp_path)


# --- descheduler plugins ----------------------------------------------------------------------------------
class CarefulBalance(DeschedulerPlugin, BalancePlugin):
    """Evicts the first admitted pod of every node, with a reason: what the contract asks."""

    name: ClassVar[str] = "CarefulBalance"
    reason: ClassVar[str] = "node is busy"
    use_filter: ClassVar[bool] = True

    def balance(self, nodes: Sequence[NodeRecord]) -> Status | None:
        evictor = self.handle.evictor()
        for node in nodes:
            for pod in list_pods_on_node(self.handle, node.name):
                if not self.use_filter or evictor.filter(pod):
                    evictor.evict(pod, EvictOptions(reason=self.reason))
                    break
        return None


class ReasonlessBalance(CarefulBalance):
    name: ClassVar[str] = "ReasonlessBalance"
    reason: ClassVar[str] = ""


class FilterSkippingBalance(CarefulBalance):
    name: ClassVar[str] = "FilterSkippingBalance"
    use_filter: ClassVar[bool] = False


class DeletingBalance(CarefulBalance):
    name: ClassVar[str] = "DeletingBalance"

    def balance(self, nodes: Sequence[NodeRecord]) -> Status | None:
        for node in nodes:
            for pod in list_pods_on_node(self.handle, node.name):
                self.handle.cluster.delete("Pod", pod.name, pod.namespace)
                return None
        return None


def _descheduler_kit(cls: type[DeschedulerPlugin], **attrs: Any) -> DeschedulerPluginConformance:
    kit = type("Kit", (DeschedulerPluginConformance,), {"plugin_class": cls, "random_clusters": 3, **attrs})
    instance: DeschedulerPluginConformance = kit()
    return instance


def test_descheduler_kit_passes_a_plugin_that_keeps_the_contract() -> None:
    _descheduler_kit(
        CarefulBalance, expect_evictions=True
    ).test_evicts_only_through_the_evictor_with_a_reason()


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (ReasonlessBalance, "ReasonlessBalance evicted .* without a reason"),
        (FilterSkippingBalance, "refused by the evictor's Filter"),
        (DeletingBalance, "DeletingBalance changed pods in the cluster behind the evictor"),
    ],
)
def test_descheduler_kit_catches_contract_breaches(cls: type[DeschedulerPlugin], message: str) -> None:
    with pytest.raises(AssertionError, match=message):
        _descheduler_kit(cls).test_evicts_only_through_the_evictor_with_a_reason()


def test_descheduler_kit_can_require_evictions() -> None:
    class Idle(CarefulBalance):
        name: ClassVar[str] = "Idle"

        def balance(self, nodes: Sequence[NodeRecord]) -> Status | None:
            return None

    with pytest.raises(AssertionError, match="Idle evicted nothing"):
        _descheduler_kit(Idle, expect_evictions=True).test_evicts_only_through_the_evictor_with_a_reason()
