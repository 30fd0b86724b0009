"""Kubernetes ``resource.Quantity``, exactly: the same accepted strings, values and canonical spelling.

Every request, limit, capacity and threshold the platform reads is a quantity, and Koordinator's decisions
hinge on comparing them exactly (``1.5Gi`` is 1610612736 bytes, ``0.1`` cpu is 100 milli-cores, a value
finer than a nano-unit rounds *up*). Floats cannot do that, so a quantity is held as an exact integer count
of nano-units (value x 10^9); parsing never touches a float, and a Python ``float`` handed in (YAML turns
``0.5`` into one) is converted through its shortest ``repr`` and then parsed like text.

What matches upstream (``k8s.io/apimachinery/pkg/api/resource``):

* the suffixes and their families: binary ``Ki Mi Gi Ti Pi Ei``, decimal ``n u m "" k M G T P E``, and a
  decimal exponent ``e``/``E`` followed by a signed integer; ``1.`` , ``.5`` and ``1.G`` are accepted;
* a non-zero value finer than 1n rounds away from zero to the next nano-unit (``0.9n`` -> ``1n``);
* a binary-suffixed value is silently capped at 2^63-1 (``9Ei``), and one that rounds to below 1 switches
  to the DecimalSI family (``.000000000001Ki`` -> ``2n``);
* ``str()`` is ``CanonicalizeBytes``: no fractional digits, the largest suffix that loses nothing, BinarySI
  only for whole values of at least 1024, DecimalSI past ``E`` falling back to ``e21`` style;
* ``value()``/``milli_value()`` round away from zero, like ``Value()``/``MilliValue()``.

Deliberate differences, each for safety rather than convenience:

* the number must contain at least one digit, as the documented grammar says; Go's scanner also lets
  ``"."``, ``"+"``, ``"Gi"`` or ``"k"`` through as zero, which only ever hides a typo;
* ``value()`` and friends return exact Python ints instead of overflowing an int64;
* absurd sizes (more than ``MAX_DIGITS`` significant digits, or a magnitude of 10^MAX_DIGITS or more) are
  refused instead of being built as enormous integers; Go instead wraps exponents beyond int32;
* ``str()`` always gives the canonical form; Go echoes a parsed string verbatim when it merely *looks*
  canonical (``"+1k"`` stays ``"+1k"`` there).
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Any, Final, Literal, NoReturn, final

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "MAX_DIGITS",
    "Format",
    "Quantity",
    "QuantityError",
    "QuantityInput",
    "format_bytes",
    "format_milli_cpu",
    "parse_quantity",
]

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]
DECIMAL_SI: Final = "DecimalSI"
BINARY_SI: Final = "BinarySI"
DECIMAL_EXPONENT: Final = "DecimalExponent"
_FORMATS: Final = frozenset({DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT})

_MAX_BITS: Final = 14_000
"""Ints wider than this (about 4200 digits) are refused before ``str()``, which stops at 4300 digits."""
MAX_DIGITS: Final = 4000
"""Bound on significant digits and on decimal magnitude; keeps every int well under Python's 4300-digit
``int``/``str`` conversion limit and a hostile ``1e999999999`` from allocating gigabytes."""

_NANO: Final = 10**9
_MICRO: Final = 10**6
_INT64_MAX: Final = 2**63 - 1
_BINARY_CAP_NANO: Final = _INT64_MAX * _NANO
"""Go caps a BinarySI quantity at 2^63-1 (``maxAllowed``) after rounding to nano; same here, in nano units."""
_LOG10_2_POW_60_CEIL: Final = 19
"""2^60 (``Ei``) < 10^19: used to decide cheaply that a binary value is tiny or already over the cap."""

_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX_BY_EXP: Final[dict[int, str]] = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX_BY_POWER: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

# sign, integer digits, optional "." and fraction digits, then a suffix made of the letters Go's scanner
# lets through, optionally followed by a signed integer (only meaningful after "e"/"E"). [0-9] rather than
# \d: Python's \d would also take non-ASCII digits, which Go rejects.
_SHAPE: Final = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[+-]?[0-9]*)")
_EXPONENT: Final = re.compile(r"[eE]([+-]?)([0-9]+)")


class QuantityError(ValueError):
    """A value is not a Kubernetes quantity. The message names the offending input."""


def _fail(text: object, reason: str) -> NoReturn:
    raise QuantityError(f"invalid quantity {text!r}: {reason}")


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, Format]:
    """Return (base, exponent, format) for a suffix, like Go's ``quantitySuffixer.interpret``."""
    exp = _DECIMAL_SUFFIXES.get(suffix)
    if exp is not None:
        return 10, exp, DECIMAL_SI
    power = _BINARY_SUFFIXES.get(suffix)
    if power is not None:
        return 2, power, BINARY_SI
    m = _EXPONENT.fullmatch(suffix)
    if m is None:
        _fail(
            text, f"unknown suffix {suffix!r} (expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or e<N>)"
        )
    sign, digits = m.group(1), m.group(2).lstrip("0") or "0"
    # Go reads the exponent with strconv.ParseInt(..., 64): anything outside int64 is a suffix error.
    if len(digits) > 19:
        _fail(text, "exponent out of range")
    value = -int(digits) if sign == "-" else int(digits)
    if not -(2**63) <= value <= _INT64_MAX:
        _fail(text, "exponent out of range")
    return 10, value, DECIMAL_EXPONENT


def _ceil_div(numerator: int, denominator: int) -> int:
    """ceil(numerator / denominator) for non-negative numerator and positive denominator."""
    return -(-numerator // denominator)


def _parse_text(text: str) -> Quantity:
    if not text:
        _fail(text, "empty string")
    m = _SHAPE.fullmatch(text)
    if m is None:
        _fail(text, "expected <sign><digits>[.<digits>]<suffix>, e.g. 100m, 1.5Gi, 2e3")
    sign, int_digits, frac_digits, suffix = m.group(1), m.group(2), m.group(3) or "", m.group(4)
    if not int_digits and not frac_digits:
        _fail(text, "no digits in the number")
    base, exponent, fmt = _interpret_suffix(text, suffix)

    # Reduce the number to sig * 10^shift with sig free of leading and trailing zeros.
    frac_digits = frac_digits.rstrip("0")
    digits = (int_digits + frac_digits).lstrip("0")
    shift = -len(frac_digits)
    if not digits:
        return Quantity._from_nano(0, fmt)
    sig = digits.rstrip("0")
    shift += len(digits) - len(sig)
    n = len(sig)
    if n > MAX_DIGITS:
        _fail(text, f"more than {MAX_DIGITS} significant digits")

    if base == 10:
        shift += exponent
        if n + shift > MAX_DIGITS:
            _fail(text, f"magnitude of 10^{MAX_DIGITS} or more is not supported")
        nano_exp = shift + 9
        if nano_exp >= 0:
            nano = int(sig) * 10**nano_exp
        elif n + nano_exp <= 0:
            nano = 1  # below one nano-unit but not zero: rounds up to 1n, as Go does
        else:
            nano = _ceil_div(int(sig), 10**-nano_exp)
    else:
        multiplier = 1 << exponent
        nano_exp = shift + 9
        if n + shift > _LOG10_2_POW_60_CEIL:
            nano = _BINARY_CAP_NANO  # >= 10^19 before the binary multiplier: certainly over the cap
        elif nano_exp >= 0:
            nano = int(sig) * 10**nano_exp * multiplier
        elif n + nano_exp + _LOG10_2_POW_60_CEIL <= 0:
            nano = 1  # even times 2^60 this stays below one nano-unit
        else:
            nano = _ceil_div(int(sig) * multiplier, 10**-nano_exp)
        nano = min(nano, _BINARY_CAP_NANO)
        if nano < _NANO:
            fmt = DECIMAL_SI  # Go: a binary amount strictly between 0 and 1 is shown as DecimalSI
    return Quantity._from_nano(-nano if sign == "-" else nano, fmt)


_parse_text_cached = functools.lru_cache(maxsize=8192)(_parse_text)
"""Quantities are immutable, and manifests repeat the same few spellings ("100m", "1Gi") across thousands
of pods, so parsed results are shared."""


def _away_from_zero(nano: int, unit: int) -> int:
    """nano / unit rounded away from zero (Go's ScaledValue rounding)."""
    if nano >= 0:
        return _ceil_div(nano, unit)
    return -_ceil_div(-nano, unit)


@final
class Quantity:
    """An immutable, exact Kubernetes quantity. Equality, hashing and ordering use the value only, like
    Go's ``Cmp``: ``Quantity("1Ki") == Quantity("1024")`` although they print differently.

    ``Quantity(x)`` is the same as ``Quantity.parse(x)``.
    """

    __slots__ = ("_format", "_nano", "_text")

    _nano: int
    _format: Format
    _text: str | None

    def __new__(cls, value: Quantity | str | int | float) -> Quantity:
        return cls.parse(value)

    @classmethod
    def _from_nano(cls, nano: int, fmt: Format) -> Quantity:
        self = object.__new__(cls)
        object.__setattr__(self, "_nano", nano)
        object.__setattr__(self, "_format", fmt)
        object.__setattr__(self, "_text", None)
        return self

    # --- construction -------------------------------------------------------------------------------

    @classmethod
    def parse(cls, value: Quantity | str | int | float) -> Quantity:
        """Parse a quantity from manifest text, or from the int/float YAML makes of an unquoted number.

        Raises :class:`QuantityError` naming the input for anything that is not a quantity, including
        ``bool`` (YAML's ``yes``/``true`` must not quietly become 1) and non-finite floats.
        """
        if isinstance(value, Quantity):
            return value
        if isinstance(value, str):
            return _parse_text_cached(value)
        if isinstance(value, bool):
            _fail(value, "a boolean is not a quantity")
        if isinstance(value, int):
            if value.bit_length() > _MAX_BITS:
                _fail("<huge int>", f"more than {MAX_DIGITS} digits")
            return _parse_text_cached(str(value))
        if isinstance(value, float):
            if not math.isfinite(value):
                _fail(value, "not a finite number")
            return _parse_text_cached(repr(value))
        _fail(value, f"expected a string or a number, got {type(value).__name__}")

    @classmethod
    def from_int(cls, value: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """Like Go's ``NewQuantity(value, fmt)``: an integer in the given suffix family."""
        _check_int(value)
        if fmt not in _FORMATS:
            raise QuantityError(f"unknown quantity format {fmt!r}")
        return cls._from_nano(value * _NANO, fmt)

    @classmethod
    def from_milli(cls, value: int) -> Quantity:
        """Like Go's ``NewMilliQuantity(value, DecimalSI)``: ``from_milli(1500)`` prints as ``1500m``."""
        _check_int(value)
        return cls._from_nano(value * _MICRO, DECIMAL_SI)

    @classmethod
    def from_nano(cls, value: int, fmt: Format = DECIMAL_SI) -> Quantity:
        """A quantity of ``value`` nano-units (the internal representation, exposed for exact arithmetic)."""
        _check_int(value)
        if fmt not in _FORMATS:
            raise QuantityError(f"unknown quantity format {fmt!r}")
        if fmt == BINARY_SI and 0 < abs(value) < _NANO:
            fmt = DECIMAL_SI
        return cls._from_nano(value, fmt)

    # --- accessors ----------------------------------------------------------------------------------

    @property
    def format(self) -> Format:
        """The suffix family the quantity was written in, which decides how ``str()`` spells it."""
        return self._format

    def value(self) -> int:
        """The value rounded away from zero to an integer (Go ``Value()``; exact, never overflows)."""
        return _away_from_zero(self._nano, _NANO)

    def milli_value(self) -> int:
        """The value in thousandths, rounded away from zero (Go ``MilliValue()``)."""
        return _away_from_zero(self._nano, _MICRO)

    def nano_value(self) -> int:
        """The exact value in nano-units; parsing already rounded anything finer."""
        return self._nano

    def as_fraction(self) -> Fraction:
        """The exact value."""
        return Fraction(self._nano, _NANO)

    def is_zero(self) -> bool:
        return self._nano == 0

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._nano > 0) - (self._nano < 0)

    # --- canonical text -----------------------------------------------------------------------------

    def __str__(self) -> str:
        text = self._text
        if text is None:
            text = _canonical(self._nano, self._format)
            object.__setattr__(self, "_text", text)
        return text

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    # --- value semantics ----------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._nano == other._nano
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._nano)

    def __lt__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._nano < other._nano
        return NotImplemented

    def __le__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._nano <= other._nano
        return NotImplemented

    def __gt__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._nano > other._nano
        return NotImplemented

    def __ge__(self, other: Quantity) -> bool:
        if isinstance(other, Quantity):
            return self._nano >= other._nano
        return NotImplemented

    # --- immutability -------------------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError("Quantity is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("Quantity is immutable")

    def __reduce__(self) -> tuple[Any, tuple[int, Format]]:
        return (Quantity._from_nano, (self._nano, self._format))

    def __copy__(self) -> Quantity:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Quantity:
        return self


def _check_int(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise QuantityError(f"expected an int, got {type(value).__name__} {value!r}")
    if value.bit_length() > _MAX_BITS:
        raise QuantityError(f"integer with more than {MAX_DIGITS} digits is not supported")


def _canonical(nano: int, fmt: Format) -> str:
    """Go's ``CanonicalizeBytes``, on the nano-unit integer."""
    if nano == 0:
        return "0"
    sign = "-" if nano < 0 else ""
    magnitude = -nano if nano < 0 else nano

    if fmt == BINARY_SI and magnitude >= 1024 * _NANO and magnitude % _NANO == 0:
        # A whole value of at least 1024: the largest power of 1024 that divides it picks the suffix.
        # (Go would print no suffix at all past Ei; staying at Ei keeps the text meaningful.)
        mantissa, power = magnitude // _NANO, 0
        while power < 6 and mantissa % 1024 == 0:
            mantissa //= 1024
            power += 1
        return f"{sign}{mantissa}{_BINARY_SUFFIX_BY_POWER[power]}"

    # DecimalSI / DecimalExponent (and BinarySI values that are small or not whole): move every factor of
    # ten into the exponent, then lower the exponent to a multiple of three.
    digits = str(magnitude)
    stripped = digits.rstrip("0")
    exponent = -9 + (len(digits) - len(stripped))
    pad = exponent % 3
    mantissa_text = stripped + "0" * pad
    exponent -= pad
    if fmt == DECIMAL_EXPONENT:
        suffix = f"e{exponent}" if exponent else ""
    else:
        # DecimalSI has no suffix past E (10^18): upstream falls back to exponent notation rather than
        # dropping the magnitude.
        suffix = _DECIMAL_SUFFIX_BY_EXP.get(exponent, f"e{exponent}")
    return f"{sign}{mantissa_text}{suffix}"


QuantityInput = Quantity | str | int | float
"""What :meth:`Quantity.parse` accepts."""


def parse_quantity(value: QuantityInput) -> Quantity:
    """Module-level spelling of :meth:`Quantity.parse`."""
    return Quantity.parse(value)


def format_milli_cpu(milli: int) -> str:
    """Milli-cores as Kubernetes prints cpu: ``1500`` -> ``"1500m"``, ``4000`` -> ``"4"``."""
    return str(Quantity.from_milli(milli))


def format_bytes(n: int) -> str:
    """Bytes as Kubernetes prints memory (BinarySI): ``1073741824`` -> ``"1Gi"``, ``1500`` -> ``"1500"``."""
    return str(Quantity.from_int(n, BINARY_SI))
