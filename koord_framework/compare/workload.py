"""What ``koord compare`` adds to a snapshot's pending pods: an arrival workload from a file, or a replay.

The workload file is JSON Lines: one object per line, blank lines and lines starting with ``#`` skipped.
Each object is a batch of identical pods arriving together::

    {"at": 30, "count": 10, "name": "web", "namespace": "shop", "cpu": "500m", "memory": "1Gi"}
    {"at": 60, "count": 2, "pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job"}, ...}}

``at`` is seconds after the run starts (default 0), ``count`` how many pods (default 1). A pod is either a
whole ``pod`` manifest (its ``metadata.name`` is the prefix of the pods' names) or the shorthand fields
``name`` (required), ``namespace`` (default ``default``), ``cpu``, ``memory`` (requests; limits equal them
unless ``limits`` is given), ``limits``, ``labels``, ``annotations``, ``priorityClassName``, ``priority``,
``schedulerName``. Pods are named ``<name>-<line>-<i>`` so that two lines never collide.

Every line is checked before any run starts; a bad one is a ``WorkloadError`` naming the file, the line
and the field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koord_framework.api.resources import to_int
from koord_framework.errors import KoordError

__all__ = ["Arrival", "WorkloadError", "load_workload", "replay_pods"]

SHORTHAND = frozenset(
    {
        "at",
        "count",
        "pod",
        "name",
        "namespace",
        "cpu",
        "memory",
        "limits",
        "labels",
        "annotations",
        "priorityClassName",
        "priority",
        "schedulerName",
    }
)
MAX_COUNT = 1_000_000


class WorkloadError(KoordError):
    """A workload file that cannot be used; the message names the file, line and field."""


@dataclass(frozen=True)
class Arrival:
    """Pods created together, ``at`` seconds after the run starts."""

    at: float
    pods: tuple[dict[str, Any], ...]


def load_workload(path: str | Path) -> list[Arrival]:
    """The arrivals of a workload file, ordered by time (lines with equal ``at`` keep their order)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise WorkloadError(f"--workload {path}: {exc.strerror or exc}") from exc
    arrivals: list[Arrival] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{path}:{number}"
        try:
            entry = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{where}: not a JSON object ({exc.msg} at column {exc.colno})") from exc
        if not isinstance(entry, dict):
            raise WorkloadError(f"{where}: not a JSON object but {type(entry).__name__}")
        arrivals.append(_arrival(entry, where, number))
    if not arrivals:
        raise WorkloadError(f"--workload {path}: no pods (every line blank or a comment)")
    return sorted(arrivals, key=lambda a: a.at)


def _arrival(entry: Mapping[str, Any], where: str, number: int) -> Arrival:
    unknown = sorted(set(entry) - SHORTHAND)
    if unknown:
        raise WorkloadError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(sorted(SHORTHAND))})")
    at = entry.get("at", 0)
    if isinstance(at, bool) or not isinstance(at, (int, float)) or at < 0:
        raise WorkloadError(f"{where}: field 'at': {at!r} is not a number of seconds >= 0")
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise WorkloadError(f"{where}: field 'count': {count!r} is not an integer from 1 to {MAX_COUNT}")
    if "pod" in entry:
        extra = sorted(set(entry) - {"at", "count", "pod"})
        if extra:
            raise WorkloadError(
                f"{where}: field {extra[0]!r}: not allowed next to 'pod' (put it in the manifest)"
            )
        template = _checked_manifest(entry["pod"], where)
    else:
        template = _shorthand(entry, where)
    meta = template["metadata"]
    prefix = f"{meta['name']}-{number}"
    pods = []
    for i in range(count):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"{prefix}-{i}"
        pods.append(pod)
    return Arrival(float(at), tuple(pods))


def _checked_manifest(pod: Any, where: str) -> dict[str, Any]:
    if not isinstance(pod, dict):
        raise WorkloadError(f"{where}: field 'pod': not an object")
    if pod.get("kind", "Pod") != "Pod":
        raise WorkloadError(f"{where}: field 'pod.kind': {pod.get('kind')!r}, expected 'Pod'")
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise WorkloadError(f"{where}: field 'pod.metadata.name': missing or not a string")
    spec = pod.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list) or not spec["containers"]:
        raise WorkloadError(f"{where}: field 'pod.spec.containers': missing or empty")
    if spec.get("nodeName"):
        raise WorkloadError(f"{where}: field 'pod.spec.nodeName': an arriving pod must be pending")
    for i, container in enumerate(spec["containers"]):
        resources = (container or {}).get("resources") or {}
        for kind in ("requests", "limits"):
            for res, value in (resources.get(kind) or {}).items():
                _quantity(value, where, f"pod.spec.containers[{i}].resources.{kind}.{res}")
    out = copy.deepcopy(pod)
    out.setdefault("apiVersion", "v1")
    out["kind"] = "Pod"
    out["metadata"].setdefault("namespace", "default")
    for field in ("uid", "resourceVersion", "creationTimestamp"):
        out["metadata"].pop(field, None)
    out["status"] = {"phase": "Pending"}
    return out


def _quantity(value: Any, where: str, field: str) -> str:
    resource = field.rsplit(".", 1)[-1]
    try:
        amount = to_int(resource, str(value))
    except (ValueError, TypeError) as exc:
        raise WorkloadError(f"{where}: field {field!r}: {value!r} is not a quantity ({exc})") from exc
    if amount < 0:
        raise WorkloadError(f"{where}: field {field!r}: {value!r} is negative")
    return str(value)


def _string_map(value: Any, where: str, field: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise WorkloadError(f"{where}: field {field!r}: not an object of strings")
    return {str(k): v for k, v in value.items()}


def _shorthand(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise WorkloadError(f"{where}: field 'name': missing or not a string (or give a whole 'pod')")
    namespace = entry.get("namespace", "default")
    if not isinstance(namespace, str) or not namespace:
        raise WorkloadError(f"{where}: field 'namespace': not a string")
    requests = {res: _quantity(entry[res], where, res) for res in ("cpu", "memory") if res in entry}
    limits = dict(requests)
    if "limits" in entry:
        raw = entry["limits"]
        if not isinstance(raw, dict):
            raise WorkloadError(f"{where}: field 'limits': not an object")
        limits = {str(res): _quantity(v, where, f"limits.{res}") for res, v in raw.items()}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    for field in ("labels", "annotations"):
        if field in entry:
            meta[field] = _string_map(entry[field], where, field)
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "pause", "resources": {"requests": requests, "limits": limits}}
        ]
    }
    for field in ("priorityClassName", "schedulerName"):
        if field in entry:
            if not isinstance(entry[field], str) or not entry[field]:
                raise WorkloadError(f"{where}: field {field!r}: not a string")
            spec[field] = entry[field]
    if "priority" in entry:
        priority = entry["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise WorkloadError(f"{where}: field 'priority': {priority!r} is not an integer")
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def replay_pods(pods: Iterable[Mapping[str, Any]], times: int) -> list[dict[str, Any]]:
    """``--scale N``: every bound, non-terminal pod of ``pods`` submitted again ``times`` times as a new
    pending pod (``<name>-replay-<k>``), as if the workload grew N-fold."""
    bound = [
        p
        for p in pods
        if (p.get("spec") or {}).get("nodeName")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    out: list[dict[str, Any]] = []
    for k in range(1, times + 1):
        for original in bound:
            pod = copy.deepcopy(dict(original))
            meta = pod.setdefault("metadata", {})
            meta["name"] = f"{meta.get('name')}-replay-{k}"
            for field in ("uid", "resourceVersion", "creationTimestamp", "ownerReferences", "generation"):
                meta.pop(field, None)
            spec = pod.setdefault("spec", {})
            spec.pop("nodeName", None)
            pod["status"] = {"phase": "Pending"}
            out.append(pod)
    return out
