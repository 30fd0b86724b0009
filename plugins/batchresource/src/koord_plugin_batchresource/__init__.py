"""Koordinator's BatchResource runtime hook."""

from koord_plugin_batchresource.plugin import BatchResource, BatchResourceArgs
from koord_plugin_batchresource.resources import milli_cpu_to_quota, milli_cpu_to_shares

__all__ = ["BatchResource", "BatchResourceArgs", "milli_cpu_to_quota", "milli_cpu_to_shares"]
