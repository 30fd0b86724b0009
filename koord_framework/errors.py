"""The error hierarchy. Every error a user can cause names where it comes from (file, document, YAML path).

The CLI prints ``str(err)`` for every ``KoordError`` (never a traceback): a ``ValidationError`` from a
validation run exits 1 (the run found a problem), any other ``KoordError`` exits 2 (bad usage or bad input).
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def format_path(parts: Iterable[str | int]) -> str:
    """Render a location as ``profiles[0].pluginConfig[LoadAwareScheduling].args.usageThresholds.cpu``."""
    out = ""
    for part in parts:
        if isinstance(part, int) or (isinstance(part, str) and part.startswith("[")):
            out += f"[{part}]" if isinstance(part, int) else part
        elif out:
            out += f".{part}"
        else:
            out = str(part)
    return out


class KoordError(Exception):
    """Base of every error the platform raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One finding: where (a YAML path, maybe empty) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ValidationError(KoordError):
    """A document failed validation. Carries every problem found, not just the first."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = [f"{source}: {len(self.problems)} problem(s)"]
        lines += [f"  {p}" for p in self.problems]
        super().__init__("\n".join(lines))


class PluginError(KoordError):
    """Base of registry errors."""


class UnknownPluginError(PluginError):
    def __init__(self, group: str, name: str, installed: Sequence[str]) -> None:
        self.group, self.name, self.installed = group, name, list(installed)
        listing = ", ".join(sorted(installed)) or "(none)"
        super().__init__(f"unknown plugin {name!r} in group {group}; installed: {listing}")


class DuplicatePluginError(PluginError):
    def __init__(self, group: str, name: str, providers: Sequence[str]) -> None:
        self.group, self.name, self.providers = group, name, list(providers)
        super().__init__(
            f"plugin name {name!r} in group {group} is claimed by more than one distribution: "
            + ", ".join(providers)
        )


class PluginLoadError(PluginError):
    def __init__(self, group: str, name: str, distribution: str, exc: BaseException) -> None:
        self.group, self.name, self.distribution, self.exc = group, name, distribution, exc
        super().__init__(
            f"plugin {name!r} ({group}) from distribution {distribution} failed to load: "
            f"{type(exc).__name__}: {exc}"
        )


class ConfigReadError(KoordError):
    """The file could not be read (missing, a directory, no permission): bad input, not a bad profile."""


class ClusterError(KoordError):
    """Base of cluster-port errors (both adapters raise these, never client exceptions)."""


class NotFoundError(ClusterError):
    pass


class KindNotServedError(NotFoundError):
    """The API server does not serve ``kind`` at all (HTTP 404 on its collection): its
    CustomResourceDefinition is not installed. Distinct from one missing object, so that a component can
    wait for the CRD (or fail) naming the kind and how to install it instead of dying on a bare 404."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class ConflictError(ClusterError):
    """Optimistic-concurrency conflict, an object that already exists, or a pod that is already bound."""


class ExpiredError(ConflictError):
    """A watch resumed from a resourceVersion the server no longer has (HTTP 410 Gone): list again.

    Both adapters raise it, so an informer handles the embedded and the real cluster in one ``except``.
    """


class InvalidError(ClusterError):
    """The server refused a write as invalid (HTTP 422): the object, not the moment, is wrong."""


class TooManyRequestsError(ClusterError):
    """The eviction was refused for now (a PodDisruptionBudget, or API rate limiting): retry later."""


class KubeClientMissingError(KoordError):
    """A real cluster was asked for, but the optional Kubernetes client (``koord-framework[kube]``) is not
    installed."""

    def __init__(self) -> None:
        super().__init__(
            "connecting to a Kubernetes API server needs the Kubernetes client, which is not installed:"
            " pip install 'koord-framework[kube]'"
        )


class ManifestError(KoordError):
    """A manifest could not be loaded: names file, document index and field."""

    def __init__(self, file: str, doc: int | None, path: str, message: str) -> None:
        self.file, self.doc, self.path, self.message = file, doc, path, message
        where = file
        if doc is not None:
            where += f" (document {doc})"
        if path:
            where += f": {path}"
        super().__init__(f"{where}: {message}")
