"""koord-plugin-loadaware: Koordinator's LoadAwareScheduling for the koord scheduler.

Public API: the plugin class (entry point ``LoadAwareScheduling`` in group ``koord.scheduler.plugins``), its
args model, and the estimator extension point (group ``koord.scheduler.loadaware.estimators``).
"""

from koord_plugin_loadaware.args import LoadAwareSchedulingAggregatedArgs, LoadAwareSchedulingArgs
from koord_plugin_loadaware.estimator import DefaultEstimator, Estimator
from koord_plugin_loadaware.plugin import LoadAwareScheduling

__all__ = [
    "DefaultEstimator",
    "Estimator",
    "LoadAwareScheduling",
    "LoadAwareSchedulingAggregatedArgs",
    "LoadAwareSchedulingArgs",
]
