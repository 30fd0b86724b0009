"""JSON merge patch (RFC 7386), the ``application/merge-patch+json`` patch type of the Kubernetes API.

Both cluster adapters accept the same patch documents, so the embedded cluster must merge exactly as the
API server does: a ``null`` member deletes, an object merges recursively, anything else (arrays included)
replaces the target wholesale.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def copy_object(obj: dict[str, Any]) -> dict[str, Any]:
    """``copy_json`` for a whole object, typed as one."""
    return {k: copy_json(v) if isinstance(v, (dict, list)) else v for k, v in obj.items()}


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars).

    Several times faster than ``copy.deepcopy`` because it needs no memo: JSON values are trees, and the
    cluster copies every object it hands out, so this sits on the hot path of loading 150,000 pods.
    """
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply ``patch`` to ``target`` and return the result; neither argument is modified.

    This is RFC 7386's ``MergePatch`` function: when the patch is not an object it replaces the target;
    otherwise a non-object target first becomes ``{}``, a ``null`` member removes the key, and any other
    member is merged recursively into the existing value.
    """
    if not isinstance(patch, Mapping):
        return copy_json(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    # Untouched members still alias ``target``'s values; copy them so the caller owns the whole result.
    for key, value in result.items():
        if key not in patch and isinstance(value, (dict, list)):
            result[key] = copy_json(value)
    return result


def merge_patch_shared(target: Any, patch: Any) -> Any:
    """``merge_patch`` whose result shares ``target``'s untouched members instead of copying them.

    For a store whose versions are never modified once stored (the embedded cluster's): a patch of a few
    annotations then copies the dicts on the patch's path only, not the whole object. What comes from
    ``patch`` is still copied, so the caller's patch document can change afterwards.
    """
    if not isinstance(patch, Mapping):
        return copy_json(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch_shared(result.get(key), value)
    return result
