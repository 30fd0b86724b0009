"""The ``koord`` pytest plugin (entry point ``pytest11: koord``): fixtures for plugin authors.

Every fixture is prefixed ``koord_`` and none is autouse, so installing the framework changes nothing in a
test suite that does not ask for them. Fixtures live in ``koord_framework.testing.fixtures.<area>``; to add
an area, write a module there and import its fixtures below (pytest collects fixtures from the names of
this module).
"""

from koord_framework.testing.fixtures.cluster import koord_builders, koord_clock, koord_cluster
from koord_framework.testing.fixtures.descheduler import koord_descheduler_harness
from koord_framework.testing.fixtures.koordlet import koord_host_tree
from koord_framework.testing.fixtures.scheduler import koord_scheduler_harness

__all__ = [
    "koord_builders",
    "koord_clock",
    "koord_cluster",
    "koord_descheduler_harness",
    "koord_host_tree",
    "koord_scheduler_harness",
]
