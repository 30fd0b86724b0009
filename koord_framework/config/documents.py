"""The configuration kinds the loader reads, by component: what detecting a document's kind needs, without
importing the components' models (loading the scheduler's configuration imports neither the descheduler's
nor the koordlet's pydantic models; ``tests/config/test_lazy_imports.py`` guards it)."""

from __future__ import annotations

from typing import Final, Literal

Component = Literal["scheduler", "descheduler", "koordlet"]
COMPONENTS: Final[tuple[Component, ...]] = ("scheduler", "descheduler", "koordlet")

SCHEDULER_KIND: Final = "KubeSchedulerConfiguration"
SCHEDULER_API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
DESCHEDULER_KIND: Final = "DeschedulerConfiguration"
DESCHEDULER_API_VERSION: Final = "descheduler/v1alpha2"
KOORDLET_KIND: Final = "KoordletConfiguration"
KOORDLET_API_VERSION: Final = "koordlet.koordinator.sh/v1alpha1"

KINDS: Final[dict[Component, tuple[str, str]]] = {
    "scheduler": (SCHEDULER_KIND, SCHEDULER_API_VERSION),
    "descheduler": (DESCHEDULER_KIND, DESCHEDULER_API_VERSION),
    "koordlet": (KOORDLET_KIND, KOORDLET_API_VERSION),
}
"""Component → (kind, apiVersion) of its configuration document."""

KIND_COMPONENT: Final[dict[str, Component]] = {kind: comp for comp, (kind, _) in KINDS.items()}
