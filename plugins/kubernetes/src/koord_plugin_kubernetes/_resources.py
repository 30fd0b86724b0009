"""Resource-name classes and the arithmetic kube-scheduler's resource plugins share.

Kubernetes splits resource names into *native* (no domain, or a ``kubernetes.io/`` domain), *extended*
(another domain), hugepages and attachable volumes; only "scalar" names (all but cpu, memory, ephemeral
storage and pods) are tracked per name. Koordinator's ``kubernetes.io/batch-cpu`` is a prefixed native
name: it is checked by NodeResourcesFit but can never be ignored through ``ignoredResources``.

Integer division and rounding follow Go (truncation toward zero, ``math.Round`` half away from zero) so
that per-node and vectorised scores agree bit for bit with each other and with kube-scheduler.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from koord_framework.api.selectors import is_qualified_name

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"
_DEFAULT_NAMESPACE_PREFIX: Final = "kubernetes.io/"
_REQUESTS_PREFIX: Final = "requests."


def is_prefixed_native(name: str) -> bool:
    return _DEFAULT_NAMESPACE_PREFIX in name


def is_native(name: str) -> bool:
    return "/" not in name or is_prefixed_native(name)


def is_extended(name: str) -> bool:
    """``IsExtendedResourceName``: a domain-qualified, non-native name that is also a valid quota name."""
    if is_native(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    return is_qualified_name(_REQUESTS_PREFIX + name)


def is_scalar(name: str) -> bool:
    """``IsScalarResourceName``: extended, hugepages, prefixed native or attachable-volume names."""
    return (
        is_extended(name)
        or name.startswith("hugepages-")
        or is_prefixed_native(name)
        or name.startswith("attachable-volumes-")
    )


def tracked(name: str) -> bool:
    """Whether kube-scheduler's ``framework.Resource`` keeps this name at all."""
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar(name)


# --- Go integer arithmetic --------------------------------------------------------------------------------
def go_div(a: int, b: int) -> int:
    """Go's ``a / b`` on int64: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def go_round(x: float) -> int:
    """Go's ``math.Round``: half away from zero."""
    t = math.trunc(x)
    if abs(x - t) >= 0.5:
        t += 1 if x > 0 else -1
    return int(t)


Int64Array = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def go_div_array(a: Int64Array, b: Int64Array) -> Int64Array:
    """Element-wise truncating division (``b`` must be non-zero where the result is used)."""
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe)
    return np.where((a >= 0) == (safe > 0), q, -q)


def go_round_array(x: FloatArray) -> Int64Array:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(np.int64)


# --- the broken-linear shape of RequestedToCapacityRatio --------------------------------------------------
def broken_linear(shape: list[tuple[int, int]], p: int) -> int:
    """``helper.BuildBrokenLinearFunction`` on (utilization, score) points sorted by utilization."""
    for i, (util, score) in enumerate(shape):
        if p <= util:
            if i == 0:
                return score
            pu, ps = shape[i - 1]
            return ps + go_div((score - ps) * (p - pu), util - pu)
    return shape[-1][1]


def broken_linear_array(shape: list[tuple[int, int]], p: Int64Array) -> Int64Array:
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=np.bool_)
    for i, (util, score) in enumerate(shape):
        hit = ~done & (p <= util)
        if i == 0:
            out = np.where(hit, score, out)
        else:
            pu, ps = shape[i - 1]
            num = (score - ps) * (p - pu)
            out = np.where(hit, ps + go_div_array(num, np.full(p.shape, util - pu, dtype=np.int64)), out)
        done |= hit
    return out
