"""Go's ``strconv`` integer parsing, which Koordinator applies to labels and annotations.

Python's ``int()`` is more lenient than Go's ``strconv.ParseInt``/``Atoi``: it accepts surrounding spaces,
``_`` separators and non-ASCII digits, and has no bit size. Reading a label or annotation with it would
accept values Koordinator ignores.
"""

from __future__ import annotations

import re
from typing import Final

_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")


def parse_int(text: str, bit_size: int = 64) -> int | None:
    """``strconv.ParseInt(text, 10, bit_size)``: an optional sign and ASCII digits, nothing else, within the
    signed range of ``bit_size`` bits; None where Go returns an error. ``Atoi`` is ``bit_size`` 64."""
    if _DECIMAL.fullmatch(text) is None:
        return None
    value = int(text, 10)
    limit = 1 << (bit_size - 1)
    return value if -limit <= value < limit else None
