"""The proxy's pod and container metadata (Koordinator's ``runtimeproxy/store``).

A container call carries only ids (``StartContainer(container_id)``), but its hook request needs the pod's
metadata, labels and annotations and the container's resources: the proxy keeps what it learned at
``RunPodSandbox`` (by sandbox id) and ``CreateContainer`` (by container id), with the hook servers' edits
merged in, and forgets it at ``StopPodSandbox`` / ``StopContainer`` as Koordinator does. At start it fills
itself from the runtime's ``ListPodSandbox`` / ``ListContainers`` (failover), so a restarted proxy still knows
the pods that were running.

Entries are copies: readers get their own message, so a call in flight never sees another call's edits.
"""

from __future__ import annotations

import threading

from koord_framework.koordlet.runtimehooks.client import ContainerResourceHookRequest, PodSandboxHookRequest

__all__ = ["MetaStore"]


def _copy_pod(msg: PodSandboxHookRequest) -> PodSandboxHookRequest:
    out = PodSandboxHookRequest()
    out.CopyFrom(msg)
    return out


def _copy_container(msg: ContainerResourceHookRequest) -> ContainerResourceHookRequest:
    out = ContainerResourceHookRequest()
    out.CopyFrom(msg)
    return out


class MetaStore:
    """Pod infos by sandbox id, container infos by container id. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, PodSandboxHookRequest] = {}
        self._containers: dict[str, ContainerResourceHookRequest] = {}

    def write_pod(self, sandbox_id: str, info: PodSandboxHookRequest) -> None:
        with self._lock:
            self._pods[sandbox_id] = _copy_pod(info)

    def pod(self, sandbox_id: str) -> PodSandboxHookRequest | None:
        with self._lock:
            info = self._pods.get(sandbox_id)
            return _copy_pod(info) if info is not None else None

    def delete_pod(self, sandbox_id: str) -> None:
        with self._lock:
            self._pods.pop(sandbox_id, None)

    def write_container(self, container_id: str, info: ContainerResourceHookRequest) -> None:
        with self._lock:
            self._containers[container_id] = _copy_container(info)

    def container(self, container_id: str) -> ContainerResourceHookRequest | None:
        with self._lock:
            info = self._containers.get(container_id)
            return _copy_container(info) if info is not None else None

    def delete_container(self, container_id: str) -> None:
        with self._lock:
            self._containers.pop(container_id, None)

    def sizes(self) -> tuple[int, int]:
        with self._lock:
            return len(self._pods), len(self._containers)
