"""The strategic merge patch of a profile's ``spec.patch`` onto a pod (``strategicpatch.StrategicMergePatch``
with the Pod's patch strategies).

Maps merge key by key and ``null`` deletes a key (as a JSON merge patch); lists the Pod type merges by a key
(containers, volumes, env, ... by ``name``; ports by ``containerPort``; volume mounts by ``mountPath``) merge
element by element, other lists are replaced. ``$patch``/``$retainKeys`` directives are not supported: a
patch that uses one is refused naming the directive.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["StrategicPatchError", "strategic_merge"]

_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "schedulingGates": "name",
}
"""Pod fields whose ``patchStrategy`` is ``merge`` and their ``patchMergeKey`` (k8s.io/api core/v1)."""


class StrategicPatchError(ValueError):
    """A patch that cannot be applied; the message names the path."""


def strategic_merge(original: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``original`` with ``patch`` applied (neither is changed)."""
    return _merge_map(copy.deepcopy(dict(original)), patch, "")


def _merge_map(target: dict[str, Any], patch: Mapping[str, Any], path: str) -> dict[str, Any]:
    for key, value in patch.items():
        where = f"{path}.{key}" if path else key
        if key.startswith("$"):
            raise StrategicPatchError(f"spec.patch: {where}: directive {key} is not supported")
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping):
            current = target.get(key)
            target[key] = _merge_map(current if isinstance(current, dict) else {}, value, where)
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(target.get(key), list):
            target[key] = _merge_list(target[key], value, _MERGE_KEYS[key], where)
        else:
            target[key] = copy.deepcopy(value)
    return target


def _merge_list(target: list[Any], patch: list[Any], merge_key: str, path: str) -> list[Any]:
    out = list(target)
    for item in patch:
        if not isinstance(item, Mapping) or merge_key not in item:
            raise StrategicPatchError(f"spec.patch: {path}: every element needs its merge key {merge_key!r}")
        for i, existing in enumerate(out):
            if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]:
                out[i] = _merge_map(existing, item, f"{path}[{merge_key}={item[merge_key]}]")
                break
        else:
            out.append(_merge_map({}, item, path))
    return out
