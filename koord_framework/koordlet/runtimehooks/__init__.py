"""The koordlet's runtime hooks (Koordinator's ``pkg/koordlet/runtimehooks``): the hook extension point.

stevedore selects (entry-point group ``koord.koordlet.runtimehooks``, by the names
``runtimeHooks.enabled`` of the koordlet config lists), pluggy fans out (one ``PluginManager`` per
koordlet, owned by ``HookManager``). Modules:

* ``protocol``: stages, failure policies, the typed requests and responses;
* ``hookspecs``: the pluggy specifications with their contracts, and the ``hookimpl`` marker;
* ``plugin``: ``RuntimeHook[Args]``, ``RuntimeHookArgs``, ``HookContext``, ``HookError``;
* ``manager``: ``HookManager``, the facade (the only caller of ``pm.hook.*``), failure policy, timing;
* ``reconciler``: the reconciler mode (kubeQOS / pod / container levels through the ``ResourceExecutor``);
* ``transport``: ``HookTransport``, the seam every way in implements (gRPC today, NRI later);
* ``server`` / ``client`` / ``registration`` / ``convert`` / ``proto``: ``RuntimeHookService`` over gRPC
  (imported on their own: they load grpcio, which a hook plugin never needs).
"""

from koord_framework.koordlet.runtimehooks.hookspecs import hookimpl
from koord_framework.koordlet.runtimehooks.manager import (
    HookFailed,
    HookFailure,
    HookManager,
    HookProgress,
    HookResult,
)
from koord_framework.koordlet.runtimehooks.plugin import HookContext, HookError, RuntimeHook, RuntimeHookArgs
from koord_framework.koordlet.runtimehooks.protocol import (
    ContainerMeta,
    ContainerRequest,
    ContainerResources,
    ContainerResponse,
    FailurePolicy,
    KubeQOSRequest,
    KubeQOSResponse,
    Mount,
    PodSandboxMeta,
    PodSandboxRequest,
    PodSandboxResponse,
    Stage,
)
from koord_framework.koordlet.runtimehooks.reconciler import Reconciler, ReconcileReport
from koord_framework.koordlet.runtimehooks.transport import HookTransport

__all__ = [
    "ContainerMeta",
    "ContainerRequest",
    "ContainerResources",
    "ContainerResponse",
    "FailurePolicy",
    "HookContext",
    "HookError",
    "HookFailed",
    "HookFailure",
    "HookManager",
    "HookProgress",
    "HookResult",
    "HookTransport",
    "KubeQOSRequest",
    "KubeQOSResponse",
    "Mount",
    "PodSandboxMeta",
    "PodSandboxRequest",
    "PodSandboxResponse",
    "ReconcileReport",
    "Reconciler",
    "RuntimeHook",
    "RuntimeHookArgs",
    "Stage",
    "hookimpl",
]
