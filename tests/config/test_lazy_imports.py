"""Start-up (issue 22): loading one component's configuration imports that component's models alone.

Each check runs in a fresh interpreter, since this test process has imported everything already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from koord_framework.config.descheduler import DeschedulerConfiguration
from koord_framework.config.documents import KIND_COMPONENT, KINDS
from koord_framework.config.koordlet import KoordletConfiguration
from koord_framework.config.loader import model_for
from koord_framework.config.scheduler import KubeSchedulerConfiguration

ROOT = Path(__file__).resolve().parents[2]
OTHERS = {
    "scheduler": ("koord_framework.config.descheduler", "koord_framework.config.koordlet"),
    "descheduler": ("koord_framework.config.koordlet",),
}


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_loading_the_scheduler_config_imports_neither_descheduler_nor_koordlet_models() -> None:
    path = ROOT / "configs" / "scheduler" / "koord-scheduler.yaml"
    loaded = _modules_after(
        f"from koord_framework.config import load_scheduler_config\nload_scheduler_config({str(path)!r})"
    )
    assert "koord_framework.config.scheduler" in loaded
    assert not loaded & set(OTHERS["scheduler"])


def test_loading_the_descheduler_config_imports_no_koordlet_models() -> None:
    path = ROOT / "configs" / "descheduler" / "koord-descheduler.yaml"
    loaded = _modules_after(
        f"from koord_framework.config import load_descheduler_config\nload_descheduler_config({str(path)!r})"
    )
    assert "koord_framework.config.descheduler" in loaded
    assert not loaded & set(OTHERS["descheduler"])


def test_the_koord_scheduler_command_module_imports_no_configuration_models() -> None:
    loaded = _modules_after("import koord_framework.cli.serve")
    assert not {m for m in loaded if m.startswith("koord_framework.config.")} - {
        "koord_framework.config.documents"
    }


def test_the_kind_table_matches_the_models() -> None:
    models = {
        "scheduler": KubeSchedulerConfiguration,
        "descheduler": DeschedulerConfiguration,
        "koordlet": KoordletConfiguration,
    }
    for component, model in models.items():
        assert KINDS[component] == (model.KIND, model.API_VERSION)
        assert model_for(component) is model
        assert KIND_COMPONENT[model.KIND] == component
