"""The GroupIdentity hook: ``cpu.bvt_warp_ns`` of pods (PreRunPodSandbox, pod reconciler) and of the kube QoS
dirs (kubeQOS reconciler), by Koordinator QoS class, from the NodeSLO's ``resourceQOSStrategy``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from koord_framework.api.qos import KubeQoS, QoSClass, kube_qos_by_cgroup_parent, qos_class_raw
from koord_framework.koordlet.cgroups import CPU_BVT_WARP_NS
from koord_framework.koordlet.runtimehooks import (
    HookError,
    KubeQOSRequest,
    KubeQOSResponse,
    PodSandboxRequest,
    PodSandboxResponse,
    RuntimeHook,
    RuntimeHookArgs,
    hookimpl,
)
from koord_framework.koordlet.states import NodeState
from koord_plugin_groupidentity.rule import BvtRule, parse_rule

__all__ = ["ANNOTATION_POD_CPU_QOS", "GroupIdentity", "GroupIdentityArgs"]

ANNOTATION_POD_CPU_QOS = "koordinator.sh/cpuQOS"
SYSCTL_GROUP_IDENTITY = "sys/kernel/sched_group_identity_enabled"


class GroupIdentityArgs(RuntimeHookArgs):
    """GroupIdentity's args: the switch and the failure policy (the values come from the NodeSLO)."""


class GroupIdentity(RuntimeHook[GroupIdentityArgs]):
    name: ClassVar[str] = "GroupIdentity"
    Args = GroupIdentityArgs
    feature_gate: ClassVar[str] = "GroupIdentity"

    rule: BvtRule | None = None

    # --- rule -----------------------------------------------------------------------------------------
    @hookimpl
    def update_rule(self, state: NodeState) -> bool:
        """Parse the merged NodeSLO; True when the rule differs from the previous one."""
        if state.node_slo is None:
            return False
        strategy = state.node_slo.merged.get("resourceQOSStrategy")
        if not isinstance(strategy, dict):
            return False
        new = parse_rule(strategy)
        changed = new != self.rule
        self.rule = new
        return changed

    # --- host facts -----------------------------------------------------------------------------------
    def system_supported(self) -> bool:
        """``cpu.bvt_warp_ns`` exists under the kubepods dir, or the kernel has the group-identity sysctl."""
        layout = self.context.layout
        try:
            bvt = layout.file_path(CPU_BVT_WARP_NS, layout.kubepods_dir)
        except Exception:
            return self._sysctl_path().exists()
        return bvt.exists() or self._sysctl_path().exists()

    def _sysctl_path(self) -> Path:
        return self.context.host.proc / SYSCTL_GROUP_IDENTITY

    def sysctl_enabled(self) -> bool:
        """A kernel without the sysctl has bvt on whenever the file exists (older Anolis kernels)."""
        path = self._sysctl_path()
        if not path.exists():
            return True
        return path.read_text().strip() == "1"

    def _prepared(self) -> BvtRule | None:
        """The rule when cgroups should be set: supported, a rule, and the rule or the sysctl on."""
        if self.rule is None or not self.system_supported():
            return None
        if not self.rule.enable and not self.sysctl_enabled():
            return None
        return self.rule

    # --- hooks ----------------------------------------------------------------------------------------
    @hookimpl
    def pre_run_pod_sandbox(self, request: PodSandboxRequest, response: PodSandboxResponse) -> None:
        rule = self._prepared()
        if rule is None:
            return
        qos = qos_class_raw(request.labels)
        bvt = rule.pod_value(qos, kube_qos_by_cgroup_parent(request.cgroup_parent))
        override = pod_cpu_qos(request.annotations)
        if override is not None and qos is QoSClass.LS:
            gi = override.get("groupIdentity")
            if isinstance(gi, int):
                bvt = gi
            if override.get("enable") is not True:
                bvt = 0
        response.resources.cpu_bvt = bvt

    @hookimpl
    def reconcile_kube_qos(self, request: KubeQOSRequest, response: KubeQOSResponse) -> None:
        rule = self._prepared()
        if rule is None:
            return
        response.resources.cpu_bvt = rule.kube_qos_dir_value(KubeQoS(request.kube_qos))


def pod_cpu_qos(annotations: dict[str, str] | object) -> dict[str, object] | None:
    """The pod's ``koordinator.sh/cpuQOS`` annotation (``{"enable": bool, "groupIdentity": int}``)."""
    if not isinstance(annotations, dict) or ANNOTATION_POD_CPU_QOS not in annotations:
        return None
    raw = annotations[ANNOTATION_POD_CPU_QOS]
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as err:
        raise HookError(f"annotation {ANNOTATION_POD_CPU_QOS} is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise HookError(f"annotation {ANNOTATION_POD_CPU_QOS} must be an object, got {raw!r}")
    gi = value.get("groupIdentity")
    if gi is not None and (not isinstance(gi, int) or isinstance(gi, bool) or not -1 <= gi <= 2):
        raise HookError(f"annotation {ANNOTATION_POD_CPU_QOS}: groupIdentity must be -1..2, got {gi!r}")
    enable = value.get("enable")
    if enable is not None and not isinstance(enable, bool):
        raise HookError(f"annotation {ANNOTATION_POD_CPU_QOS}: enable must be a boolean, got {enable!r}")
    return value
