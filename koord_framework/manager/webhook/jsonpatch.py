"""RFC 6902 JSONPatch between two JSON documents: what a mutating webhook answers.

Koordinator answers ``admission.PatchResponseFromRaw(original, mutated)`` (gomodules.xyz/jsonpatch's
``CreatePatch``): a patch the API server applies to the object it sent. Objects are diffed key by key; a list
whose length changed is replaced as a whole (the simplest patch that is always right), one of equal length is
diffed element by element.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_patch", "escape"]


def escape(key: str) -> str:
    """A JSON-Pointer reference token (RFC 6901): ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def create_patch(original: Any, mutated: Any) -> list[dict[str, Any]]:
    """The operations turning ``original`` into ``mutated`` (empty when equal)."""
    ops: list[dict[str, Any]] = []
    _diff(original, mutated, "", ops)
    return ops


def _same(a: Any, b: Any) -> bool:
    # JSON has no distinction between 1 and 1.0, but it does between 1 and true.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def _diff(a: Any, b: Any, path: str, ops: list[dict[str, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            if key not in b:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in b.items():
            where = f"{path}/{escape(key)}"
            if key not in a:
                ops.append({"op": "add", "path": where, "value": value})
            else:
                _diff(a[key], value, where, ops)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{path}/{i}", ops)
        return
    if not _same(a, b):
        ops.append({"op": "replace", "path": path, "value": b})
