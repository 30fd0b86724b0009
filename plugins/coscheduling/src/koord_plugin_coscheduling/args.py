"""``CoschedulingArgs``: Koordinator's args type for Coscheduling, with its v1 defaults and validation.

Field names and defaults follow ``pkg/scheduler/apis/config/v1`` (``SetDefaults_CoschedulingArgs``) and the
checks ``ValidateCoschedulingArgs`` (timeout not negative, at least one controller worker). One tightening:
``defaultMatchPolicy`` must be one of the three policies Koordinator knows; Koordinator accepts any string
and then treats an unknown one like ``once-satisfied`` at Permit but not at PreEnqueue.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from koord_framework.config.common import Duration
from koord_framework.plugin import PluginArgs

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "CoschedulingArgs"]

DEFAULT_TIMEOUT_SECONDS = 600.0


class CoschedulingArgs(PluginArgs):
    """Arguments of ``Coscheduling`` (Koordinator's ``CoschedulingArgs``, v1)."""

    default_timeout: Annotated[Duration, Field(ge=0)] = Duration(DEFAULT_TIMEOUT_SECONDS)
    """How long a gang's pods wait at Permit for the rest of the gang when the gang names no timeout
    (PodGroup ``spec.scheduleTimeoutSeconds``, pod annotation
    ``gang.scheduling.koordinator.sh/waiting-time``).
    Go duration. Default: ``10m0s``."""
    controller_workers: Annotated[int, Field(ge=1, le=2**63 - 1)] = 1
    """Workers of the PodGroup status controller (at least 1). Default: 1."""
    skip_check_schedule_cycle: bool = False
    """Deprecated in Koordinator and without effect there; accepted so its ConfigMaps load. Default: false."""
    enable_preemption: bool = False
    """Let a gang preempt other pods in PostFilter (Koordinator's gang preemption). Default: false. Only
    false is supported here: true is refused rather than silently ignored."""
    aware_network_topology: bool = False
    """Place gangs by network topology (Koordinator's FindOneNode plans). Default: false. Only false is
    supported here: true is refused rather than silently ignored."""
    default_match_policy: Literal["only-waiting", "waiting-and-running", "once-satisfied"] = "once-satisfied"
    """Which members count toward a gang's minimum at Permit when the gang does not say: ``only-waiting``
    (pods waiting at Permit), ``waiting-and-running`` (waiting plus bound), ``once-satisfied`` (waiting, and
    once the gang was ever satisfied it stops gating). Default: ``once-satisfied``."""

    @field_validator("enable_preemption", "aware_network_topology")
    @classmethod
    def _unsupported(cls, value: bool) -> bool:
        if value:
            raise PydanticCustomError(
                "unsupported",
                "true is not supported by this Coscheduling (gang preemption and network-"
                "topology-aware placement are not implemented); leave it false",
            )
        return value
