"""Koordinator's BatchResource node-resource calculator."""

from koord_plugin_batchresource.plugin import BatchResource, BatchResourceArgs, PodRecords

__all__ = ["BatchResource", "BatchResourceArgs", "PodRecords"]
