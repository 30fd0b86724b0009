"""The kinds the platform reads and writes, with the API coordinates both adapters need, and the seam through
which a plugin distribution contributes its own (ADR 0004).

``KindInfo`` describes a kind: group/version/kind, plural, scope, an optional validator and what its CRD
needs. The framework's built-in kinds are ``CORE_KINDS`` and ``KOORDINATOR_KINDS``; a distribution adds
kinds with an entry point in the ``koord.kinds`` group. Every cluster gathers its own ``KindRegistry``
(``KindRegistry.discover()``), and the informers, the manifest loader and ``configs/crds/generate.py`` read
kinds from it: nothing is registered process-wide.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any, Literal

KIND_ENTRY_POINT_GROUP = "koord.kinds"
"""Entry-point group through which a distribution contributes kinds (ADR 0004). An entry point names a
``KindInfo``, an iterable of them, or a callable without arguments returning either."""


class KindProblem(ValueError):
    """What a kind's validator raises for a bad object: the field (a path inside the object, such as
    ``spec.minMember``) and the message. The manifest loader adds the file and document."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


KindValidator = Callable[[Mapping[str, Any]], None]
"""Checks one object of the kind (kind, apiVersion and metadata already checked); raises ``KindProblem``."""


@dataclass(frozen=True)
class PrinterColumn:
    """A ``kubectl get`` column of the kind's CRD."""

    name: str
    json_path: str
    type: str = "string"


@dataclass(frozen=True)
class KindInfo:
    """A kind the platform reads and writes: its API coordinates and, for a custom resource, what its CRD
    needs. Core kinds are the framework's; a plugin distribution contributes its own through the
    ``koord.kinds`` entry-point group (ADR 0004)."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    validator: KindValidator | None = field(default=None, compare=False)
    """Checks an object of the kind as manifests load (``KindProblem`` names the field); None: only
    metadata and the ``spec`` mapping are checked."""
    alt_api_versions: frozenset[str] = frozenset()
    """apiVersions a manifest may carry besides the canonical one (older or alternative groups)."""
    custom: bool = True
    """A CustomResourceDefinition (``configs/crds/generate.py`` writes one); False for built-in API kinds."""
    short_names: tuple[str, ...] = ()
    status_subresource: bool = True
    printer_columns: tuple[PrinterColumn, ...] = ()
    extra_versions: tuple[str, ...] = ()
    """Further served versions of the CRD."""
    storage_version: str = ""
    """The CRD's storage version (default: ``version``)."""
    open_schema: bool = False
    """The CRD's schema leaves the whole object open (fields at the top level, as NodeResourceTopology's)."""
    approval: str = ""
    """``api-approved.kubernetes.io`` (the API server requires it for groups under k8s.io)."""
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def scope(self) -> Literal["Namespaced", "Cluster"]:
        return "Namespaced" if self.namespaced else "Cluster"

    def accepts_api_version(self, api_version: str) -> bool:
        return api_version == self.api_version or api_version in self.alt_api_versions


def _core(kind: str, group: str, version: str, plural: str, namespaced: bool, *alt: str) -> KindInfo:
    return KindInfo(kind, group, version, plural, namespaced, alt_api_versions=frozenset(alt), custom=False)


def _koordinator(kind: str, group: str, version: str, plural: str, namespaced: bool, **crd: Any) -> KindInfo:
    crd.setdefault("categories", ("koordinator",))
    return KindInfo(kind, group, version, plural, namespaced, **crd)


_AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")

CORE_KINDS: tuple[KindInfo, ...] = (
    _core("Pod", "", "v1", "pods", True),
    _core("Node", "", "v1", "nodes", False),
    _core("Namespace", "", "v1", "namespaces", False),
    _core("ConfigMap", "", "v1", "configmaps", True),
    _core("Event", "", "v1", "events", True, "events.k8s.io/v1"),
    _core("Service", "", "v1", "services", True),
    _core("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True),
    _core("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True, "policy/v1beta1"),
    _core("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False, "scheduling.k8s.io/v1beta1"),
    _core("Lease", "coordination.k8s.io", "v1", "leases", True),
    _core("Deployment", "apps", "v1", "deployments", True),
    _core("ReplicaSet", "apps", "v1", "replicasets", True),
    _core("StatefulSet", "apps", "v1", "statefulsets", True),
    _core("DaemonSet", "apps", "v1", "daemonsets", True),
    _core("Job", "batch", "v1", "jobs", True),
    # koord-manager's webhook certificates and the webhook configurations whose caBundle it keeps.
    _core("Secret", "", "v1", "secrets", True),
    _core(
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        False,
    ),
    _core(
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        False,
    ),
)
"""The Kubernetes kinds the framework itself reads and writes."""

KOORDINATOR_KINDS: tuple[KindInfo, ...] = (
    # The Koordinator kinds the framework's own runtime reads or writes (ADR 0004 records who reads each):
    # the koordlet writes NodeMetric and NodeResourceTopology and reads NodeSLO, the descheduler's
    # node-usage code reads NodeMetric. Their validators are ``cluster.manifest_checks``' (attached by
    # ``KindRegistry.builtin``). ElasticQuota, PodGroup, Device and Reservation are contributed by their
    # plugins (``KIND_DISTRIBUTIONS``), as is ClusterColocationProfile (koord-plugin-colocationprofile).
    _koordinator("NodeMetric", "slo.koordinator.sh", "v1alpha1", "nodemetrics", False),
    _koordinator("NodeSLO", "slo.koordinator.sh", "v1alpha1", "nodeslos", False),
    _koordinator(
        "PodMigrationJob",
        "scheduling.koordinator.sh",
        "v1alpha1",
        "podmigrationjobs",
        False,
        short_names=("pmj",),
        printer_columns=(
            PrinterColumn("Phase", ".status.phase"),
            PrinterColumn("Status", ".status.status"),
            _AGE,
            PrinterColumn("Node", ".status.nodeName"),
            PrinterColumn("Reservation", ".spec.reservationOptions.reservationRef.name"),
            PrinterColumn("PodNamespace", ".spec.podRef.namespace"),
            PrinterColumn("Pod", ".spec.podRef.name"),
            PrinterColumn("NewPod", ".status.podRef.name"),
            PrinterColumn("TTL", ".spec.ttl"),
        ),
    ),
    _koordinator(
        "NodeResourceTopology",
        "topology.node.k8s.io",
        "v1alpha1",
        "noderesourcetopologies",
        False,
        alt_api_versions=frozenset({"topology.node.k8s.io/v1alpha2"}),
        short_names=("node-res-topo",),
        status_subresource=False,
        approval="https://github.com/kubernetes/enhancements/pull/1870",
        open_schema=True,
        extra_versions=("v1alpha2",),
        storage_version="v1alpha2",
    ),
)

KIND_DISTRIBUTIONS: Mapping[str, str] = MappingProxyType(
    {
        "ElasticQuota": "koord-plugin-elasticquota",
        "PodGroup": "koord-plugin-coscheduling",
        "Device": "koord-plugin-deviceshare",
        "Reservation": "koord-plugin-reservation",
        "ClusterColocationProfile": "koord-plugin-colocationprofile",
    }
)
"""Koordinator's kinds that a distribution of this project contributes (not the framework): what to install
when an object of one of them meets a cluster that does not know it."""


def unknown_kind(kind: str, known: Iterable[str]) -> str:
    """The message for a kind no installed distribution contributes: the distribution to install when it is
    one of Koordinator's, else the kinds known."""
    dist = KIND_DISTRIBUTIONS.get(kind)
    if dist is not None:
        return (
            f"unknown kind {kind!r}: no installed distribution contributes it; install {dist} "
            f"(pip install {dist}), which registers {kind} through the {KIND_ENTRY_POINT_GROUP!r} "
            "entry points"
        )
    return f"unknown kind {kind!r}; known kinds: {', '.join(sorted(known))}"


KINDS: Mapping[str, KindInfo] = MappingProxyType({k.kind: k for k in (*CORE_KINDS, *KOORDINATOR_KINDS)})
"""The built-in kinds (read-only). A cluster knows these plus what installed distributions contribute:
use ``cluster.kinds`` (a ``KindRegistry``) wherever plugin kinds must be known too."""


class KindRegistry(Mapping[str, KindInfo]):
    """The kinds one cluster (and the informers and manifests above it) knows: immutable once gathered.

    ``discover()`` is the built-in kinds plus every ``koord.kinds`` entry point of the installed
    distributions, loaded on first need (a lookup of a kind that is not built in, or a listing), so that a
    cluster that only ever sees built-in kinds never scans the entry points. There is no process-wide
    registry: two clusters may know different kinds.
    """

    def __init__(
        self, kinds: Iterable[KindInfo] = (), *, contributed: Callable[[], Iterable[KindInfo]] | None = None
    ) -> None:
        self._kinds: dict[str, KindInfo] = {}
        self._add(kinds, "the framework")
        self._contributed = contributed
        self._lock = threading.Lock()

    @classmethod
    def builtin(cls) -> KindRegistry:
        """The framework's kinds only (core and Koordinator's)."""
        return cls(_with_builtin_validators(KINDS.values()))

    @classmethod
    def discover(cls, extra: Iterable[KindInfo] = ()) -> KindRegistry:
        """The built-in kinds, ``extra``, and (lazily) those of the installed distributions."""
        return cls([*_with_builtin_validators(KINDS.values()), *extra], contributed=contributed_kinds)

    def _add(self, kinds: Iterable[KindInfo], source: str) -> None:
        for info in kinds:
            if not isinstance(info, KindInfo):
                raise TypeError(f"{source} contributed {info!r}, not a KindInfo")
            known = self._kinds.get(info.kind)
            if known is not None and known != info:
                raise ValueError(
                    f"kind {info.kind} is contributed twice with different coordinates ({source}: "
                    f"{info.api_version} {info.plural}; already {known.api_version} {known.plural})"
                )
            if known is None:
                self._kinds[info.kind] = info

    def _load(self) -> dict[str, KindInfo]:
        if self._contributed is not None:
            with self._lock:
                if self._contributed is not None:
                    self._add(self._contributed(), f"entry points {KIND_ENTRY_POINT_GROUP!r}")
                    self._contributed = None
        return self._kinds

    def __getitem__(self, kind: str) -> KindInfo:
        found = self._kinds.get(kind)
        if found is None:
            found = self._load()[kind]
        return found

    def get(self, kind: str, default: Any = None) -> Any:
        found = self._kinds.get(kind)
        if found is None and self._contributed is not None:
            found = self._load().get(kind)
        return found if found is not None else default

    def __contains__(self, kind: object) -> bool:
        return isinstance(kind, str) and self.get(kind) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._load()))

    def __len__(self) -> int:
        return len(self._load())

    def accepts_api_version(self, kind: str, api_version: str) -> bool:
        info = self.get(kind)
        return info is not None and bool(info.accepts_api_version(api_version))

    def with_kinds(self, extra: Iterable[KindInfo]) -> KindRegistry:
        """A registry with these kinds too (the contributed ones included)."""
        return KindRegistry([*self._load().values(), *extra])


@functools.cache
def installed_kinds() -> KindRegistry:
    """The built-in kinds and those of the installed distributions, gathered once per process: the default
    of the callers that are given no cluster's registry (the manifest loader, the missing-CRD hints). Read
    only, like every ``KindRegistry``."""
    return KindRegistry.discover()


def contributed_kinds() -> list[KindInfo]:
    """The kinds every installed distribution contributes through the ``koord.kinds`` entry points."""
    found: list[KindInfo] = []
    for ep in sorted(entry_points(group=KIND_ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        try:
            value = ep.load()
            if callable(value) and not isinstance(value, KindInfo):
                value = value()
            items = [value] if isinstance(value, KindInfo) else list(value)
        except Exception as exc:
            raise ValueError(
                f"entry point {ep.name} = {ep.value} of group {KIND_ENTRY_POINT_GROUP!r} failed to load: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        for item in items:
            if not isinstance(item, KindInfo):
                raise TypeError(
                    f"entry point {ep.name} = {ep.value} ({KIND_ENTRY_POINT_GROUP}) gave {item!r}, "
                    "not a KindInfo"
                )
        found += items
    return found


def _with_builtin_validators(kinds: Iterable[KindInfo]) -> list[KindInfo]:
    """The framework's kinds with the validators ``cluster.manifest_checks`` has for Koordinator's kinds."""
    from koord_framework.cluster.manifest_checks import builtin_validator

    out = []
    for info in kinds:
        validator = builtin_validator(info.kind) if info.custom else None
        out.append(info if validator is None else _replace_validator(info, validator))
    return out


def _replace_validator(info: KindInfo, validator: KindValidator) -> KindInfo:
    return replace(info, validator=validator)


def kind_info(kind: str) -> KindInfo | None:
    """A built-in kind's coordinates (``cluster.kinds`` knows the contributed ones too)."""
    return KINDS.get(kind)


def accepts_api_version(kind: str, api_version: str) -> bool:
    """Whether a built-in kind is served as ``api_version``."""
    info = KINDS.get(kind)
    return info is not None and info.accepts_api_version(api_version)


def object_key(obj: dict[str, object]) -> tuple[str, str]:
    """(namespace, name) of a manifest; namespace is "" for cluster-scoped kinds."""
    meta = obj.get("metadata") or {}
    assert isinstance(meta, dict)
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
