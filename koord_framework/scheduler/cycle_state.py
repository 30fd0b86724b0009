"""``CycleState``: per-pod, per-cycle scratch space that plugins share, as in kube-scheduler."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class StateData(Protocol):
    def clone(self) -> StateData: ...


@dataclass
class PodMutation:
    """What PreBind plugins want changed on the pod, applied as one merge patch before Bind.

    Koordinator batches every PreBind modification into a single patch (its ``DefaultPreBind``); the
    framework applies this object the same way, so a pod never sees half of its PreBind annotations.
    """

    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not self.annotations and not self.labels

    def as_merge_patch(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        if self.labels:
            meta["labels"] = dict(self.labels)
        return {"metadata": meta} if meta else {}


class CycleState:
    """Key/value store for one scheduling cycle of one pod.

    Values written by PreFilter are read by Filter/Score/Reserve of the same plugin. ``clone`` is used by
    preemption what-ifs: values with a ``clone()`` method are cloned, others shared (they must be
    read-only after PreFilter).
    """

    __slots__ = ("_data", "pod_mutation", "record_metrics", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        """Plugins whose PreFilter returned Skip: their Filter is not called for this pod."""
        self.skip_score: set[str] = set()
        """Plugins whose PreScore returned Skip: their Score is not called for this pod."""
        self.pod_mutation = PodMutation()
        self.record_metrics = True

    def read(self, key: str) -> Any:
        """The value written under ``key``; ``KeyError`` if none (a plugin's PreFilter did not run)."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def clone(self) -> CycleState:
        other = CycleState()
        for k, v in self._data.items():
            clone = getattr(v, "clone", None)
            other._data[k] = clone() if callable(clone) else v
        other.skip_filter = set(self.skip_filter)
        other.skip_score = set(self.skip_score)
        other.pod_mutation = copy.deepcopy(self.pod_mutation)
        other.record_metrics = self.record_metrics
        return other
