"""Resource lists as plain ``dict[str, int]`` in canonical integer units, with quotav1-style arithmetic.

The scheduler sums, subtracts and compares resource lists on every filter and score call for every node;
doing that on quantity objects would dominate the run time. So a resource list is parsed once into ints:
``cpu`` in milli-cores (Go ``MilliValue()``, the unit every Kubernetes and Koordinator cpu computation
uses) and everything else by ``Value()`` (memory and storage in bytes, pods as a count). Koordinator's
``kubernetes.io/batch-cpu`` and ``kubernetes.io/mid-cpu`` are *already* milli-cores on the wire
(``batch-cpu: 2000`` means two cores), so they too use ``Value()``.

The arithmetic helpers mirror ``k8s.io/apiserver/pkg/quota/v1`` (``Add``, ``Subtract``,
``SubtractWithNonNegativeResult``, ``LessThanOrEqual``, ``Mask``, ``IsZero``, ``Max``), key semantics
included, because Koordinator's plugins are written against exactly those.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from koord_framework.api.quantity import (
    Quantity,
    QuantityError,
    QuantityInput,
    format_bytes,
    format_milli_cpu,
)

__all__ = [
    "BATCH_CPU",
    "BATCH_MEMORY",
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "MID_CPU",
    "MID_MEMORY",
    "PODS",
    "STORAGE",
    "add",
    "format_resource",
    "format_resource_list",
    "is_zero",
    "less_than_or_equal",
    "mask",
    "max_each",
    "parse_resource_list",
    "subtract",
    "subtract_non_negative",
    "to_int",
    "within",
]

CPU: Final = "cpu"
MEMORY: Final = "memory"
PODS: Final = "pods"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
STORAGE: Final = "storage"
BATCH_CPU: Final = "kubernetes.io/batch-cpu"
BATCH_MEMORY: Final = "kubernetes.io/batch-memory"
MID_CPU: Final = "kubernetes.io/mid-cpu"
MID_MEMORY: Final = "kubernetes.io/mid-memory"

_BYTE_RESOURCES: Final = frozenset({MEMORY, EPHEMERAL_STORAGE, STORAGE, BATCH_MEMORY, MID_MEMORY})
_HUGEPAGES_PREFIX: Final = "hugepages-"


def _is_bytes(name: str) -> bool:
    return name in _BYTE_RESOURCES or name.startswith(_HUGEPAGES_PREFIX)


def to_int(name: str, quantity_like: QuantityInput) -> int:
    """The canonical integer for one resource: milli-cores for ``cpu``, ``Value()`` for everything else.

    ``quantity_like`` is read as a Kubernetes quantity, so a bare int means *cores* for cpu:
    ``to_int("cpu", 2) == 2000`` and ``to_int("cpu", "250m") == 250``.
    """
    q = Quantity.parse(quantity_like)
    return q.milli_value() if name == CPU else q.value()


def parse_resource_list(mapping: Any, *, path: str = "") -> dict[str, int]:
    """Parse a manifest ``ResourceList`` (``{"cpu": "500m", "memory": "1Gi"}``) into canonical ints.

    Raises :class:`QuantityError` whose message starts with ``path.name`` so the user can find the bad
    entry. A JSON ``null`` value counts as zero, as Go's ``Quantity.UnmarshalJSON`` decodes it.
    """
    where = path or "resources"
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise QuantityError(
            f"{where}: expected a mapping of resource name to quantity, got {type(mapping).__name__}"
        )
    out: dict[str, int] = {}
    for name, raw in mapping.items():
        if not isinstance(name, str) or not name:
            raise QuantityError(f"{where}: resource name must be a non-empty string, got {name!r}")
        if raw is None:
            out[name] = 0
            continue
        try:
            out[name] = to_int(name, raw)
        except QuantityError as err:
            key = f"{path}.{name}" if path else name
            raise QuantityError(f"{key}: {err}") from err
    return out


def format_resource(name: str, value: int) -> str:
    """Print one canonical integer the way a manifest would spell it: cpu as ``1500m``/``4``, byte-sized
    resources in BinarySI (``1Gi``), anything else (pods, batch-cpu milli-cores, devices) as the bare int."""
    if name == CPU:
        return format_milli_cpu(value)
    if _is_bytes(name):
        return format_bytes(value)
    return str(value)


def format_resource_list(d: Mapping[str, int]) -> dict[str, str]:
    """:func:`format_resource` over a whole list; parsing the result gives ``d`` back."""
    return {name: format_resource(name, value) for name, value in d.items()}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``a + b`` over the union of names (quotav1.Add)."""
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``a - b`` over the union of names; a name only in ``b`` comes out negative (quotav1.Subtract)."""
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) - value
    return out


def subtract_non_negative(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """``max(a - b, 0)`` over the union of names (quotav1.SubtractWithNonNegativeResult): free capacity
    never goes negative even when a node is over-committed."""
    out = {name: max(value - b.get(name, 0), 0) for name, value in a.items()}
    for name in b:
        out.setdefault(name, 0)
    return out


def less_than_or_equal(a: Mapping[str, int], b: Mapping[str, int]) -> tuple[bool, list[str]]:
    """quotav1.LessThanOrEqual: for every name in ``b`` that ``a`` also has, ``a[name] <= b[name]``.

    Names missing from either side are not compared (an absent limit does not constrain). Returns whether
    it holds and the violating names, sorted so messages and tests are deterministic.
    """
    violations = sorted(name for name, limit in b.items() if name in a and a[name] > limit)
    return not violations, violations


def within(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """``less_than_or_equal(a, b)[0]`` without building the list of violations: for hot paths that only need
    the yes/no (a device allocator asks it per device and scope)."""
    for name, limit in b.items():
        wanted = a.get(name)
        if wanted is not None and wanted > limit:
            return False
    return True


def mask(d: Mapping[str, int], names: Iterable[str]) -> dict[str, int]:
    """Only the entries of ``d`` whose name is in ``names`` (quotav1.Mask)."""
    wanted = set(names)
    return {name: value for name, value in d.items() if name in wanted}


def is_zero(d: Mapping[str, int]) -> bool:
    """True when every entry is zero; an empty list is zero (quotav1.IsZero)."""
    return all(value == 0 for value in d.values())


def max_each(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Per-name maximum over the union of names (quotav1.Max), e.g. for init-container requests."""
    out = dict(a)
    for name, value in b.items():
        current = out.get(name)
        if current is None or value > current:
            out[name] = value
    return out
