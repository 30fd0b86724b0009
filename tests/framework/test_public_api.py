"""The plugin API (``koord_framework.public``): what the contract generator makes of it, and the rules the
import contract cannot see (no ``getattr`` on a handle, no ``type: ignore[attr-defined]`` on one, no
module-global caches keyed by handle or registry)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

from koord_framework import public

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("plugins/*/src/*/**/*.py"), *ROOT.glob("libs/*/src/*/**/*.py")])


def test_every_listed_module_that_exists_imports() -> None:
    present = public.existing_public_modules()
    assert "koord_framework.scheduler.interface" in present
    assert "koord_framework.api.objects" in present
    for module in present:
        importlib.import_module(module)


def test_private_modules_cover_everything_else_and_spare_public_ones() -> None:
    modules = public.framework_modules()
    private = public.private_modules()
    for module in modules:
        covered = any(module == p or module.startswith(p + ".") for p in private)
        if public.is_public(module):
            assert not covered, f"{module} is public but the contract forbids it"
    for runtime in (
        "koord_framework.scheduler.framework",
        "koord_framework.scheduler.scheduler",
        "koord_framework.scheduler.cache",
        "koord_framework.cluster.informer",
        "koord_framework.descheduler.framework",
        "koord_framework.cli.serve",
    ):
        assert any(runtime == p or runtime.startswith(p + ".") for p in private), runtime


def test_a_public_module_that_does_not_exist_yet_is_skipped(tmp_path: Path) -> None:
    pkg = tmp_path / "koord_framework"
    (pkg / "scheduler").mkdir(parents=True)
    for name in ("__init__.py", "scheduler/__init__.py", "scheduler/interface.py", "scheduler/cache.py"):
        (pkg / name).write_text("")
    assert public.existing_public_modules(pkg) == ["koord_framework.scheduler.interface"]
    assert public.private_modules(pkg) == ["koord_framework.scheduler.cache"]
    # Once another change adds it, the new public module is picked up without editing the contract.
    (pkg / "scheduler" / "frameworkext.py").write_text("")
    assert "koord_framework.scheduler.frameworkext" in public.existing_public_modules(pkg)
    assert "koord_framework.scheduler.frameworkext" not in public.private_modules(pkg)


def test_the_generated_contract_forbids_the_private_modules() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import importlinter_config
    finally:
        sys.path.remove(str(ROOT / "tools"))
    text = importlinter_config.render()
    section = text.split("[importlinter:contract:plugins-import-only-the-public-api]")[1].split("\n\n")[0]
    assert "    koord_framework.scheduler.framework" in section
    assert "    koord_framework.scheduler.interface" not in section
    assert "    koord_plugin_kubernetes" in section
    assert "    koord_lib_descheduling" in section


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (
            r"getattr\(\s*(self\.)?_?handle\b",
            "getattr on the handle: declare it on the Handle ABC",
        ),
        (r"handle\b[^#\n]*# type: ignore\[attr-defined\]", "type: ignore on the handle"),
        (r"WeakKeyDictionary", "a module-global cache: use Handle.shared(key, factory)"),
        (r"isinstance\((self\.)?(args|parsed)\b", "an args check: make the plugin generic over its args"),
    ],
)
def test_plugins_keep_to_the_handle(pattern: str, why: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in SOURCES
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(pattern, line)
    ]
    assert not offenders, f"{why}: {offenders}"
