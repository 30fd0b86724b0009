"""The node agent (koordlet): host access, metrics, the resource executor and the QoS extension point.

Public API:

* ``HostPaths`` -- the roots of procfs, cgroups, sysfs and resctrl (``hostpaths``);
* ``CgroupLayout``/``CgroupReader`` -- v1/v2, systemd/cgroupfs kubepods paths, typed reads (``cgroups``);
* ``ResourceExecutor`` with ``CgroupUpdate``/``FileUpdate`` -- validated, audited writes (``executor``);
* ``MetricCache``, ``ResourceCollector``, ``NodeMetricReporter`` (``metrics``);
* ``NodeSLO`` and the Koordinator defaults merge (``nodeslo``);
* ``QOSStrategy``/``QOSContext`` -- the ``koord.koordlet.qos`` extension point (``qos``);
* ``Evictor``/``kill_and_evict_pods`` -- shared eviction (``eviction``);
* ``KoordletAgent`` -- the loop (``agent``), configured by ``KoordletConfiguration`` (``config``).
"""

from koord_framework.koordlet.hostpaths import HostPaths

__all__ = ["HostPaths"]
