"""The bvt rule: group identity values by QoS class, from the NodeSLO's ``resourceQOSStrategy``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.qos import KubeQoS, QoSClass

__all__ = ["BvtRule", "parse_rule"]

GROUP_IDENTITY_POLICY = "groupIdentity"
NONE_BVT = 0
"""Koordinator's ``NoneCPUQOS().GroupIdentity``: what a pod no parameter covers gets."""


@dataclass(frozen=True, slots=True)
class BvtRule:
    enable: bool
    pod_qos_params: Mapping[QoSClass, int] = field(default_factory=dict)
    kube_qos_dir_params: Mapping[KubeQoS, int] = field(default_factory=dict)
    kube_qos_pod_params: Mapping[KubeQoS, int] = field(default_factory=dict)

    def pod_value(self, qos: QoSClass, kube_qos: KubeQoS) -> int:
        if qos in self.pod_qos_params:
            return self.pod_qos_params[qos]
        return self.kube_qos_pod_params.get(kube_qos, NONE_BVT)

    def kube_qos_dir_value(self, kube_qos: KubeQoS) -> int:
        return self.kube_qos_dir_params.get(kube_qos, NONE_BVT)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BvtRule:
        """The inverse of ``as_dict``."""
        return cls(
            enable=bool(raw["enable"]),
            pod_qos_params={QoSClass(k): int(v) for k, v in raw["podQOSParams"].items()},
            kube_qos_dir_params={KubeQoS(k): int(v) for k, v in raw["kubeQOSDirParams"].items()},
            kube_qos_pod_params={KubeQoS(k): int(v) for k, v in raw["kubeQOSPodParams"].items()},
        )

    def as_dict(self) -> dict[str, Any]:
        """The vectors' spelling (Koordinator's field names)."""
        return {
            "enable": self.enable,
            "podQOSParams": {k.value: v for k, v in self.pod_qos_params.items()},
            "kubeQOSDirParams": {k.value: v for k, v in self.kube_qos_dir_params.items()},
            "kubeQOSPodParams": {k.value: v for k, v in self.kube_qos_pod_params.items()},
        }


def _class_value(strategy: Mapping[str, Any], key: str, policy_is_gi: bool) -> tuple[bool, int]:
    """(the class is on, its group identity): off classes count as 0."""
    klass = strategy.get(key) or {}
    cpu_qos = klass.get("cpuQOS") or {} if isinstance(klass, Mapping) else {}
    on = policy_is_gi and cpu_qos.get("enable") is True
    value = cpu_qos.get("groupIdentity")
    if on and value is not None and not isinstance(value, int):
        raise ValueError(f"resourceQOSStrategy.{key}.cpuQOS.groupIdentity must be an integer, got {value!r}")
    return on, int(value) if on and value is not None else 0


def parse_rule(strategy: Mapping[str, Any]) -> BvtRule:
    """The rule of a merged ``resourceQOSStrategy`` (Koordinator's ``bvtPlugin.parseRule``)."""
    policies = strategy.get("policies") or {}
    cpu_policy = policies.get("cpuPolicy") if isinstance(policies, Mapping) else None
    policy_is_gi = cpu_policy in (None, "", GROUP_IDENTITY_POLICY)
    lsr_on, lsr = _class_value(strategy, "lsrClass", policy_is_gi)
    ls_on, ls = _class_value(strategy, "lsClass", policy_is_gi)
    be_on, be = _class_value(strategy, "beClass", policy_is_gi)
    # Guaranteed pods without a Koordinator QoS run as LSR when LSR is on, else as LS; the Guaranteed *dir*
    # (the kubepods root) stays 0 so that host processes under it are not promoted.
    guaranteed_pod = lsr if lsr_on else ls if ls_on else 0
    return BvtRule(
        enable=lsr_on or ls_on or be_on,
        pod_qos_params={QoSClass.LSE: lsr, QoSClass.LSR: lsr, QoSClass.LS: ls, QoSClass.BE: be},
        kube_qos_dir_params={KubeQoS.GUARANTEED: 0, KubeQoS.BURSTABLE: ls, KubeQoS.BEST_EFFORT: be},
        kube_qos_pod_params={
            KubeQoS.GUARANTEED: guaranteed_pod,
            KubeQoS.BURSTABLE: ls,
            KubeQoS.BEST_EFFORT: be,
        },
    )
