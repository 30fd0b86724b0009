"""Koordinator's BatchResource runtime hook."""

from koord_plugin_batchresourcehook.plugin import BatchResource, BatchResourceArgs
from koord_plugin_batchresourcehook.resources import milli_cpu_to_quota, milli_cpu_to_shares

__all__ = ["BatchResource", "BatchResourceArgs", "milli_cpu_to_quota", "milli_cpu_to_shares"]
