"""How runtime requests reach the hooks: the transport seam.

Koordinator's koordlet has three ways in (spec/node.md §3.1): the runtime proxy calling its
``RuntimeHookService`` (``HookServer``, here), an NRI plugin registered with containerd >= 1.7 / CRI-O
(``--enable-nri-runtime-hook``, on by default there), and the reconciler. koord has the first and the
third; NRI is left out on purpose because Debian's containerd (1.6) has no NRI to test against, and an
untested transport would be a stub. What an NRI transport has to do is fixed by this protocol and by
docs/runtime-hooks.md ("NRI"):

* on the NRI ``RunPodSandbox`` event run ``Stage.PRE_RUN_POD_SANDBOX`` and write the pod-level result to
  the pod's cgroup through the koordlet's ``ResourceExecutor`` (NRI has no pod adjustment);
* ``CreateContainer`` -> ``PRE_CREATE_CONTAINER``, answered as a ``ContainerAdjustment`` (cpuset cpus and
  mems, cpu quota/period/shares, memory limit, RDT class, env, mounts -- the only transport that can add
  the ``add_mounts`` of ``ContainerResponse``);
* ``UpdateContainer`` -> ``PRE_UPDATE_CONTAINER_RESOURCES``, answered as a ``ContainerUpdate``;
* ``RemovePodSandbox`` -> ``PRE_REMOVE_RUN_POD_SANDBOX`` (no answer);
* connect to ``<runtime root>/nri/nri.sock`` as plugin ``koordlet_nri`` index ``00``, reconnect with
  Koordinator's back-off (1 s doubling), and report ``serving`` only while registered.

The koordlet runs every configured transport on its ``ComponentRunner`` through this protocol: started
before the agent loop, ``ready`` only while all serve, stopped on shutdown.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["HookTransport"]


@runtime_checkable
class HookTransport(Protocol):
    """One way runtime requests reach the koordlet's ``HookManager`` (``HookServer`` is one)."""

    @property
    def serving(self) -> bool:
        """True while requests can arrive (the socket listens, the NRI plugin is registered)."""
        ...

    def start(self) -> None:
        """Begin serving; raises when it cannot (the koordlet then exits with the reason)."""
        ...

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving and release what ``start`` took (sockets, registrations)."""
        ...
