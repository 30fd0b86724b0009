"""Process settings (never plugin args): read from ``KOORD_*`` environment variables and CLI flags.

Plugin arguments live in profiles (``koord_framework.config``); these are the knobs of a running process.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

from koord_framework.attribute_docs import install as _install_attribute_docs

_install_attribute_docs()  # before the first model: class creation reads attribute docstrings


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KOORD_", extra="ignore", use_attribute_docstrings=True)

    kubeconfig: str | None = None
    """Path of a kubeconfig; unset means the embedded cluster (or in-cluster config when running in a pod)."""
    client_qps: float = 5000.0
    """Kubernetes client rate limit (queries per second); kube-scheduler's 50 is far too low for bursts."""
    client_burst: int = 10000
    """Kubernetes client burst above ``client_qps``."""


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit (CLI) overrides winning."""
    clean = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**clean)  # type: ignore[arg-type]
