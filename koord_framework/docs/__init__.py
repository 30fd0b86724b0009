"""Documentation that is generated from the code and checked against it.

* ``args_table``: a plugin's args table from its ``PluginArgs`` model, and the README regions holding
  generated content (``check_readme``, ``update_readme``; ``koord plugins docs`` on the command line);
* ``metric_names``: the Prometheus metrics a source tree registers, read from the code;
* ``plugin_readme``: the sections every plugin README must have, checked (``check_plugin_readme``).
"""

from koord_framework.docs.args_table import (
    ArgRow,
    ReadmeCheck,
    args_rows,
    args_table,
    check_readme,
    installed_args_models,
    update_readme,
)
from koord_framework.docs.metric_names import RegisteredMetric, registered_metrics
from koord_framework.docs.plugin_readme import SECTIONS, PluginDistribution, check_plugin_readme

__all__ = [
    "SECTIONS",
    "ArgRow",
    "PluginDistribution",
    "ReadmeCheck",
    "RegisteredMetric",
    "args_rows",
    "args_table",
    "check_plugin_readme",
    "check_readme",
    "installed_args_models",
    "registered_metrics",
    "update_readme",
]
