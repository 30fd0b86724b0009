"""The pluggy hook specifications: one per runtime stage, plus the reconciler's kubeQOS level and rules.

Contract of every stage hook (``request``, ``response``):

* read only ``request``; edit only ``response`` (the hook gets its own copy: the edits of a hook that
  raises are dropped, so nothing is half-applied);
* raise ``HookError`` (or any exception) for bad input -- a malformed annotation is an error, not a silent
  skip; the failure policy of that hook decides whether the request goes on;
* return nothing; do not block (no I/O other than reading host facts through the context);
* be idempotent: the reconciler calls the pod and container hooks again for running pods every tick.
* be safe to call from several threads at once: the hook server's workers serve concurrent runtime
  requests while the reconciler runs in the agent's loop (keep per-call data local; rules are replaced
  whole, never edited in place).

Plugins mark their methods with ``hookimpl``; only the ``HookManager`` facade calls ``pm.hook.*``.
"""

from __future__ import annotations

import pluggy

from koord_framework.koordlet.nodeslo import NodeSLO
from koord_framework.koordlet.runtimehooks.protocol import (
    ContainerRequest,
    ContainerResponse,
    KubeQOSRequest,
    KubeQOSResponse,
    PodSandboxRequest,
    PodSandboxResponse,
)
from koord_framework.koordlet.states import NodeState

__all__ = ["PROJECT", "RuntimeHookSpec", "hookimpl", "hookspec"]

PROJECT = "koord.koordlet.runtimehooks"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# NodeSLO is imported for the ``update_rule`` spec's documentation of what ``state.node_slo`` holds.
_ = NodeSLO


class RuntimeHookSpec:
    """The hook specifications (``pm.add_hookspecs(RuntimeHookSpec)``)."""

    @hookspec
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        """Before the pod sandbox runs: pod cgroup values (shares, quota, memory, bvt), labels,
        annotations, cgroup parent. The reconciler calls it again for every running pod (pod level)."""

    @hookspec
    def post_stop_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        """After the sandbox stopped: release what was kept for the pod."""

    @hookspec
    def pre_remove_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        """Before the sandbox is removed (Koordinator's resctrl group clean-up)."""

    @hookspec
    def pre_create_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        """Before a container is created: its resources (shares, quota, cpuset, memory), env, mounts."""

    @hookspec
    def pre_start_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        """Before a created container starts."""

    @hookspec
    def post_start_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        """After a container started (its cgroup exists)."""

    @hookspec
    def pre_update_container_resources(self, request: ContainerRequest, response: ContainerResponse) -> None:
        """Before the runtime updates a container's resources; the reconciler calls it for every running
        container (container level), with ``request.resources`` read from the container's cgroup."""

    @hookspec
    def post_stop_container(self, request: ContainerRequest, response: ContainerResponse) -> None:
        """After a container stopped."""

    @hookspec
    def reconcile_kube_qos(self, request: KubeQOSRequest, response: KubeQOSResponse) -> None:
        """Reconciler only: the values of one kube QoS dir (Guaranteed, Burstable, BestEffort)."""

    @hookspec
    def update_rule(self, state: NodeState) -> bool | None:
        """Re-evaluate the hook's rule from the node's NodeSLO, topology and metadata (``state``).

        Return True when the rule changed: the reconciler then re-applies every level at once (Koordinator's
        rule callbacks) instead of waiting for its interval."""
