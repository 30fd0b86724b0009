"""Shared builders: a fake host with resctrl, a harness around it and the strategy on the fake kernel."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from koord_plugin_resctrl import Resctrl

from koord_framework.testing.hosttree import FakeHostTree, QOSHarness

Build = Callable[..., tuple[FakeHostTree, QOSHarness, Resctrl]]


@pytest.fixture
def build(tmp_path: Path) -> Build:
    counter = iter(range(1000))

    def make(
        *,
        pods: Sequence[Mapping[str, Any]] = (),
        node_slo: Mapping[str, Any] | None = None,
        vendor: str = "GenuineIntel",
        cbm_mask: str = "7ff",
        cache_ids: Sequence[int] = (0, 1),
        cpus: int = 4,
        version: int = 1,
        mounted: bool = True,
        mountable: bool = True,
        resctrl: bool = True,
        num_closids: int = 16,
    ) -> tuple[FakeHostTree, QOSHarness, Resctrl]:
        tree = FakeHostTree(tmp_path / f"host-{next(counter)}", version=version, cpus=cpus, vendor=vendor)
        if resctrl:
            tree.with_resctrl(
                cbm_mask=cbm_mask,
                cache_ids=cache_ids,
                mounted=mounted,
                mountable=mountable,
                num_closids=num_closids,
            )
        h = QOSHarness(tree, pods=pods, node_slo=node_slo if node_slo is not None else {})
        assert tree.resctrl is not None or not resctrl
        strategy = Resctrl(Resctrl.parse_args({}), h.context, fs=tree.resctrl if resctrl else None)
        return tree, h, strategy

    return make
