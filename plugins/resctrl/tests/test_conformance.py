"""Resctrl against the platform's QoS-strategy contracts (the framework's conformance kit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from koord_plugin_resctrl import Resctrl

from koord_framework.testing.conformance import QOSObjects, QOSStrategyConformance
from koord_framework.testing.hosttree import QOSHarness


class TestResctrlConformance(QOSStrategyConformance):
    plugin_class = Resctrl
    valid_args: ClassVar[list[dict[str, Any]]] = [{"intervalSeconds": 5}, {"intervalSeconds": 0.5}]
    invalid_args: ClassVar[list[dict[str, Any]]] = [
        {"intervalSeconds": 0},
        {"catRangeEndPercent": 30},  # a NodeSLO setting, not an arg
    ]

    def make_objects(self, rng: Any) -> QOSObjects:
        node, pods, slo = super().make_objects(rng)
        slo["resourceQOSStrategy"] = {
            "beClass": {"resctrlQOS": {"enable": True, "catRangeEndPercent": rng.choice((30, 50))}},
            "lsClass": {"resctrlQOS": {"enable": rng.random() < 0.5, "mbaPercent": rng.choice((55, 100))}},
        }
        return node, pods, slo

    def make_harness(self, root: Path, objects: QOSObjects, layout: tuple[int, str]) -> QOSHarness:
        h = super().make_harness(root, objects, layout)
        h.tree.with_resctrl(cbm_mask="fff", cache_ids=(0, 1), groups=("LSR", "LS", "BE"))
        for k, meta in enumerate(h.state.pods):
            for j, c in enumerate(meta.containers):
                if c.cgroup_dir:
                    h.tree.add_threads(c.cgroup_dir, [10_000 + 100 * k + j])
        return h
