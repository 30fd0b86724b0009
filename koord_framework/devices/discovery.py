"""Find a node's GPUs and RDMA NICs from sysfs (and NVML) and describe them as a ``Device`` spec.

What koordlet does for Koordinator's Device object (``states_device_linux.go``, ``util/system/{gpu,rdma,
sriov}.go``), rooted at ``HostPaths.sys`` so tests run the same parsers on a fake tree:

* **GPUs**: PCI addresses bound to the ``nvidia`` driver (``bus/pci/drivers/nvidia/<bdf>``); with NVML each
  gives UUID, minor, memory and model; without NVML (no driver library) NVIDIA display/3D controllers from
  ``bus/pci/devices`` (vendor ``0x10de``, class ``0x0300xx``/``0x0302xx``) are listed with minors in PCI order
  and no memory. NUMA node from ``numa_node`` (-1 ⇒ 0), PCIe root complex (``pci0000:3a``) from the device's
  resolved sysfs path. A GPU NVML cannot answer for is reported unhealthy with the NVML error.
* **RDMA**: ``class/infiniband/<ibdev>`` whose PCI function is a physical function of a network device;
  minor from ``mlx<N>_<minor>``; healthy when every port's ``state`` is ACTIVE; VFs from ``virtfn*`` links.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koord_framework.devices.nvml import NVML, GPUInfo, NVMLError, NVMLUnavailable
from koord_framework.koordlet.hostpaths import HostPaths

__all__ = ["Discovery", "discover", "gpu_model_label"]

_BDF = re.compile(r"^((1?[0-9a-f]{0,4}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f])$")
_ROOT_COMPLEX = re.compile(r"pci\d{4}:[0-9a-fA-F]{2}")
_MLX = re.compile(r"^mlx\d+_(\d+)$")
NVIDIA_VENDOR = "0x10de"

LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"


@dataclass
class Discovery:
    """One scan: the Device spec's devices, the labels for Device and Node, and what went wrong."""

    devices: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    nvml: str = "unavailable"
    """``ok``, ``unavailable`` (sysfs fallback) or ``failed`` (NVML broke during the scan)."""


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def gpu_model_label(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``H100-80GB-HBM3`` (the vendor stripped, words joined with ``-``)."""
    model = name[len("NVIDIA ") :] if name.startswith("NVIDIA ") else name
    return "-".join(model.split())


def _pci_topology(host: HostPaths, bdf: str) -> dict[str, Any] | None:
    dev = host.sys / "bus" / "pci" / "devices" / bdf
    raw = _read(dev / "numa_node")
    try:
        numa = int(raw) if raw is not None else -1
    except ValueError:
        numa = -1
    numa = max(numa, 0)
    try:
        resolved = os.path.realpath(dev)
    except OSError:
        return None
    match = _ROOT_COMPLEX.search(resolved)
    if match is None:
        return None
    return {"socketID": -1, "nodeID": numa, "pcieID": match.group(0), "busID": bdf}


def _condition(healthy: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Healthy", "status": "True" if healthy else "False", "reason": reason, "message": message}


def _nvidia_bus_ids(host: HostPaths) -> list[str]:
    driver = host.sys / "bus" / "pci" / "drivers" / "nvidia"
    try:
        names = os.listdir(driver)
    except OSError:
        return []
    return sorted(name.lower() for name in names if _BDF.match(name.lower()))


def _sysfs_gpus(host: HostPaths) -> list[str]:
    root = host.sys / "bus" / "pci" / "devices"
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for bdf in names:
        vendor, cls = _read(root / bdf / "vendor"), _read(root / bdf / "class") or ""
        if vendor == NVIDIA_VENDOR and (cls.startswith("0x0300") or cls.startswith("0x0302")):
            out.append(bdf)
    return out


def _gpu_entry(bdf: str, info: GPUInfo | None, minor: int, topology: dict[str, Any] | None) -> dict[str, Any]:
    resources = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}
    if info is not None and info.memory_total > 0:
        resources["koordinator.sh/gpu-memory"] = str(info.memory_total)
    entry: dict[str, Any] = {
        "type": "gpu",
        "id": info.uuid if info is not None else bdf,
        "minor": info.minor if info is not None else minor,
        "health": True,
        "resources": dict(sorted(resources.items())),
    }
    if topology is not None:
        entry["topology"] = topology
    return entry


def _discover_gpus(host: HostPaths, nvml: NVML | None, out: Discovery) -> None:
    opened = False
    if nvml is not None:
        try:
            nvml.open()
            opened = True
            out.nvml = "ok"
        except NVMLUnavailable as err:
            out.errors.append(f"nvml: {err}; falling back to sysfs")
        except NVMLError as err:
            out.errors.append(f"nvml: {err}; falling back to sysfs")
            out.nvml = "failed"
    try:
        if opened:
            assert nvml is not None
            _nvml_gpus(host, nvml, out)
        else:
            for i, bdf in enumerate(_sysfs_gpus(host)):
                out.devices.append(_gpu_entry(bdf, None, i, _pci_topology(host, bdf)))
            if any(d["type"] == "gpu" for d in out.devices):
                out.labels[LABEL_GPU_VENDOR] = "nvidia"
    finally:
        if opened:
            assert nvml is not None
            try:
                nvml.close()
            except NVMLError as err:
                out.errors.append(f"nvml: close: {err}")


def _nvml_gpus(host: HostPaths, nvml: NVML, out: Discovery) -> None:
    names: set[str] = set()
    used_minors: set[int] = set()
    failed: list[tuple[str, str]] = []
    for bdf in _nvidia_bus_ids(host):
        topology = _pci_topology(host, bdf)
        try:
            info = nvml.gpu(bdf)
        except NVMLError as err:
            failed.append((bdf, str(err)))
            out.nvml = "failed"
            continue
        names.add(info.name)
        used_minors.add(info.minor)
        entry = _gpu_entry(bdf, info, info.minor, topology)
        entry["conditions"] = [_condition(True, "DeviceHealthy", "")]
        out.devices.append(entry)
    # A GPU NVML could not describe still has a PCI address and a place: report it unhealthy, on a minor
    # no healthy GPU uses, so the scheduler never allocates it but keeps it visible.
    spare = (m for m in range(len(used_minors) + len(failed) + 1) if m not in used_minors)
    for bdf, message in failed:
        out.errors.append(f"gpu {bdf}: {message}")
        entry = _gpu_entry(bdf, None, next(spare), _pci_topology(host, bdf))
        entry["health"] = False
        entry["conditions"] = [_condition(False, "NVMLError", message)]
        out.devices.append(entry)
    if out.devices:
        out.labels[LABEL_GPU_VENDOR] = "nvidia"
    if len(names) == 1:
        out.labels[LABEL_GPU_MODEL] = gpu_model_label(names.pop())
    elif len(names) > 1:
        out.errors.append(f"gpus of different models {sorted(names)}: no {LABEL_GPU_MODEL} label")
    if not out.devices:
        return  # no GPU: no GPU labels
    try:
        out.labels[LABEL_GPU_DRIVER_VERSION] = nvml.driver_version()
    except NVMLError as err:
        out.errors.append(f"nvml: driver version: {err}")


def _discover_rdma(host: HostPaths, out: Discovery) -> None:
    root = host.sys / "class" / "infiniband"
    try:
        ibdevs = sorted(os.listdir(root))
    except OSError:
        return
    by_pci: dict[str, str] = {}
    for ib in ibdevs:
        try:
            pci = os.path.basename(os.path.realpath(root / ib / "device"))
        except OSError:
            continue
        by_pci.setdefault(pci, ib)  # the first ibdev (sorted) of a PCI function
    rdma: list[dict[str, Any]] = []
    for pci, ib in sorted(by_pci.items()):
        dev = host.sys / "bus" / "pci" / "devices" / pci
        if (dev / "physfn").exists():
            continue  # a VF is reported under its PF
        if not (_read(dev / "class") or "").startswith("0x02"):
            continue
        match = _MLX.match(ib)
        if match is None:
            out.errors.append(f"rdma {ib} ({pci}): name is not mlx<N>_<minor>, skipped")
            continue
        states = []
        try:
            for port in sorted(os.listdir(root / ib / "ports")):
                states.append(_read(root / ib / "ports" / port / "state") or "")
        except OSError:
            pass
        healthy = bool(states) and all("ACTIVE" in s for s in states)
        entry: dict[str, Any] = {
            "type": "rdma",
            "id": pci,
            "minor": int(match.group(1)),
            "health": healthy,
            "resources": {"koordinator.sh/rdma": "100"},
        }
        topology = _pci_topology(host, pci)
        if topology is not None:
            entry["topology"] = topology
        vfs = _virtual_functions(dev)
        if vfs:
            entry["vfGroups"] = [{"vfs": [{"minor": -1, "busID": b} for b in vfs]}]
        if not healthy:
            entry["conditions"] = [_condition(False, "PortNotActive", f"port states {states}")]
        rdma.append(entry)
    out.devices.extend(sorted(rdma, key=lambda d: d["minor"]))


def _virtual_functions(dev: Path) -> list[str]:
    try:
        if int(_read(dev / "sriov_numvfs") or "0") <= 0:
            return []
        links = [name for name in os.listdir(dev) if name.startswith("virtfn")]
    except (OSError, ValueError):
        return []
    return sorted(os.path.basename(os.path.realpath(dev / link)) for link in links)


def discover(host: HostPaths, nvml: NVML | None) -> Discovery:
    """Scan the host; never raises for a device problem (those land in ``errors`` and ``health``)."""
    out = Discovery()
    _discover_gpus(host, nvml, out)
    _discover_rdma(host, out)
    out.devices.sort(key=lambda d: (d["type"], d["minor"]))
    return out
