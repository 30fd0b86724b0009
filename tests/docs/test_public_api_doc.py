"""``docs/writing-plugins.md`` lists the public plugin API module by module, exactly as
``koord_framework.public`` declares it."""

from __future__ import annotations

import re
from pathlib import Path

from koord_framework.public import PUBLIC_MODULES, is_public

DOC = Path(__file__).resolve().parents[2] / "docs" / "writing-plugins.md"


def _table() -> str:
    text = DOC.read_text()
    return text.split("<!-- public-api -->", 1)[1].split("<!-- /public-api -->", 1)[0]


def test_every_public_module_is_documented() -> None:
    rows = [line for line in _table().splitlines() if line.startswith("| `koord_framework")]
    documented = [re.match(r"\| `([\w.]+)`", row).group(1) for row in rows]  # type: ignore[union-attr]
    declared = [entry.removesuffix(".**") for entry in PUBLIC_MODULES]
    assert documented == declared


def test_the_table_names_no_private_module() -> None:
    for module in re.findall(r"`(koord_framework(?:\.\w+)+)`", _table()):
        assert is_public(module), module
