"""koord-plugin-coscheduling: Koordinator's Coscheduling (gang scheduling) for the koord scheduler.

Public API: the plugin class (entry point ``Coscheduling`` in group ``koord.scheduler.plugins``), its args
model, the gang model and cache (``Gang``, ``GangGroupInfo``, ``GangCache``), the gang decisions
(``GangManager``), the PodGroup status controller and the per-gang report.
"""

from koord_plugin_coscheduling.args import CoschedulingArgs
from koord_plugin_coscheduling.cache import GangCache
from koord_plugin_coscheduling.controller import PodGroupController, next_status
from koord_plugin_coscheduling.gang import Gang, GangGroupInfo, MemberPod
from koord_plugin_coscheduling.manager import GangBindingInfo, GangManager, GangSchedulingContext
from koord_plugin_coscheduling.plugin import Coscheduling
from koord_plugin_coscheduling.report import GangReport, gang_reports

__all__ = [
    "Coscheduling",
    "CoschedulingArgs",
    "Gang",
    "GangBindingInfo",
    "GangCache",
    "GangGroupInfo",
    "GangManager",
    "GangReport",
    "GangSchedulingContext",
    "MemberPod",
    "PodGroupController",
    "gang_reports",
    "next_status",
]
