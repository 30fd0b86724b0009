"""CPU list strings as the kernel writes them (``0-3,8,10-11``), parsed and printed like Koordinator's
``pkg/util/cpuset``: sorted, runs of consecutive ids collapsed to ``a-b``."""

from __future__ import annotations

from collections.abc import Iterable


class CPUSetError(ValueError):
    pass


def parse_cpuset(text: str) -> frozenset[int]:
    """``"0-2,7"`` -> ``{0, 1, 2, 7}``; blanks and a trailing newline are fine, ``""`` is the empty set."""
    out: set[int] = set()
    for raw in text.strip().split(","):
        part = raw.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        try:
            if sep:
                first, last = int(low), int(high)
                if first < 0 or last < first:
                    raise CPUSetError(f"invalid cpu range {part!r} in cpuset {text!r}")
                out.update(range(first, last + 1))
            else:
                cpu = int(part)
                if cpu < 0:
                    raise CPUSetError(f"negative cpu {part!r} in cpuset {text!r}")
                out.add(cpu)
        except ValueError as err:
            if isinstance(err, CPUSetError):
                raise
            raise CPUSetError(f"invalid cpu {part!r} in cpuset {text!r}") from err
    return frozenset(out)


def parse_cpuset_ordered(text: str) -> list[int]:
    """The ids of a cpuset string in the order they are written (``"7,6,3,2"`` -> ``[7, 6, 3, 2]``)."""
    out: list[int] = []
    for raw in text.strip().split(","):
        part = raw.strip()
        if not part:
            continue
        low, sep, high = part.partition("-")
        if sep:
            out.extend(range(int(low), int(high) + 1))
        else:
            out.append(int(part))
    return out


def format_cpuset(cpus: Iterable[int]) -> str:
    """``[5, 0, 4]`` -> ``"0,4-5"``; the empty set prints as ``""``."""
    ids = sorted(set(cpus))
    if not ids:
        return ""
    runs: list[str] = []
    start = prev = ids[0]
    for cpu in ids[1:]:
        if cpu == prev + 1:
            prev = cpu
            continue
        runs.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = cpu
    runs.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(runs)


def same_cpus(a: str, b: str) -> bool:
    """Two cpuset strings name the same CPUs (``"2,3"`` equals ``"2-3"``); unparsable ones compare as text."""
    try:
        return parse_cpuset(a) == parse_cpuset(b)
    except CPUSetError:
        return a.strip() == b.strip()
