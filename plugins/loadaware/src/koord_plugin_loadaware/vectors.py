"""Resource vectors: the fixed, sorted list of resources the plugin tracks, and lists of ints over it.

Koordinator turns every resource list into a vector over the same sorted names once (its
``ResourceVectorizer``) so that the hot paths add and compare plain integers. The same is done here, and the
same index is a column of the plugin's NumPy tables. Untracked names are ignored, as in Koordinator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

__all__ = ["Vec", "Vectorizer", "add_delta", "add_into", "sub_delta", "sub_into"]

Vec = list[int]
_INT64_MAX: Final = 2**63 - 1
_INT64_MIN: Final = -(2**63)


def _clamp(value: int) -> int:
    # Resource values are exact Python ints; the NumPy columns are int64. Absurd values saturate instead of
    # failing the whole node (Go's Quantity.Value() saturates the same way).
    return _INT64_MAX if value > _INT64_MAX else _INT64_MIN if value < _INT64_MIN else value


class Vectorizer:
    """Maps resource names to positions; ``names`` is sorted, so ``cpu`` comes before ``memory``."""

    __slots__ = ("index", "names")

    def __init__(self, names: Iterable[str]) -> None:
        self.names: tuple[str, ...] = tuple(sorted(set(names)))
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def empty(self) -> Vec:
        return [0] * len(self.names)

    def to_vec(self, values: Mapping[str, int]) -> Vec:
        """A canonical-integer resource list as a vector (absent and untracked names are 0 / dropped)."""
        return [_clamp(values.get(name, 0)) for name in self.names]

    def to_list(self, vec: Sequence[int]) -> dict[str, int]:
        return dict(zip(self.names, vec))


def add_into(acc: Vec, x: Sequence[int]) -> None:
    for i, v in enumerate(x):
        acc[i] += v


def sub_into(acc: Vec, x: Sequence[int]) -> None:
    for i, v in enumerate(x):
        acc[i] -= v


def add_delta(acc: Vec, x: Sequence[int], y: Sequence[int] | None) -> bool:
    """``acc += max(0, x - y)`` per resource (``y`` None counts as 0); True if anything was added."""
    changed = False
    for i, v in enumerate(x):
        if y is not None:
            v -= y[i]
        if v > 0:
            acc[i] += v
            changed = True
    return changed


def sub_delta(acc: Vec, x: Sequence[int], y: Sequence[int] | None) -> bool:
    """The exact reverse of :func:`add_delta`."""
    changed = False
    for i, v in enumerate(x):
        if y is not None:
            v -= y[i]
        if v > 0:
            acc[i] -= v
            changed = True
    return changed
