"""koord_framework: the minimal framework of the koord plugin platform.

It defines the extension points (scheduler, descheduler, koordlet QoS strategies and runtime hooks), the
plugin registry, profile loading, the cluster port with its embedded in-memory cluster, metrics, the ``koord``
CLI and a testing kit. Every feature lives in a separately installable plugin distribution.
"""

from importlib.metadata import PackageNotFoundError, version

from koord_framework import codecache as _codecache

_codecache.install()  # before any dataclass of the project is made (start-up: codecache.py)

try:
    __version__ = version("koord-framework")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
