"""Koordinator's ElasticQuota for koord: hierarchical min/max quotas that lend idle capacity."""
