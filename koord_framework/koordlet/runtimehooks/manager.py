"""The hook extension point's runtime: one pluggy ``PluginManager`` per koordlet, and its typed facade.

stevedore selects, pluggy fans out: ``HookManager.from_config`` loads the providers the koordlet config
enables (by entry-point name, through the plugin registry, so a typo lists what is installed), builds each
with its typed args, and registers a *guarded adapter* per provider in this manager's own
``pluggy.PluginManager``. The facade methods (``run_pod``, ``run_container``, ``run_kube_qos``,
``update_rules``) are the only callers of ``pm.hook.*``.

The adapter gives every call what Koordinator's ``RunHooks`` gives it, per hook:

* order: hooks run sorted by name (pluggy calls the last registered first, so adapters are registered in
  reverse name order);
* isolation: the hook edits a private copy of the response, merged back only when it returns, so a hook
  that raises leaves no half-applied edit;
* failure policy: ``Fail`` stops the chain and the facade raises ``HookFailed``; ``Ignore`` and ``None``
  record the error in the result and go on;
* timing: every call is observed in ``koordlet_runtime_hook_invoked_duration_milliseconds{hook,stage,status}``
  on the koordlet's registry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pluggy
from prometheus_client import CollectorRegistry, Histogram

from koord_framework.errors import KoordError
from koord_framework.koordlet.runtimehooks.hookspecs import PROJECT, RuntimeHookSpec, hookimpl
from koord_framework.koordlet.runtimehooks.plugin import HookContext, RuntimeHook
from koord_framework.koordlet.runtimehooks.protocol import (
    ContainerRequest,
    ContainerResponse,
    FailurePolicy,
    KubeQOSRequest,
    KubeQOSResponse,
    PodSandboxRequest,
    PodSandboxResponse,
    Stage,
    copy_response,
    merge_response,
)
from koord_framework.koordlet.states import NodeState
from koord_framework.registry import PluginRegistry

log = logging.getLogger(__name__)

__all__ = ["HookFailed", "HookFailure", "HookManager", "HookProgress", "HookResult"]

RECONCILE_KUBE_QOS = "reconcile_kube_qos"
UPDATE_RULE = "update_rule"
_STAGE_HOOKS = {s.hook_name: s.value for s in Stage} | {RECONCILE_KUBE_QOS: "ReconcileKubeQOS"}

R = TypeVar("R", PodSandboxResponse, ContainerResponse, KubeQOSResponse)


@dataclass(frozen=True, slots=True)
class HookFailure:
    """One hook's error on one request: names pod, container and hook."""

    hook: str
    stage: str
    pod: str
    container: str
    error: str
    policy: FailurePolicy

    def __str__(self) -> str:
        where = f"pod {self.pod}" + (f" container {self.container}" if self.container else "")
        return f"runtime hook {self.hook} failed at {self.stage} for {where}: {self.error}"


class HookFailed(KoordError):
    """A hook whose failure policy is ``Fail`` failed: the runtime request must be refused."""

    def __init__(self, failure: HookFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass(slots=True)
class HookResult(Generic[R]):
    """The merged response of every hook that succeeded, and the ignored failures."""

    response: R
    failures: list[HookFailure] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    """Hooks that returned normally, in call order."""


@dataclass(slots=True)
class HookProgress:
    """Where a call is, readable from another thread: the hook server names the hook that hangs when a
    request runs past its timeout."""

    current: str = ""
    """The hook running now (``""`` between hooks and after the last)."""


@dataclass(slots=True)
class _Call:
    stage: str
    pod: str
    container: str
    failures: list[HookFailure] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    progress: HookProgress = field(default_factory=HookProgress)


_CURRENT: ContextVar[_Call | None] = ContextVar("koord_runtimehook_call", default=None)


class _Abort(Exception):
    def __init__(self, failure: HookFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


class HookManager:
    """The koordlet's runtime-hook registry and facade (one per koordlet instance)."""

    def __init__(
        self,
        context: HookContext,
        *,
        failure_policy: FailurePolicy | str = FailurePolicy.IGNORE,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.context = context
        self.failure_policy = FailurePolicy(failure_policy)
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(RuntimeHookSpec)
        self._hooks: dict[str, RuntimeHook[Any]] = {}
        self._latency = Histogram(
            "koordlet_runtime_hook_invoked_duration_milliseconds",
            "Time one runtime hook took on one request, by hook, stage and status.",
            ["hook", "stage", "status"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000),
            registry=registry if registry is not None else context.registry,
        )

    # --- construction ---------------------------------------------------------------------------------
    @classmethod
    def from_config(
        cls,
        enabled: Sequence[str],
        context: HookContext,
        *,
        args: Mapping[str, Mapping[str, Any] | None] | None = None,
        failure_policy: FailurePolicy | str = FailurePolicy.IGNORE,
        plugin_registry: PluginRegistry | None = None,
        registry: CollectorRegistry | None = None,
    ) -> HookManager:
        """Load the named providers through stevedore (``UnknownPluginError`` lists what is installed)."""
        plugins = plugin_registry if plugin_registry is not None else PluginRegistry.discover("runtimehooks")
        classes = plugins.load(list(enabled))
        manager = cls(context, failure_policy=failure_policy, registry=registry)
        for name, klass in zip(enabled, classes, strict=True):
            if not issubclass(klass, RuntimeHook):
                raise TypeError(f"runtime hook {name}: {klass.__name__} is not a RuntimeHook")
            raw = (args or {}).get(name)
            manager.register(klass(klass.parse_args(raw), context))
        return manager

    def register(self, hook: RuntimeHook[Any]) -> None:
        """Add a provider; re-registers every adapter so the call order stays sorted by name."""
        if not hook.name:
            raise ValueError(f"{type(hook).__name__} has no name")
        if hook.name in self._hooks:
            raise ValueError(f"runtime hook {hook.name} is already registered")
        self._hooks[hook.name] = hook
        for registered, _plugin in list(self.pm.list_name_plugin()):
            self.pm.unregister(name=registered)
        for name in sorted(self._hooks, reverse=True):
            self.pm.register(self._adapter(self._hooks[name]), name=name)

    @property
    def hooks(self) -> list[RuntimeHook[Any]]:
        return [self._hooks[n] for n in sorted(self._hooks)]

    def hook(self, name: str) -> RuntimeHook[Any]:
        return self._hooks[name]

    def hooks_for(self, stage: Stage | str) -> list[str]:
        """Names of the hooks serving ``stage`` (pluggy name), in call order."""
        hook_name = Stage(stage).hook_name if stage in Stage._value2member_map_ else str(stage)
        caller = getattr(self.pm.hook, hook_name)
        return [impl.plugin_name for impl in reversed(caller.get_hookimpls())]

    def policy_of(self, hook: RuntimeHook[Any]) -> FailurePolicy:
        own = hook.failure_policy
        return own if own is not None else self.failure_policy

    def close(self) -> None:
        for name in sorted(self._hooks, reverse=True):
            try:
                self._hooks[name].close()
            except Exception:
                log.exception("closing runtime hook %s failed", name)

    # --- the facade: the only callers of pm.hook.* -----------------------------------------------------
    def run_pod(
        self,
        stage: Stage,
        request: PodSandboxRequest,
        response: PodSandboxResponse | None = None,
        *,
        progress: HookProgress | None = None,
    ) -> HookResult[PodSandboxResponse]:
        if not stage.is_pod_stage:
            raise ValueError(f"{stage} is a container stage")
        resp = response if response is not None else PodSandboxResponse()
        call = _Call(stage.value, request.pod_meta.key, "", progress=progress or HookProgress())
        with self._calling(call):
            getattr(self.pm.hook, stage.hook_name)(request=request, response=resp)
        return HookResult(resp, call.failures, call.ran)

    def run_container(
        self,
        stage: Stage,
        request: ContainerRequest,
        response: ContainerResponse | None = None,
        *,
        progress: HookProgress | None = None,
    ) -> HookResult[ContainerResponse]:
        if stage.is_pod_stage:
            raise ValueError(f"{stage} is a pod stage")
        resp = response if response is not None else ContainerResponse()
        call = _Call(
            stage.value,
            request.pod_meta.key,
            request.container_meta.name,
            progress=progress or HookProgress(),
        )
        with self._calling(call):
            getattr(self.pm.hook, stage.hook_name)(request=request, response=resp)
        return HookResult(resp, call.failures, call.ran)

    def run_kube_qos(self, request: KubeQOSRequest) -> HookResult[KubeQOSResponse]:
        resp = KubeQOSResponse()
        call = _Call(_STAGE_HOOKS[RECONCILE_KUBE_QOS], f"kubeQOS {request.kube_qos}", "")
        with self._calling(call):
            self.pm.hook.reconcile_kube_qos(request=request, response=resp)
        return HookResult(resp, call.failures, call.ran)

    def update_rules(self, state: NodeState) -> list[str]:
        """Re-evaluate every hook's rule; the names of the hooks whose rule changed. A hook whose rule
        parse raises keeps its previous rule (logged), as Koordinator's rule parse errors do."""
        call = _Call("UpdateRule", "", "")
        token = _CURRENT.set(call)
        try:
            self.pm.hook.update_rule(state=state)
        finally:
            _CURRENT.reset(token)
        return call.ran

    @contextmanager
    def _calling(self, call: _Call) -> Iterator[None]:
        token = _CURRENT.set(call)
        try:
            yield
        except _Abort as abort:
            raise HookFailed(abort.failure) from abort.__cause__
        finally:
            _CURRENT.reset(token)

    # --- the guarded adapter ---------------------------------------------------------------------------
    def _adapter(self, hook: RuntimeHook[Any]) -> object:
        """A pluggy plugin object forwarding each stage ``hook`` implements through the guard."""
        adapter = type(f"{hook.name}Adapter", (), {})()
        for hook_name in (*_STAGE_HOOKS, UPDATE_RULE):
            method = getattr(hook, hook_name, None)
            if method is None or not self._is_impl(method):
                continue
            setattr(adapter, hook_name, self._guard(hook, hook_name, method))
        return adapter

    @staticmethod
    def _is_impl(method: Any) -> bool:
        return getattr(method, PROJECT + "_impl", None) is not None

    def _guard(self, hook: RuntimeHook[Any], hook_name: str, method: Callable[..., Any]) -> Any:
        if hook_name == UPDATE_RULE:

            def rule_impl(state: NodeState) -> None:
                call = _CURRENT.get()
                try:
                    if method(state) and call is not None:
                        call.ran.append(hook.name)
                except Exception:
                    log.exception("runtime hook %s: rule update failed", hook.name)

            return hookimpl(rule_impl)
        stage = _STAGE_HOOKS[hook_name]

        def impl(request: Any, response: Any) -> None:
            if not hook.enabled:
                return
            call = _CURRENT.get()
            mine = copy_response(response)
            if call is not None:
                call.progress.current = hook.name
            start = time.perf_counter()
            try:
                method(request, mine)
            except Exception as exc:
                self._observe(hook.name, stage, "failed", start)
                failure = HookFailure(
                    hook.name,
                    stage,
                    call.pod if call else "",
                    call.container if call else "",
                    f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc),
                    self.policy_of(hook),
                )
                log.warning("%s (failure policy %r)", failure, failure.policy.value)
                if failure.policy.stops:
                    raise _Abort(failure) from exc
                if call is not None:
                    call.failures.append(failure)
                return
            self._observe(hook.name, stage, "succeeded", start)
            merge_response(response, mine)
            if call is not None:
                call.ran.append(hook.name)
                call.progress.current = ""

        return hookimpl(impl)

    def _observe(self, hook: str, stage: str, status: str, start: float) -> None:
        self._latency.labels(hook, stage, status).observe((time.perf_counter() - start) * 1000.0)
