"""Every profile the project ships validates against the plugins installed with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from koord_framework.config.loader import load_file

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(
    p
    for pattern in ("configs/scheduler/*.yaml", "configs/descheduler/*.yaml", "configs/koordlet/*.yaml")
    for p in ROOT.glob(pattern)
)
EXAMPLES = sorted(ROOT.glob("plugins/*/examples/profile.yaml"))


@pytest.mark.parametrize("path", SHIPPED + EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_profile_validates(path: Path) -> None:
    load_file(path)


def test_something_is_shipped() -> None:
    assert any(p.name == "koord-scheduler.yaml" for p in SHIPPED)
    assert any(p.name == "koord-descheduler.yaml" for p in SHIPPED)
