"""What to tell an operator when the API server does not serve a kind a component needs.

Kubernetes' own kinds (Pod, Node, Lease, ...) are always there on a supported cluster; every other kind is a
CustomResourceDefinition that has to be installed first. ``install_hint`` names it and the two ways this
project ships it: the manifests in ``configs/crds`` (one file per CRD, named ``<group>_<plural>.yaml`` as
Koordinator's ``config/crd/bases``) and the Helm chart's ``crds.*`` values (``crds.managed`` plus one switch
per plural, as Koordinator's chart). Kinds are looked up among the built-in ones and those the installed
distributions contribute (ADR 0004).
"""

from __future__ import annotations

from koord_framework.cluster.kinds import KIND_DISTRIBUTIONS, installed_kinds

__all__ = ["BUILTIN_GROUPS", "crd_file", "install_hint", "is_builtin"]

BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "coordination.k8s.io",
        "scheduling.k8s.io",
        "events.k8s.io",
        "discovery.k8s.io",
        "networking.k8s.io",
        "storage.k8s.io",
        "node.k8s.io",
        "rbac.authorization.k8s.io",
        "admissionregistration.k8s.io",
    }
)
"""API groups Kubernetes serves itself; a kind of any other group comes from a CRD."""


def is_builtin(kind: str) -> bool:
    info = installed_kinds().get(kind)
    return info is not None and info.group in BUILTIN_GROUPS


def crd_file(kind: str) -> str | None:
    """``configs/crds/<group>_<plural>.yaml`` for a custom kind; None for a built-in or unknown one."""
    info = installed_kinds().get(kind)
    if info is None or info.group in BUILTIN_GROUPS:
        return None
    return f"configs/crds/{info.group}_{info.plural}.yaml"


def install_hint(kind: str) -> str:
    """One sentence: how to make the API server serve ``kind``."""
    info = installed_kinds().get(kind)
    if info is None:
        dist = KIND_DISTRIBUTIONS.get(kind)
        if dist is not None:
            return f"{kind} is contributed by {dist}, which is not installed: pip install {dist}"
        return f"{kind} is not a kind this platform knows"
    if info.group in BUILTIN_GROUPS:
        return (
            f"{kind} ({info.api_version}) is built into Kubernetes: this API server is too old or has the "
            "API disabled"
        )
    return (
        f"install the CustomResourceDefinition {info.plural}.{info.group}: kubectl apply -f {crd_file(kind)} "
        f"(or the Helm chart with crds.managed=true and crds.{info.plural}=true)"
    )
