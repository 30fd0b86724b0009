"""The node's CPU basic info (Koordinator's ``extension.CPUBasicInfo``, ``util.getCPUBasicInfo``): the CPU
model, hyper-threading and turbo status, the L3 cache bit mask and the vendor, read from the host through
``HostPaths``. The koordlet reports it as the NodeResourceTopology annotation
``node.koordinator.sh/cpu-basic-info``; koord-manager's CPUNormalization calculator looks the node's ratio up
by it, and the resctrl strategy needs the mask and the vendor.

Each field falls back as Koordinator's does when the host does not say: the model is ``unknown``, the
flags are false, the mask empty, the vendor ``unknown`` -- a host read never fails the report.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Final

from koord_framework.koordlet.hostpaths import HostPaths
from koord_framework.koordlet.system import HostReadError, NodeCPUInfo, vendor_id

__all__ = ["ANNOTATION_CPU_BASIC_INFO", "CPUBasicInfo", "read_cpu_basic_info"]

log = logging.getLogger(__name__)

ANNOTATION_CPU_BASIC_INFO: Final = "node.koordinator.sh/cpu-basic-info"
UNKNOWN: Final = "unknown"


@dataclass(frozen=True, slots=True)
class CPUBasicInfo:
    """``extension.CPUBasicInfo``."""

    cpu_model: str = ""
    hyper_thread_enabled: bool = False
    turbo_enabled: bool = False
    cat_l3_cbm_mask: str = ""
    vendor_id: str = ""

    def to_json(self) -> str:
        """The annotation value: Go's ``json.Marshal`` of the struct (field order, ``omitempty``, no
        spaces)."""
        fields: list[tuple[str, Any]] = [
            ("cpuModel", self.cpu_model),
            ("hyperThreadEnabled", self.hyper_thread_enabled),
            ("turboEnabled", self.turbo_enabled),
            ("catL3CbmMask", self.cat_l3_cbm_mask),
            ("vendorID", self.vendor_id),
        ]
        return json.dumps({k: v for k, v in fields if v}, separators=(",", ":"), ensure_ascii=False)


def cpu_model(paths: HostPaths) -> str:
    """The first ``model name`` (or ARM's ``Model Name``) of ``/proc/cpuinfo``; ``unknown`` when none or the
    file cannot be read (``getCPUModel``)."""
    try:
        text = paths.proc_file("cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        log.debug("cpu model: %s", exc)
        return UNKNOWN
    for line in text.splitlines():
        if "model name" in line or "Model Name" in line:
            attrs = line.split(":")
            if len(attrs) >= 2:
                return attrs[1].strip()
    return UNKNOWN


def hyper_thread_enabled(paths: HostPaths, cpu_info: NodeCPUInfo) -> bool:
    """``devices/system/cpu/smt/active`` is 1; without that file, more than one thread on some core of the
    CPU topology (Koordinator asks ``lscpu -y`` for "Thread(s) per core", which counts the same sysfs
    topology)."""
    path = paths.sys_file("devices", "system", "cpu", "smt", "active")
    try:
        return int(path.read_text().strip()) == 1
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:  # present but unreadable: Koordinator gives up, false
        log.debug("hyper-threading: %s: %s", path, exc)
        return False
    per_core: dict[int, int] = {}
    for p in cpu_info.processors:
        per_core[p.core_id] = per_core.get(p.core_id, 0) + 1
    return max(per_core.values(), default=0) > 1


def turbo_enabled(paths: HostPaths) -> bool:
    """``devices/system/cpu/intel_pstate/no_turbo`` is 0; false when the file is absent (not Intel
    P-state) or does not hold a number (``getCPUTurboEnabled``)."""
    path = paths.sys_file("devices", "system", "cpu", "intel_pstate", "no_turbo")
    try:
        return int(path.read_text().strip()) == 0
    except (OSError, ValueError) as exc:
        log.debug("turbo: %s: %s", path, exc)
        return False


def cat_l3_cbm_mask(paths: HostPaths) -> str:
    """resctrl's ``info/L3/cbm_mask``, empty when resctrl is not mounted (``ReadCatL3CbmString``)."""
    try:
        return paths.resctrl_file("info", "L3", "cbm_mask").read_text().strip()
    except OSError as exc:
        log.debug("l3 cbm mask: %s", exc)
        return ""


def read_cpu_basic_info(paths: HostPaths, cpu_info: NodeCPUInfo) -> CPUBasicInfo:
    """Every field of the node's CPU basic info from the host."""
    try:
        vendor = vendor_id(paths)
    except HostReadError as exc:
        log.debug("cpu vendor: %s", exc)
        vendor = UNKNOWN
    return CPUBasicInfo(
        cpu_model=cpu_model(paths),
        hyper_thread_enabled=hyper_thread_enabled(paths, cpu_info),
        turbo_enabled=turbo_enabled(paths),
        cat_l3_cbm_mask=cat_l3_cbm_mask(paths),
        vendor_id=vendor,
    )
