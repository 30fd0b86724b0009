"""What the API server manages and a snapshot leaves out, so that the manifests load back as they were.

Removed from every object's ``metadata``: ``managedFields`` (server-side apply bookkeeping, often half the
size of an object), ``resourceVersion`` (the loader's cluster numbers its own objects; a stale version would
only make the first update conflict), ``selfLink`` and the
``kubectl.kubernetes.io/last-applied-configuration`` annotation (a second copy of the object as last
applied). Everything else is kept as the API server returned it: ``uid`` (ownerReferences name their owner's
uid), ``creationTimestamp`` (pod age decides eviction order), ``generation``, ``ownerReferences``,
``finalizers``, ``deletionTimestamp``, ``spec`` and ``status``. List items come without
``apiVersion``/``kind``: they are filled in from where the list was served.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DROPPED_ANNOTATIONS", "DROPPED_METADATA", "clean_object"]

DROPPED_METADATA: tuple[str, ...] = ("managedFields", "resourceVersion", "selfLink")
DROPPED_ANNOTATIONS: tuple[str, ...] = ("kubectl.kubernetes.io/last-applied-configuration",)


def clean_object(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """``obj`` (a list item, modified in place and returned) without the server-managed fields above, with
    ``apiVersion`` and ``kind`` set."""
    obj.setdefault("apiVersion", api_version)
    obj.setdefault("kind", kind)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in DROPPED_METADATA:
            meta.pop(key, None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            for key in DROPPED_ANNOTATIONS:
                annotations.pop(key, None)
            if not annotations:
                del meta["annotations"]
    return obj
