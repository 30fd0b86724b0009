"""Koordinator's ElasticQuota for koord: hierarchical min/max quotas that lend idle capacity."""

from koord_plugin_elasticquota.args import ElasticQuotaArgs
from koord_plugin_elasticquota.manager import GroupQuotaManager
from koord_plugin_elasticquota.plugin import ElasticQuota

__all__ = ["ElasticQuota", "ElasticQuotaArgs", "GroupQuotaManager"]
