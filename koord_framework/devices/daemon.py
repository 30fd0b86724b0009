"""The device daemon: scan the host, write the node's ``Device`` object and GPU labels, repeat.

One ``sync`` = one scan (``discovery.discover``) and one write: the Device named after the node
(``scheduling.koordinator.sh/v1alpha1``, owned by the Node) gets the scanned devices and the GPU labels
(``node.koordinator.sh/gpu-vendor``, ``gpu-model``, ``gpu-driver-version``), which are also merged into the
Node's labels. As koordlet does: devices sorted by (type, minor); nothing is written when devices and labels
are unchanged; a condition keeps its ``lastTransitionTime`` while its status stays the same; a missing
Device is created. Write failures are reported and retried on the next round: the daemon keeps running.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from koord_framework.cluster.clock import format_time
from koord_framework.cluster.port import ClusterPort
from koord_framework.devices.discovery import Discovery, discover
from koord_framework.devices.nvml import NVML
from koord_framework.errors import KoordError
from koord_framework.koordlet.hostpaths import HostPaths

__all__ = ["DeviceDaemon", "SyncResult"]

DEVICE_API_VERSION = "scheduling.koordinator.sh/v1alpha1"


@dataclass
class SyncResult:
    """What one round did: ``action`` is ``create``, ``update``, ``unchanged``, ``printed`` (no cluster) or
    ``failed``."""

    time: float
    device: dict[str, Any]
    labels: dict[str, str]
    action: str
    errors: list[str] = field(default_factory=list)
    nvml: str = ""

    def as_dict(self, timestamp: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if timestamp:
            out["timestamp"] = format_time(self.time)
        out |= {"action": self.action, "nvml": self.nvml, "labels": self.labels, "device": self.device}
        if self.errors:
            out["errors"] = self.errors
        return out


def _strip_times(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(devices)
    for d in out:
        for c in d.get("conditions") or ():
            c.pop("lastTransitionTime", None)
    return out


class DeviceDaemon:
    """Scans ``host`` and reports into ``cluster`` (or only prints, without a cluster)."""

    def __init__(
        self,
        node_name: str,
        cluster: ClusterPort | None,
        host: HostPaths,
        nvml: NVML | None,
        now: Callable[[], float],
    ) -> None:
        self.node_name = node_name
        self.cluster = cluster
        self.host = host
        self.nvml = nvml
        self.now = now

    def scan(self) -> Discovery:
        return discover(self.host, self.nvml)

    def _device(self, found: Discovery, old: dict[str, Any] | None, now: float) -> dict[str, Any]:
        old_conditions: dict[tuple[str, str], dict[str, Any]] = {}
        for d in (old or {}).get("spec", {}).get("devices") or ():
            for c in d.get("conditions") or ():
                old_conditions[(str(d.get("id")), str(c.get("type")))] = c
        devices = copy.deepcopy(found.devices)
        for d in devices:
            for c in d.get("conditions") or ():
                prev = old_conditions.get((str(d.get("id")), str(c.get("type"))))
                same = (
                    prev is not None and prev.get("status") == c["status"] and prev.get("lastTransitionTime")
                )
                c["lastTransitionTime"] = prev["lastTransitionTime"] if same and prev else format_time(now)
        meta: dict[str, Any] = {"name": self.node_name}
        if found.labels:
            meta["labels"] = dict(sorted(found.labels.items()))
        return {
            "apiVersion": DEVICE_API_VERSION,
            "kind": "Device",
            "metadata": meta,
            "spec": {"devices": devices},
        }

    def sync(self) -> SyncResult:
        now = self.now()
        found = self.scan()
        errors = list(found.errors)
        if self.cluster is None:
            device = self._device(found, None, now)
            return SyncResult(now, device, found.labels, "printed", errors, found.nvml)
        try:
            old = self.cluster.try_get("Device", self.node_name)
            device = self._device(found, old, now)
            action = self._write(device, old, found.labels)
            self._label_node(found.labels, errors)
        except KoordError as err:
            device = self._device(found, None, now)
            return SyncResult(
                now, device, found.labels, "failed", [*errors, f"write Device: {err}"], found.nvml
            )
        return SyncResult(now, device, found.labels, action, errors, found.nvml)

    def _write(self, device: dict[str, Any], old: dict[str, Any] | None, labels: dict[str, str]) -> str:
        assert self.cluster is not None
        if old is None:
            node = self.cluster.try_get("Node", self.node_name)
            if node is not None:
                device["metadata"]["ownerReferences"] = [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": self.node_name,
                        "uid": (node.get("metadata") or {}).get("uid", ""),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ]
            self.cluster.create(device)
            return "create"
        old_devices = (old.get("spec") or {}).get("devices") or []
        old_labels = (old.get("metadata") or {}).get("labels") or {}
        if _strip_times(old_devices) == _strip_times(device["spec"]["devices"]) and all(
            old_labels.get(k) == v for k, v in labels.items()
        ):
            return "unchanged"
        updated = copy.deepcopy(old)
        updated["spec"] = device["spec"]
        updated.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
        self.cluster.update(updated)
        device["metadata"] = updated["metadata"]
        return "update"

    def _label_node(self, labels: dict[str, str], errors: list[str]) -> None:
        assert self.cluster is not None
        if not labels:
            return
        node = self.cluster.try_get("Node", self.node_name)
        if node is None:
            errors.append(f"node {self.node_name} not found: labels not written")
            return
        current = (node.get("metadata") or {}).get("labels") or {}
        missing = {k: v for k, v in labels.items() if current.get(k) != v}
        if missing:
            self.cluster.patch("Node", self.node_name, "", {"metadata": {"labels": missing}})

    def run(
        self,
        stop: threading.Event,
        sleep_interval: float,
        on_result: Callable[[SyncResult], None],
        oneshot: bool = False,
    ) -> None:
        """Sync, report, sleep; until ``stop`` (or once). A failed write (``sync``) or an unreadable host file
        in a round is reported and retried on the next round; any other exception is a bug that stops the
        work, so it is raised (the component runner then ends the process, naming it: issue 24)."""
        while True:
            try:
                result = self.sync()
            except OSError as err:  # a host file that vanished mid-scan: the next round retries
                now = self.now()
                result = SyncResult(now, {}, {}, "failed", [f"{type(err).__name__}: {err}"])
            on_result(result)
            if oneshot or stop.wait(sleep_interval):
                return
