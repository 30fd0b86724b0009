"""``ElasticQuotaArgs``: Koordinator's v1 args type (``pkg/scheduler/apis/config/v1``), with its defaults.

Validation follows ``ValidateElasticQuotaArgs``: durations must not be negative and the system/default
quota maxima must not be negative. ``hookPlugins`` is accepted with its shape, but no hook factory is
registered in koord, so a profile that names one is refused rather than silently ignored.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import field_validator

from koord_framework.api.quantity import QuantityError
from koord_framework.api.resources import parse_resource_list
from koord_framework.config.common import ConfigModel, Duration
from koord_framework.plugin import PluginArgs

__all__ = ["DEFAULT_QUOTA_GROUP_MAX", "ElasticQuotaArgs", "HookPluginConf"]

_MAX_INT64_DIV_5: Final = (2**63 - 1) // 5
DEFAULT_QUOTA_GROUP_MAX: Final[dict[str, str]] = {
    "cpu": str(_MAX_INT64_DIV_5),
    "memory": str(_MAX_INT64_DIV_5),
}
"""Koordinator's default for both ``defaultQuotaGroupMax`` and ``systemQuotaGroupMax``: MaxInt64/5 of each."""


class HookPluginConf(ConfigModel):
    """One quota hook plugin (Koordinator's ``HookPluginConf``)."""

    key: str
    """Name of the hook instance."""
    factory_key: str
    """Which registered hook factory builds it."""
    factory_args: dict[str, Any] | None = None
    """Arguments for the factory."""


class ElasticQuotaArgs(PluginArgs):
    """Arguments of the ElasticQuota plugin."""

    delay_evict_time: Duration = Duration(120)
    """How long a quota must stay above its runtime before the revoke controller evicts. Default: 2m."""
    revoke_pod_interval: Duration = Duration(1)
    """How often the revoke controller looks at the quotas. Default: 1s."""
    default_quota_group_max: dict[str, str] = DEFAULT_QUOTA_GROUP_MAX
    """Max of ``koordinator-default-quota``. Default: cpu and memory MaxInt64/5."""
    system_quota_group_max: dict[str, str] = DEFAULT_QUOTA_GROUP_MAX
    """Max of ``koordinator-system-quota``. Default: cpu and memory MaxInt64/5."""
    quota_group_namespace: str = "koordinator-system"
    """Namespace of the root, system and default quota objects the plugin creates. Default:
    koordinator-system."""
    monitor_all_quotas: bool = False
    """Run the over-use revoke controller. Default: false."""
    enable_check_parent_quota: bool = False
    """Also check every ancestor's runtime in PreFilter. Default: false."""
    enable_runtime_quota: bool = True
    """Admit against the runtime (lent capacity included); false admits against max. Default: true."""
    enable_min_quota_scale: bool = True
    """Scale children's mins down when they exceed the parent's runtime. Default: true."""
    disable_default_quota_preemption: bool = True
    """Pods of the default quota are never preemption victims. Default: true."""
    enable_queue_hint: bool = False
    """Queueing hints for quota and pod events (accepted; koord requeues on every registered event).
    Default: false."""
    quota_snapshot_update_interval: Duration = Duration(120)
    """Refresh interval of the quota snapshot used by queueing hints. Default: 2m."""
    hook_plugins: list[HookPluginConf] = []
    """Quota hook plugins. Default: none (koord registers no hook factory)."""

    @field_validator("delay_evict_time", "revoke_pod_interval", "quota_snapshot_update_interval")
    @classmethod
    def _non_negative(cls, value: Duration) -> Duration:
        if value < 0:
            raise ValueError("must be a non-negative duration")
        return value

    @field_validator("default_quota_group_max", "system_quota_group_max", mode="before")
    @classmethod
    def _resource_list(cls, value: Any) -> Any:
        try:
            parsed = parse_resource_list(value)
        except QuantityError as err:
            raise ValueError(str(err)) from err
        negative = sorted(name for name, v in parsed.items() if v < 0)
        if negative:
            raise ValueError(f"quantities must not be negative: {negative}")
        return {str(k): str(v) for k, v in (value or {}).items()}

    @field_validator("hook_plugins")
    @classmethod
    def _no_hooks(cls, value: list[HookPluginConf]) -> list[HookPluginConf]:
        if value:
            raise ValueError(
                f"no quota hook plugin factory is registered in koord: {[h.factory_key for h in value]}"
            )
        return value

    def default_max(self) -> dict[str, int]:
        return parse_resource_list(self.default_quota_group_max)

    def system_max(self) -> dict[str, int]:
        return parse_resource_list(self.system_quota_group_max)
