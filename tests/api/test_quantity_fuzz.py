"""Property tests: the parser never fails any other way than QuantityError, and canonical text round-trips.

The value of each generated quantity is also checked against an independent oracle built with
``fractions.Fraction`` straight from the grammar (number x 10^exp or x 2^k, rounded away from zero to the
nano-unit, binary capped at 2^63-1), so the fast integer paths in the parser cannot drift from the rules.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from koord_framework.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    QuantityError,
    format_bytes,
    format_milli_cpu,
)
from koord_framework.api.resources import format_resource, to_int

DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
CANONICAL = re.compile(r"0|-?[1-9][0-9]*(?:[numkMGTPE]|[KMGTPE]i|e-?[1-9][0-9]*)?")

QUANTITY_ALPHABET = "0123456789.+-eEinumkKMGTP iB\n"


def _outcome(text: str) -> None:
    try:
        q = Quantity.parse(text)
    except QuantityError as err:
        assert repr(text) in str(err)
    else:
        assert isinstance(q, Quantity)
        assert CANONICAL.fullmatch(str(q)), str(q)


@given(st.text())
def test_random_text_only_raises_quantity_error(text: str) -> None:
    _outcome(text)


@given(st.text(alphabet=QUANTITY_ALPHABET, max_size=30))
def test_near_miss_text_only_raises_quantity_error(text: str) -> None:
    _outcome(text)


@given(st.one_of(st.integers(), st.floats(), st.booleans(), st.none(), st.binary()))
def test_random_values_only_raise_quantity_error(value: object) -> None:
    try:
        q = Quantity.parse(value)  # type: ignore[arg-type]
    except QuantityError:
        return
    assert isinstance(q, Quantity)


@st.composite
def quantity_parts(draw: st.DrawFn) -> tuple[str, str, str | None, str]:
    sign = draw(st.sampled_from(["", "+", "-"]))
    int_digits = draw(st.text(alphabet="0123456789", max_size=22))
    frac = draw(st.one_of(st.none(), st.text(alphabet="0123456789", max_size=14)))
    if not int_digits and not frac:
        int_digits = draw(st.text(alphabet="0123456789", min_size=1, max_size=3))
    suffix = draw(
        st.one_of(
            st.sampled_from(sorted(DECIMAL)),
            st.sampled_from(sorted(BINARY)),
            st.builds(
                lambda e, s, n: f"{e}{s}{n}",
                st.sampled_from(["e", "E"]),
                st.sampled_from(["", "+", "-"]),
                st.integers(min_value=0, max_value=45),
            ),
        )
    )
    return sign, int_digits, frac, suffix


def oracle_nano(sign: str, int_digits: str, frac: str | None, suffix: str) -> tuple[int, str]:
    number = Fraction(int(int_digits or "0"))
    if frac:
        number += Fraction(int(frac), 10 ** len(frac))
    if suffix in BINARY:
        value, fmt = number * 2 ** BINARY[suffix], BINARY_SI
    elif suffix in DECIMAL:
        value, fmt = number * Fraction(10) ** DECIMAL[suffix], DECIMAL_SI
    else:
        value, fmt = number * Fraction(10) ** int(suffix[1:]), DECIMAL_EXPONENT
    nano = math.ceil(value * 10**9)  # value is non-negative here; rounding up == away from zero
    if fmt == BINARY_SI:
        nano = min(nano, (2**63 - 1) * 10**9)
        if 0 < nano < 10**9:
            fmt = DECIMAL_SI
    return (-nano if sign == "-" else nano), fmt


@settings(max_examples=400)
@given(quantity_parts())
def test_valid_quantities_match_oracle_and_round_trip(parts: tuple[str, str, str | None, str]) -> None:
    sign, int_digits, frac, suffix = parts
    text = sign + int_digits + ("" if frac is None else "." + frac) + suffix
    q = Quantity.parse(text)

    expected_nano, expected_format = oracle_nano(*parts)
    assert q.nano_value() == expected_nano
    assert q.as_fraction() == Fraction(expected_nano, 10**9)
    if expected_nano:
        assert q.format == expected_format

    canonical = str(q)
    assert CANONICAL.fullmatch(canonical), canonical
    again = Quantity.parse(canonical)
    assert again == q
    assert str(again) == canonical
    assert hash(again) == hash(q)

    # Value/MilliValue round away from zero.
    magnitude = abs(q.as_fraction())
    direction = -1 if expected_nano < 0 else 1
    assert q.value() == direction * math.ceil(magnitude)
    assert q.milli_value() == direction * math.ceil(magnitude * 1000)


@given(
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1),
    st.sampled_from([DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT]),
)
def test_from_int_round_trips(n: int, fmt: str) -> None:
    q = Quantity.from_int(n, fmt)  # type: ignore[arg-type]
    assert Quantity.parse(str(q)).value() == n
    assert Quantity.parse(str(q)) == q


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_format_milli_cpu_round_trips(milli: int) -> None:
    assert Quantity.parse(format_milli_cpu(milli)).milli_value() == milli
    assert to_int("cpu", format_resource("cpu", milli)) == milli


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_format_bytes_round_trips(n: int) -> None:
    assert Quantity.parse(format_bytes(n)).value() == n
    assert to_int("memory", format_resource("memory", n)) == n


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_finite_floats_parse_through_repr(x: float) -> None:
    q = Quantity.parse(x)
    # The repr of a float is an exact decimal; the quantity is that decimal rounded up to a nano-unit.
    exact = Fraction(repr(x))
    nano = exact * 10**9
    assert q.nano_value() == (math.ceil(nano) if nano >= 0 else -math.ceil(-nano))
