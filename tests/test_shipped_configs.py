"""Every profile the project ships validates against the plugins installed with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from koord_framework.config.loader import load_file
from koord_framework.manager.sloconfig import CONFIG_MAP_NAME, SLOConfig

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(
    p
    for pattern in ("configs/scheduler/*.yaml", "configs/descheduler/*.yaml", "configs/koordlet/*.yaml")
    for p in ROOT.glob(pattern)
)
EXAMPLES = sorted(ROOT.glob("plugins/*/examples/profile.yaml"))


@pytest.mark.parametrize("path", SHIPPED + EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_profile_validates(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    if doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == CONFIG_MAP_NAME:
        # koord-manager's calculators are configured by slo-controller-config, not a profile
        assert SLOConfig().update(doc.get("data") or {}) == []
        return
    load_file(path)


def test_something_is_shipped() -> None:
    assert any(p.name == "koord-scheduler.yaml" for p in SHIPPED)
    assert any(p.name == "koord-descheduler.yaml" for p in SHIPPED)
