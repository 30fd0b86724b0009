"""``parse_int`` accepts exactly what Go's ``strconv.ParseInt(s, 10, bitSize)`` accepts."""

from __future__ import annotations

import pytest

from koord_framework.api.strconv import parse_int


@pytest.mark.parametrize(
    ("text", "bits", "expected"),
    [
        ("0", 64, 0),
        ("+7", 64, 7),
        ("-7", 64, -7),
        ("007", 64, 7),
        (str(2**63 - 1), 64, 2**63 - 1),
        (str(-(2**63)), 64, -(2**63)),
        (str(2**63), 64, None),
        (str(2**31 - 1), 32, 2**31 - 1),
        (str(2**31), 32, None),
        (str(-(2**31)), 32, -(2**31)),
        ("", 64, None),
        ("+", 64, None),
        (" 5", 64, None),
        ("5 ", 64, None),
        ("5\n", 64, None),  # a regex ``$`` would let this through
        ("1_000", 64, None),
        ("\uff15", 64, None),  # a full-width digit: int() takes it, Go does not
        ("0x10", 64, None),
        ("1e3", 64, None),
    ],
)
def test_parse_int_is_go_parse_int(text: str, bits: int, expected: int | None) -> None:
    assert parse_int(text, bits) == expected
