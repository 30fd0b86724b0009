"""Fake GPU/RDMA machines for the device daemon: a sysfs tree on disk and an NVML that answers from it.

``FakeMachine.materialize(root)`` writes what the daemon reads, laid out as Linux does: PCI functions under
their root complex (``devices/pci0000:3a/0000:3a:00.0/...``, with PCIe switch bridges in between),
``bus/pci/devices/<bdf>`` and ``bus/pci/drivers/nvidia/<bdf>`` symlinks, ``vendor``/``class``/``numa_node``,
``class/infiniband/<ibdev>`` with port states, and SR-IOV ``virtfn*``/``physfn`` links. ``FakeNVML`` answers
for the machine's GPUs and can be told to be absent, or to fail for one GPU or from the n-th call on (a
driver dying mid-scan). The presets are the machines the daemon's tests check field by field.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from koord_framework.devices.nvml import NVML, GPUInfo, NVMLError, NVMLUnavailable
from koord_framework.koordlet.hostpaths import HostPaths

__all__ = [
    "FakeGPU",
    "FakeMachine",
    "FakeNIC",
    "FakeNVML",
    "h100_nvlink_8x",
    "no_devices",
    "pcie_switch_2gpu_2nic",
    "unhealthy_gpu_machine",
]

H100_MEMORY = 85_520_809_984  # 81559 MiB, what NVML reports for an H100 80GB HBM3


@dataclass(frozen=True)
class FakeGPU:
    bus_id: str
    root: str
    """Root complex, e.g. ``pci0000:17``."""
    numa: int
    uuid: str
    minor: int
    memory: int = H100_MEMORY
    name: str = "NVIDIA H100 80GB HBM3"
    switch: str = ""
    """Bus id of the PCIe switch port above the device ("" for a device right under a root port)."""
    nvlink_peers: tuple[int, ...] = ()
    """Minors this GPU has NVLink to (recorded for callers; Koordinator's Device has no NVLink field)."""


@dataclass(frozen=True)
class FakeNIC:
    bus_id: str
    root: str
    numa: int
    ibdev: str
    ports: tuple[str, ...] = ("4: ACTIVE",)
    vfs: int = 0
    switch: str = ""


@dataclass
class FakeMachine:
    gpus: list[FakeGPU] = field(default_factory=list)
    nics: list[FakeNIC] = field(default_factory=list)
    driver: str = "550.54.15"
    nvidia_driver_bound: bool = True
    """False: GPUs are on the PCI bus but not bound to the nvidia driver (NVML absent)."""

    def materialize(self, root: Path) -> HostPaths:
        sys = root / "sys"
        (sys / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
        (sys / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
        for gpu in self.gpus:
            path = _function(sys, gpu.root, gpu.switch, gpu.bus_id, "0x10de", "0x030200", gpu.numa)
            if self.nvidia_driver_bound:
                driver = sys / "bus" / "pci" / "drivers" / "nvidia"
                driver.mkdir(parents=True, exist_ok=True)
                _link(driver / gpu.bus_id, path)
        for nic in self.nics:
            path = _function(sys, nic.root, nic.switch, nic.bus_id, "0x15b3", "0x020700", nic.numa)
            ib = sys / "class" / "infiniband" / nic.ibdev
            for i, state in enumerate(nic.ports, start=1):
                (ib / "ports" / str(i)).mkdir(parents=True, exist_ok=True)
                (ib / "ports" / str(i) / "state").write_text(state + "\n")
            _link(ib / "device", path)
            (path / "sriov_numvfs").write_text(f"{nic.vfs}\n")
            bus, _, _ = nic.bus_id.rpartition(":")
            for v in range(nic.vfs):
                vf_bdf = f"{bus}:{(v + 2) // 8:02x}.{(v + 2) % 8}"  # functions 00.2, 00.3, ...
                vf = path.parent / vf_bdf
                vf.mkdir(parents=True, exist_ok=True)
                (vf / "class").write_text("0x020700\n")
                (vf / "numa_node").write_text(f"{nic.numa}\n")
                _link(vf / "physfn", path)
                _link(path / f"virtfn{v}", vf)
                _link(sys / "bus" / "pci" / "devices" / vf_bdf, vf)
        return HostPaths.under(root)


def _function(sys: Path, root: str, switch: str, bdf: str, vendor: str, cls: str, numa: int) -> Path:
    domain_bus = root[3:]  # pci0000:17 -> 0000:17
    base = sys / "devices" / root / f"{domain_bus}:00.0"
    if switch:
        base = base / switch
    path = base / bdf
    path.mkdir(parents=True, exist_ok=True)
    (path / "vendor").write_text(vendor + "\n")
    (path / "class").write_text(cls + "\n")
    (path / "numa_node").write_text(f"{numa}\n")
    _link(sys / "bus" / "pci" / "devices" / bdf, path)
    return path


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        return
    os.symlink(os.path.relpath(target, link.parent), link)


class FakeNVML(NVML):
    """Answers for a ``FakeMachine``'s GPUs.

    ``available=False``: no driver (``open`` raises ``NVMLUnavailable``). ``broken``: bus ids NVML errors on.
    ``fail_after``: every ``gpu`` call after that many succeeds raises (the driver went away mid-scan).
    """

    def __init__(
        self,
        machine: FakeMachine,
        *,
        available: bool = True,
        broken: frozenset[str] = frozenset(),
        fail_after: int | None = None,
    ) -> None:
        self.machine = machine
        self.available = available
        self.broken = broken
        self.fail_after = fail_after
        self.calls = 0
        self.opened = 0
        self.closed = 0

    def open(self) -> None:
        if not self.available:
            raise NVMLUnavailable("NVML Shared Library Not Found")
        self.opened += 1

    def close(self) -> None:
        self.closed += 1

    def driver_version(self) -> str:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise NVMLError("GPU is lost")
        return self.machine.driver

    def gpu(self, bus_id: str) -> GPUInfo:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise NVMLError("nvmlDeviceGetHandleByPciBusId: GPU is lost")
        if bus_id in self.broken:
            raise NVMLError("nvmlDeviceGetHandleByPciBusId: Unknown Error")
        for gpu in self.machine.gpus:
            if gpu.bus_id == bus_id:
                return GPUInfo(gpu.uuid, gpu.minor, gpu.memory, gpu.name)
        raise NVMLError(f"nvmlDeviceGetHandleByPciBusId: Not Found ({bus_id})")


# --- the machines the tests check ---------------------------------------------------------------------
_H100_ROOTS = [
    "pci0000:17",
    "pci0000:3a",
    "pci0000:5d",
    "pci0000:80",
    "pci0000:97",
    "pci0000:ba",
    "pci0000:d7",
    "pci0000:e9",
]


def h100_nvlink_8x() -> FakeMachine:
    """8×H100 SXM (one per root complex, four per NUMA node, all NVLink-connected) and two RDMA NICs."""
    gpus = []
    for minor, root in enumerate(_H100_ROOTS):
        bus = int(root[-2:], 16) + 1
        gpus.append(
            FakeGPU(
                bus_id=f"0000:{bus:02x}:00.0",
                root=root,
                numa=minor // 4,
                uuid=f"GPU-h100-0000-0000-0000-00000000000{minor}",
                minor=minor,
                nvlink_peers=tuple(m for m in range(8) if m != minor),
            )
        )
    nics = [
        FakeNIC("0000:1f:00.0", "pci0000:17", 0, "mlx5_0", vfs=2),
        FakeNIC("0000:9f:00.0", "pci0000:97", 1, "mlx5_1", vfs=2),
    ]
    return FakeMachine(gpus, nics)


def pcie_switch_2gpu_2nic() -> FakeMachine:
    """Two A100s and two ConnectX NICs (4 VFs each) behind one PCIe switch under ``pci0000:3a``."""
    switch = "0000:3b:00.0"
    gpus = [
        FakeGPU(
            "0000:3c:00.0", "pci0000:3a", 0, "GPU-a100-a", 0, 42_949_672_960, "NVIDIA A100-SXM4-40GB", switch
        ),
        FakeGPU(
            "0000:3d:00.0", "pci0000:3a", 0, "GPU-a100-b", 1, 42_949_672_960, "NVIDIA A100-SXM4-40GB", switch
        ),
    ]
    nics = [
        FakeNIC("0000:3e:00.0", "pci0000:3a", 0, "mlx5_0", vfs=4, switch=switch),
        FakeNIC("0000:3f:00.0", "pci0000:3a", 0, "mlx5_1", vfs=4, switch=switch),
    ]
    return FakeMachine(gpus, nics)


def unhealthy_gpu_machine() -> tuple[FakeMachine, frozenset[str]]:
    """Four T4s, NVML errors on the third; one NIC whose port is down. Returns the machine and the bad bus."""
    gpus = [
        FakeGPU(f"0000:{0x18 + i:02x}:00.0", "pci0000:17", 0, f"GPU-t4-{i}", i, 16_106_127_360, "Tesla T4")
        for i in range(4)
    ]
    nics = [FakeNIC("0000:5e:00.0", "pci0000:5d", 0, "mlx5_0", ports=("1: DOWN",))]
    return FakeMachine(gpus, nics), frozenset({"0000:1a:00.0"})


def no_devices() -> FakeMachine:
    """A machine with neither GPUs nor RDMA NICs."""
    return FakeMachine()
