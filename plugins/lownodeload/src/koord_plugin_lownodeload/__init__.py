"""koord-plugin-lownodeload: Koordinator's LowNodeLoad balance plugin (load-aware descheduling)."""

from koord_plugin_lownodeload.args import LoadAnomalyCondition, LowNodeLoadArgs, LowNodeLoadNodePool
from koord_plugin_lownodeload.plugin import LowNodeLoad

__all__ = ["LoadAnomalyCondition", "LowNodeLoad", "LowNodeLoadArgs", "LowNodeLoadNodePool"]
