"""The cluster an explanation runs on: always a private in-memory copy, so nothing reaches the source.

A live cluster is only listed (``ClusterPort.list`` of every kind it serves); the dry scheduling cycle,
its Reserve, Permit and PreBind then write to the copy, never to the source.
"""

from __future__ import annotations

import copy
import difflib
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.cluster.port import ClusterPort
from koord_framework.errors import ClusterError, KoordError

__all__ = ["NOT_COPIED", "UnknownObject", "close_names", "from_manifests", "read_only_copy"]

NOT_COPIED = frozenset(
    {"Event", "Secret", "Lease", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
)
"""Kinds no explanation reads: never listed from a live cluster (Secrets are not read at all)."""


class UnknownObject(KoordError):
    """``koord explain`` was asked about an object the cluster does not hold."""


def close_names(name: str, names: Iterable[str], n: int = 3) -> list[str]:
    """The names closest to ``name`` (difflib's ratio), best first."""
    return difflib.get_close_matches(name, list(names), n=n, cutoff=0.5)


def unknown(what: str, name: str, names: Iterable[str]) -> UnknownObject:
    """The error for an unknown ``what`` (``pod``, ``node``, ``quota``) naming it and suggesting others."""
    near = close_names(name, names)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return UnknownObject(f"{what} {name!r} not found in the cluster{hint}")


def from_manifests(paths: Sequence[str | Path], now: float | None) -> MemoryCluster:
    """The manifests of ``paths`` in a new embedded cluster whose virtual clock starts at ``now``."""
    cluster = MemoryCluster(VirtualClock(time.time() if now is None else now), seed=0)
    cluster.load(list(paths))
    return cluster


def read_only_copy(source: ClusterPort, now: float | None) -> MemoryCluster:
    """Every object of every kind ``source`` serves, copied into a new embedded cluster.

    Only ``serves`` and ``list`` are called on ``source``. A kind the source cannot list (a CRD not
    installed, a kind the credentials may not read) is left out of the copy, as an empty list."""
    cluster = MemoryCluster(VirtualClock(time.time() if now is None else now), seed=0)
    for kind in sorted(cluster.kinds):
        if kind in NOT_COPIED or not source.serves(kind):
            continue
        try:
            objs, _ = source.list(kind)
        except ClusterError:
            continue
        for obj in objs:
            cluster.create(copy.deepcopy(obj))
    return cluster
