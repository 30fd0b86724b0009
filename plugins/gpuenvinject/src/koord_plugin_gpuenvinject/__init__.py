"""Koordinator's GPU env-inject runtime hook."""

from koord_plugin_gpuenvinject.plugin import GPUEnvInject, GPUEnvInjectArgs

__all__ = ["GPUEnvInject", "GPUEnvInjectArgs"]
