"""The descheduler framework: extension points, profiles, the cycle, the limiter and node usage.

Evictor filters and pod ordering, which only plugins use, are the family library ``koord_lib_descheduling``
(``libs/descheduling``); anomaly detection belongs to LowNodeLoad."""

from koord_framework.descheduler.descheduler import Descheduler
from koord_framework.descheduler.framework import DeschedulerFramework, EvictionFailed, ProfileSpec
from koord_framework.descheduler.handle import EvictionEntry, RoundReport, Services
from koord_framework.descheduler.interface import (
    EXTENSION_POINTS,
    BackgroundPlugin,
    BalancePlugin,
    DeschedulePlugin,
    DeschedulerPlugin,
    EvictOptions,
    Evictor,
    EvictPlugin,
    FilterPlugin,
    Handle,
    PreEvictionFilterPlugin,
    Status,
    list_pods_on_node,
)
from koord_framework.descheduler.limiter import EvictionLimiter

__all__ = [
    "EXTENSION_POINTS",
    "BackgroundPlugin",
    "BalancePlugin",
    "DeschedulePlugin",
    "Descheduler",
    "DeschedulerFramework",
    "DeschedulerPlugin",
    "EvictOptions",
    "EvictPlugin",
    "EvictionEntry",
    "EvictionFailed",
    "EvictionLimiter",
    "Evictor",
    "FilterPlugin",
    "Handle",
    "PreEvictionFilterPlugin",
    "ProfileSpec",
    "RoundReport",
    "Services",
    "Status",
    "list_pods_on_node",
]
