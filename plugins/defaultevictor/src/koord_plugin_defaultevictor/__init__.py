"""koord-plugin-defaultevictor: the Kubernetes descheduler's DefaultEvictor as a koord descheduler plugin."""

from koord_plugin_defaultevictor.args import DefaultEvictorArgs
from koord_plugin_defaultevictor.plugin import DefaultEvictor

__all__ = ["DefaultEvictor", "DefaultEvictorArgs"]
