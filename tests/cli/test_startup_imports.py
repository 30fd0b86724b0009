"""koord scheduler's start-up imports what its first bind needs and no more (issue 22, gap 4).

Each check runs in a fresh interpreter: this test process has imported everything already. The modules
named here were each found in a start-up profile, imported for nothing the scheduler does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from koord_framework.cli import serve
from koord_framework.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "scheduler" / "koord-scheduler.yaml"

NOT_AT_START = {
    "urllib3": "only the kubernetes client's path raises its errors",
    "pydantic_settings": "no KOORD_* variable is set: the defaults are known",
    "asyncio": "pydantic-settings brought it",
    "encodings.idna": "ASCII host names go to getaddrinfo and TLS as bytes; no reverse lookup at bind",
    "koord_framework.manager.noderesource": "the manager's calculators are not the scheduler's",
    "koord_plugin_colocationprofile.handlers": "the scheduler reads only the package's kinds",
    "kubernetes": "plain kubeconfigs are read without the client",
}

PROBE = f"""
import json, socket, sys
from koord_framework.cli import serve
from koord_framework.cluster.kube import KubeCluster
from koord_framework.cluster.kinds import installed_kinds
from koord_framework.config.loader import load_scheduler_config
from koord_framework.health import HealthServer
from prometheus_client import CollectorRegistry
import koord_framework.scheduler.scheduler

load_scheduler_config({str(CONFIG)!r})
installed_kinds().get("ClusterColocationProfile")  # every koord.kinds entry point loaded
flags = serve.argparse.Namespace(client_qps=None, client_burst=None)
serve._client_limits(flags, None, serve._process_settings())
socket.getaddrinfo(b"127.0.0.1", 443)
health = HealthServer("127.0.0.1:0", CollectorRegistry()).start()
health.close()
print(json.dumps(sorted(sys.modules)))
"""


def _clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("KOORD_")}


def test_starting_the_scheduler_imports_none_of_what_it_does_not_use() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=_clean_environment(),
    )
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "koord_plugin_colocationprofile.kinds" in loaded  # the probe did reach the kinds
    imported = {name: why for name, why in NOT_AT_START.items() if name in loaded}
    assert not imported


def test_the_settings_defaults_serve_uses_are_the_settings_class_defaults() -> None:
    """Without a KOORD_* variable ``serve`` answers with ``SETTINGS_DEFAULTS`` instead of importing
    pydantic-settings: they must be what ``Settings`` would have said."""
    fields = Settings.model_fields
    assert set(vars(serve.SETTINGS_DEFAULTS)) == set(fields)
    for name, info in fields.items():
        assert getattr(serve.SETTINGS_DEFAULTS, name) == info.default, name
    assert Settings.model_config.get("env_prefix") == serve.SETTINGS_PREFIX


def test_a_koord_variable_is_read_through_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("koord_client_qps", "7")  # pydantic-settings ignores the case of the name
    assert serve._process_settings().client_qps == 7.0
    monkeypatch.delenv("koord_client_qps")
    for key in [k for k in os.environ if k.upper().startswith("KOORD_")]:
        monkeypatch.delenv(key)
    assert serve._process_settings() is serve.SETTINGS_DEFAULTS
