"""Kubernetes ``resource.Quantity`` semantics, checked against cases from upstream's quantity_test.go.

Every table row names the Go test it comes from (k8s.io/apimachinery/pkg/api/resource/quantity_test.go).
Go tables give the expected amount (e.g. ``decQuantity(901, -2, DecimalSI)``); the canonical strings below
follow from that amount by Go's ``CanonicalizeBytes`` rules, and Value/MilliValue round away from zero.
"""

from __future__ import annotations

import copy
import pickle
from fractions import Fraction

import pytest

from koord_framework.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    QuantityError,
    format_bytes,
    format_milli_cpu,
    parse_quantity,
)

INT64_MAX = 9223372036854775807

# (input, canonical String(), Value(), MilliValue(), Format, Go test the case comes from)
PARSE_CASES: list[tuple[str, str, int, int, str, str]] = [
    ("0", "0", 0, 0, DECIMAL_SI, "TestQuantityParse"),
    ("0n", "0", 0, 0, DECIMAL_SI, "TestQuantityParse"),
    ("0Ki", "0", 0, 0, BINARY_SI, "TestQuantityParse"),
    ("0T", "0", 0, 0, DECIMAL_SI, "TestQuantityParse"),
    ("1", "1", 1, 1000, DECIMAL_SI, "TestQuantityParse"),
    ("1Ki", "1Ki", 1024, 1024000, BINARY_SI, "TestQuantityParse"),
    ("8Ki", "8Ki", 8192, 8192000, BINARY_SI, "TestQuantityParse"),
    ("7Mi", "7Mi", 7340032, 7340032000, BINARY_SI, "TestQuantityParse"),
    ("6Gi", "6Gi", 6442450944, 6442450944000, BINARY_SI, "TestQuantityParse"),
    ("5Ti", "5Ti", 5497558138880, 5497558138880000, BINARY_SI, "TestQuantityParse"),
    ("4Pi", "4Pi", 4503599627370496, 4503599627370496000, BINARY_SI, "TestQuantityParse"),
    ("3Ei", "3Ei", 3458764513820540928, 3458764513820540928000, BINARY_SI, "TestQuantityParse"),
    ("100Ti", "100Ti", 109951162777600, 109951162777600000, BINARY_SI, "TestQuantityParse"),
    ("5n", "5n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("4u", "4u", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("3m", "3m", 1, 3, DECIMAL_SI, "TestQuantityParse"),
    ("9", "9", 9, 9000, DECIMAL_SI, "TestQuantityParse"),
    ("8k", "8k", 8000, 8000000, DECIMAL_SI, "TestQuantityParse"),
    ("50k", "50k", 50000, 50000000, DECIMAL_SI, "TestQuantityParse"),
    ("7M", "7M", 7000000, 7000000000, DECIMAL_SI, "TestQuantityParse"),
    ("6G", "6G", 6000000000, 6000000000000, DECIMAL_SI, "TestQuantityParse"),
    ("40T", "40T", 40 * 10**12, 40 * 10**15, DECIMAL_SI, "TestQuantityParse"),
    ("300T", "300T", 300 * 10**12, 300 * 10**15, DECIMAL_SI, "TestQuantityParse"),
    ("2P", "2P", 2 * 10**15, 2 * 10**18, DECIMAL_SI, "TestQuantityParse"),
    ("1E", "1E", 10**18, 10**21, DECIMAL_SI, "TestQuantityParse"),
    ("1E-3", "1e-3", 1, 1, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1e3", "1e3", 1000, 1000000, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1E6", "1e6", 10**6, 10**9, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1e14", "100e12", 10**14, 10**17, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1e13", "10e12", 10**13, 10**16, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("100.035k", "100035", 100035, 100035000, DECIMAL_SI, "TestQuantityParse"),
    ("0.001", "1m", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("0.0005k", "500m", 1, 500, DECIMAL_SI, "TestQuantityParse"),
    ("0.00500", "5m", 1, 5, DECIMAL_SI, "TestQuantityParse"),
    ("0.5e0", "500e-3", 1, 500, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("0.5e-1", "50e-3", 1, 50, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("10.035M", "10035k", 10035000, 10035000000, DECIMAL_SI, "TestQuantityParse"),
    ("1.2e3", "1200", 1200, 1200000, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1.3E+6", "1300e3", 1300000, 1300000000, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1.40e9", "1400e6", 1400000000, 1400000000000, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1.53E12", "1530e9", 1530 * 10**9, 1530 * 10**12, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("1.7E18", "1700e15", 17 * 10**17, 17 * 10**20, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("9.01", "9010m", 10, 9010, DECIMAL_SI, "TestQuantityParse"),
    ("8.1k", "8100", 8100, 8100000, DECIMAL_SI, "TestQuantityParse"),
    ("7.123456M", "7123456", 7123456, 7123456000, DECIMAL_SI, "TestQuantityParse"),
    ("6.987654321G", "6987654321", 6987654321, 6987654321000, DECIMAL_SI, "TestQuantityParse"),
    ("5.444T", "5444G", 5444 * 10**9, 5444 * 10**12, DECIMAL_SI, "TestQuantityParse"),
    ("2.5P", "2500T", 25 * 10**14, 25 * 10**17, DECIMAL_SI, "TestQuantityParse"),
    ("1.01E", "1010P", 101 * 10**16, 101 * 10**19, DECIMAL_SI, "TestQuantityParse"),
    # "Things that saturate/round" (TestQuantityParse)
    ("3.001n", "4n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("1.1E-9", "2e-9", 1, 1, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("0.0000000001", "1n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("0.0000000005", "1n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("0.5e-9", "1e-9", 1, 1, DECIMAL_EXPONENT, "TestQuantityParse"),
    ("0.9n", "1n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("0.00000012345", "124n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("0.00000012354", "124n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    ("9Ei", "9223372036854775807", INT64_MAX, INT64_MAX * 1000, BINARY_SI, "TestQuantityParse"),
    (
        "9223372036854775807Ki",
        "9223372036854775807",
        INT64_MAX,
        INT64_MAX * 1000,
        BINARY_SI,
        "TestQuantityParse",
    ),
    ("12E", "12E", 12 * 10**18, 12 * 10**21, DECIMAL_SI, "TestQuantityParse"),
    # "We'll accept fractional binary stuff, too." (TestQuantityParse)
    ("100.035Ki", "102435840m", 102436, 102435840, BINARY_SI, "TestQuantityParse"),
    ("0.5Mi", "512Ki", 524288, 524288000, BINARY_SI, "TestQuantityParse"),
    ("0.05Gi", "53687091200m", 53687092, 53687091200, BINARY_SI, "TestQuantityParse"),
    ("0.025Ti", "27487790694400m", 27487790695, 27487790694400, BINARY_SI, "TestQuantityParse"),
    # "Things written by trolls" (TestQuantityParse)
    ("0.000000000001Ki", "2n", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    (".001", "1m", 1, 1, DECIMAL_SI, "TestQuantityParse"),
    (".0001k", "100m", 1, 100, DECIMAL_SI, "TestQuantityParse"),
    ("1.", "1", 1, 1000, DECIMAL_SI, "TestQuantityParse"),
    ("1.G", "1G", 10**9, 10**12, DECIMAL_SI, "TestQuantityParse"),
    # TestQuantityParseEmit
    ("1024Mi", "1Gi", 1073741824, 1073741824000, BINARY_SI, "TestQuantityParseEmit"),
    ("1000M", "1G", 10**9, 10**12, DECIMAL_SI, "TestQuantityParseEmit"),
    (".001Ki", "1024m", 2, 1024, BINARY_SI, "TestQuantityParseEmit"),
    # below 1 a binary amount switches to DecimalSI at parse time (ParseQuantity)
    (".000001Ki", "1024u", 1, 2, DECIMAL_SI, "TestQuantityParseEmit"),
    (".000000001Ki", "1024n", 1, 1, DECIMAL_SI, "TestQuantityParseEmit"),
    (".000000000001Ki", "2n", 1, 1, DECIMAL_SI, "TestQuantityParseEmit"),
    ("-.001Ki", "-1024m", -2, -1024, BINARY_SI, "TestQuantityParseEmit (negated)"),
    # TestQuantityString: the "alternate" spellings re-emit the canonical one
    ("307200Ki", "300Mi", 314572800, 314572800000, BINARY_SI, "TestQuantityString"),
    ("1025024Mi", "1001Gi", 1001 * 2**30, 1001 * 2**30 * 1000, BINARY_SI, "TestQuantityString"),
    ("5000m", "5", 5, 5000, DECIMAL_SI, "TestQuantityString"),
    ("0.5", "500m", 1, 500, DECIMAL_SI, "TestQuantityString"),
    ("1.08", "1080m", 2, 1080, DECIMAL_SI, "TestQuantityString"),
    ("1080000000n", "1080m", 2, 1080, DECIMAL_SI, "TestQuantityString"),
    ("0.001T", "1G", 10**9, 10**12, DECIMAL_SI, "TestQuantityString"),
    ("1000u", "1m", 1, 1, DECIMAL_SI, "TestQuantityString"),
    ("1000E", "1e21", 10**21, 10**24, DECIMAL_SI, "TestQuantityString"),
    ("5000E", "5e21", 5 * 10**21, 5 * 10**24, DECIMAL_SI, "TestQuantityString"),
    ("1000000E", "1e24", 10**24, 10**27, DECIMAL_SI, "TestQuantityString"),
    (".001e12", "1e9", 10**9, 10**12, DECIMAL_EXPONENT, "TestQuantityString"),
    ("0.001e0", "1e-3", 1, 1, DECIMAL_EXPONENT, "TestQuantityString"),
    ("1000e-12", "1e-9", 1, 1, DECIMAL_EXPONENT, "TestQuantityString"),
    ("00", "0", 0, 0, DECIMAL_SI, "TestQuantityString"),
    ("1234567M", "1234567M", 1234567 * 10**6, 1234567 * 10**9, DECIMAL_SI, "TestQuantityString"),
    ("80e-3", "80e-3", 1, 80, DECIMAL_EXPONENT, "TestQuantityString"),
    ("300e6", "300e6", 300 * 10**6, 300 * 10**9, DECIMAL_EXPONENT, "TestQuantityString"),
    ("1080u", "1080u", 1, 2, DECIMAL_SI, "TestQuantityString"),
    # TestParseQuantity (19/20-digit and int64 boundaries; decimals are not capped)
    (
        "999999999999999999.1",
        "999999999999999999100m",
        10**18,
        999999999999999999100,
        DECIMAL_SI,
        "TestParseQuantity",
    ),
    (
        "-9999999999999999999.1",
        "-9999999999999999999100m",
        -(10**19),
        -9999999999999999999100,
        DECIMAL_SI,
        "TestParseQuantity",
    ),
    ("-1.0E", "-1E", -(10**18), -(10**21), DECIMAL_SI, "TestParseQuantity"),
    ("10000000000000000000", "10E", 10**19, 10**22, DECIMAL_SI, "TestParseQuantity"),
    ("10000000000000000000000m", "10E", 10**19, 10**22, DECIMAL_SI, "TestParseQuantity"),
    (
        "1.000000000000000001E",
        "1000000000000000001",
        10**18 + 1,
        (10**18 + 1) * 1000,
        DECIMAL_SI,
        "TestParseQuantity",
    ),
    (
        "9223372036854775807000m",
        "9223372036854775807",
        INT64_MAX,
        INT64_MAX * 1000,
        DECIMAL_SI,
        "TestParseQuantity",
    ),
    ("9223372036854775808", "9223372036854775808", 2**63, 2**63 * 1000, DECIMAL_SI, "TestParseQuantity"),
    (
        "-9223372036854775808.1",
        "-9223372036854775808100m",
        -(2**63) - 1,
        -9223372036854775808100,
        DECIMAL_SI,
        "TestParseQuantity",
    ),
    # TestQuantityRoundUp/TestNeg inputs: negative values round away from zero
    ("-9.01", "-9010m", -10, -9010, DECIMAL_SI, "TestQuantityRoundUp"),
    (
        "-1.025Ti",
        "-1126999418470400m",
        -1126999418471,
        -1126999418470400,
        BINARY_SI,
        "TestParseQuantityString",
    ),
    # Explicit sign (TestQuantityParse re-parses every case with "+" prepended)
    ("+1.5Gi", "1536Mi", 1610612736, 1610612736000, BINARY_SI, "TestQuantityParse (explicit +)"),
    ("+100m", "100m", 1, 100, DECIMAL_SI, "TestQuantityParse (explicit +)"),
    # Examples from the Quantity doc comment in quantity.go
    ("1.5", "1500m", 2, 1500, DECIMAL_SI, "Quantity doc comment"),
    ("1.5Gi", "1536Mi", 1610612736, 1610612736000, BINARY_SI, "Quantity doc comment"),
    ("1.2345", "1234500u", 2, 1235, DECIMAL_SI, "Quantity doc comment"),
    ("8Ei", "9223372036854775807", INT64_MAX, INT64_MAX * 1000, BINARY_SI, "Quantity doc comment"),
]


@pytest.mark.parametrize(("text", "canonical", "value", "milli", "fmt", "go_test"), PARSE_CASES)
def test_parse_canonical_value_milli(
    text: str, canonical: str, value: int, milli: int, fmt: str, go_test: str
) -> None:
    q = Quantity.parse(text)
    assert str(q) == canonical, go_test
    assert q.value() == value, go_test
    assert q.milli_value() == milli, go_test
    assert q.format == fmt, go_test
    # The canonical form parses back to the same value and is a fixed point.
    again = Quantity.parse(canonical)
    assert again == q
    assert str(again) == canonical


def test_table_is_large_enough() -> None:
    assert len(PARSE_CASES) >= 45


# TestQuantityParse's `invalid` list, TestQuantityParseNonNumericPanic, TestQuantityValueSet, plus
# shapes outside the documented grammar (no digits, spaces, units Kubernetes does not know).
INVALID = [
    "",  # TestQuantityParse: empty string
    "1.1.M",  # TestQuantityParse
    "1+1.0M",  # TestQuantityParse
    "0.1mi",  # TestQuantityParse
    "0.1am",  # TestQuantityParse
    "aoeu",  # TestQuantityParse
    ".5i",  # TestQuantityParse
    "1i",  # TestQuantityParse
    "-3.01i",  # TestQuantityParse
    "-3.01e-",  # TestQuantityParse
    " 1",  # TestQuantityParse: leading whitespace
    "1 ",  # TestQuantityParse: trailing whitespace
    "Non-Numeric",  # TestQuantityParseNonNumericPanic
    "invalid",  # TestQuantityValueSet
    "1.2.3",
    "Gi",
    "k",
    "1 Gi",
    "1KiB",
    "1kb",
    "1ki",
    "1K",
    "--1",
    "+-1",
    "1e",
    "1E+",
    "1e3.5",
    "1ee3",
    "1Gi2",
    "1m3",
    ".",
    "+",
    "-",
    "1\n",
    "\t1",
    "\u0661",  # ARABIC-INDIC DIGIT ONE: Go only accepts ASCII digits
    "1e99999999999999999999",  # exponent outside int64 (Go: strconv.ParseInt fails)
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_strings_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        Quantity.parse(text)
    assert repr(text) in str(info.value)


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="'1KiB'"):
        parse_quantity("1KiB")


def test_yaml_numbers() -> None:
    # YAML hands unquoted numbers over as int/float; upstream decodes JSON numbers through the same parser.
    assert Quantity.parse(2).milli_value() == 2000
    assert str(Quantity.parse(2)) == "2"
    assert str(Quantity.parse(0.1)) == "100m"
    assert Quantity.parse(0.5).milli_value() == 500
    assert Quantity.parse(1e20).value() == 10**20  # repr "1e+20"
    assert str(Quantity.parse(1e-7)) == "100e-9"  # repr "1e-07"
    assert Quantity.parse(-0.0).is_zero()
    assert Quantity.parse(10**30).value() == 10**30


@pytest.mark.parametrize("bad", [True, False, None, float("nan"), float("inf"), [1], {"a": 1}])
def test_non_quantity_types_rejected(bad: object) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(bad)  # type: ignore[arg-type]


def test_absurd_sizes_rejected_not_built() -> None:
    with pytest.raises(QuantityError, match="magnitude"):
        Quantity.parse("1e4000")
    with pytest.raises(QuantityError, match="significant digits"):
        Quantity.parse("1" * 4001)
    # A huge negative exponent is merely a tiny positive value: it rounds up to one nano-unit.
    assert str(Quantity.parse("1e-999999999")) == "1e-9"
    assert Quantity.parse("0.000000000000000000000000000001Ki").nano_value() == 1
    # Binary values are capped before anything large is computed.
    assert Quantity.parse("123456789012345678901234567890Ei").value() == INT64_MAX


def test_new_set() -> None:
    # TestNewSet
    assert str(Quantity.from_int(1)) == "1"
    assert str(Quantity.from_int(1000)) == "1k"
    assert str(Quantity.from_int(1234000)) == "1234k"
    assert str(Quantity.from_int(1024, BINARY_SI)) == "1Ki"
    assert str(Quantity.from_int(1024 * 1024, BINARY_SI)) == "1Mi"
    assert str(Quantity.from_int(10**6, DECIMAL_EXPONENT)) == "1e6"
    assert Quantity.parse(str(Quantity.from_int(1234000))).value() == 1234000
    # TestQuantityString: BinarySI below 1024 or with a fraction falls back to DecimalSI
    assert str(Quantity.from_int(5, BINARY_SI)) == "5"
    assert str(Quantity.from_int(1025, BINARY_SI)) == "1025"
    assert str(Quantity.from_int(0, BINARY_SI)) == "0"
    with pytest.raises(QuantityError):
        Quantity.from_int(1, "Bogus")  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        Quantity.from_int(True)


def test_milli_new_set() -> None:
    # TestMilliNewSet
    assert str(Quantity.from_milli(1)) == "1m"
    assert str(Quantity.from_milli(1000)) == "1"
    assert str(Quantity.from_milli(1234000)) == "1234"
    assert Quantity.parse(str(Quantity.from_milli(1234000))).milli_value() == 1234000
    # NewMilliQuantity(1024, BinarySI) -> "1024m": the format changes because 1.024 is not whole
    assert str(Quantity.from_nano(1024 * 10**6, BINARY_SI)) == "1024m"
    assert str(Quantity.from_nano(1024 * 1024 * 10**6, BINARY_SI)) == "1048576m"


def test_new_scaled_set() -> None:
    # TestNewScaledSet / TestScaledValue (from nano-units)
    assert str(Quantity.from_nano(1)) == "1n"
    assert str(Quantity.from_nano(1000)) == "1u"
    assert str(Quantity.from_nano(10**6)) == "1m"
    assert str(Quantity.from_nano(10**9)) == "1"
    assert Quantity.from_nano(1).milli_value() == 1
    assert Quantity.from_nano(1).value() == 1
    assert Quantity.from_nano(-1).value() == -1


def test_neg_string() -> None:
    # TestQuantityNeg: -(9.01) prints as -9010m; TestQuantityString negates every row
    assert str(Quantity.parse("-9.01")) == "-9010m"
    assert str(Quantity.parse("-1Gi")) == "-1Gi"
    assert str(Quantity.parse("-300e6")) == "-300e6"
    assert str(Quantity.parse("-0")) == "0"


def test_cmp_equality_hash_order() -> None:
    # TestQuantityCmp
    assert Quantity.parse("100m") > Quantity.parse("50m")
    assert Quantity.parse("50m") < Quantity.parse("100m")
    assert Quantity.parse("10000T") > Quantity.parse("100Gi")
    assert Quantity.parse("0") == Quantity.parse("0Ki")
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert hash(Quantity.parse("1.5Gi")) == hash(Quantity.parse("1536Mi"))
    assert len({Quantity.parse("1k"), Quantity.parse("1000"), Quantity.parse("1e3")}) == 1
    assert sorted([Quantity.parse("1"), Quantity.parse("100m"), Quantity.parse("-1")]) == [
        Quantity.parse("-1"),
        Quantity.parse("100m"),
        Quantity.parse("1"),
    ]
    assert Quantity.parse("1") != "1"
    assert Quantity.parse("1") <= Quantity.parse("1000m") <= Quantity.parse("1")


def test_immutable_and_copyable() -> None:
    q = Quantity.parse("1.5Gi")
    with pytest.raises(AttributeError):
        q._nano = 0  # type: ignore[misc]
    assert copy.copy(q) is q
    assert copy.deepcopy(q) is q
    restored = pickle.loads(pickle.dumps(q))
    assert restored == q
    assert str(restored) == "1536Mi"
    assert restored.format == BINARY_SI
    assert Quantity("250m") == Quantity.parse("250m")
    assert repr(Quantity("250m")) == "Quantity('250m')"


def test_as_fraction_is_exact() -> None:
    assert Quantity.parse("1.5Gi").as_fraction() == Fraction(3 * 2**29)
    assert Quantity.parse("0.1").as_fraction() == Fraction(1, 10)
    assert Quantity.parse("3.001n").as_fraction() == Fraction(4, 10**9)
    assert Quantity.parse("-9.01").as_fraction() == Fraction(-901, 100)


@pytest.mark.parametrize(
    ("milli", "text"),
    [(1500, "1500m"), (4000, "4"), (0, "0"), (1, "1m"), (100, "100m"), (1000000, "1k"), (-500, "-500m")],
)
def test_format_milli_cpu(milli: int, text: str) -> None:
    assert format_milli_cpu(milli) == text
    assert Quantity.parse(text).milli_value() == milli


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (1073741824, "1Gi"),
        (1500, "1500"),
        (0, "0"),
        (512, "512"),
        (1000, "1k"),  # below 1024 BinarySI is printed as DecimalSI, as upstream does
        (1024, "1Ki"),
        (1536 * 2**20, "1536Mi"),
        (8 * 2**30 + 1, "8589934593"),
        (3 * 2**60, "3Ei"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text
    assert Quantity.parse(text).value() == n
