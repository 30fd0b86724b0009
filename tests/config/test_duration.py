"""Go duration parsing and formatting, checked against what Go's time package does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import BaseModel, ValidationError

from koord_framework.config.common import (
    Duration,
    DurationError,
    format_duration,
    format_duration_ns,
    parse_duration,
    parse_duration_ns,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("-0", 0.0),
        ("+0", 0.0),
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("300ms", 0.3),
        ("1h", 3600.0),
        ("1.5h", 5400.0),
        ("-1.5h", -5400.0),
        ("+5s", 5.0),
        ("1h2m3s4ms5us6ns", 3723.004005006),
        ("1s1s", 2.0),
        (".5s", 0.5),
        ("5.s", 5.0),
        ("10µs", 0.00001),
        ("10μs", 0.00001),
        ("10us", 0.00001),
        ("0s", 0.0),
        ("2562047h47m16.854775807s", 9223372036.854775807),
    ],
)
def test_parse_accepts_what_go_accepts(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12, abs=1e-12)


def test_parse_is_exact_in_nanoseconds() -> None:
    assert parse_duration_ns("1h2m3s4ms5us6ns") == 3_723_004_005_006
    assert parse_duration_ns("0.000000001s") == 1
    assert parse_duration_ns("2562047h47m16.854775807s") == (1 << 63) - 1
    assert parse_duration_ns("-2562047h47m16.854775808s") == -(1 << 63)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'invalid duration ""'),
        ("10", 'missing unit in duration "10"'),
        ("1m30", 'missing unit in duration "1m30"'),
        ("abc", 'invalid duration "abc"'),
        ("s", 'invalid duration "s"'),
        (".s", 'invalid duration ".s"'),
        ("-", 'invalid duration "-"'),
        ("10x", 'unknown unit "x" in duration "10x"'),
        ("10 s", 'unknown unit " s" in duration "10 s"'),
        ("1d", 'unknown unit "d" in duration "1d"'),
        ("10S", 'unknown unit "S" in duration "10S"'),
        ("2562047h47m16.854775808s", 'invalid duration "2562047h47m16.854775808s"'),
        ("9223372036854775808ns", 'invalid duration "9223372036854775808ns"'),
        ("99999999999999999999s", 'invalid duration "99999999999999999999s"'),
        ('1"s', 'unknown unit "\\"s" in duration "1\\"s"'),
    ],
)
def test_parse_refuses_with_gos_message(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("nanos", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1_500, "1.5µs"),
        (300_000_000, "300ms"),
        (1_500_000, "1.5ms"),
        (10_000_000_000, "10s"),
        (90_000_000_000, "1m30s"),
        (300_000_000_000, "5m0s"),
        (3_600_000_000_000, "1h0m0s"),
        (5_400_500_000_000, "1h30m0.5s"),
        (-90_000_000_000, "-1m30s"),
    ],
)
def test_format_matches_go_duration_string(nanos: int, text: str) -> None:
    assert format_duration_ns(nanos) == text
    assert parse_duration_ns(text) == nanos


def test_format_seconds_round_trips() -> None:
    for text in ("10s", "1m30s", "300ms", "1h0m0s", "2h45m10.25s"):
        assert format_duration(parse_duration(text)) == text


class _Model(BaseModel):
    timeout: Duration = Duration(60)


def test_duration_field_parses_strings_and_dumps_go_strings() -> None:
    model = _Model.model_validate({"timeout": "1m30s"})
    assert model.timeout == 90.0
    assert isinstance(model.timeout, Duration)
    assert model.model_dump(mode="json") == {"timeout": "1m30s"}
    assert model.model_dump()["timeout"] == 90.0
    assert _Model().model_dump(mode="json") == {"timeout": "1m0s"}
    assert _Model(timeout=timedelta(minutes=2)).timeout == 120.0
    assert repr(Duration(0.25)) == "Duration('250ms')"


@pytest.mark.parametrize(
    ("value", "fragment"), [(10, "duration string"), ("10", "missing unit"), (True, "duration string")]
)
def test_duration_field_refuses_numbers_and_bad_strings(value: object, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        _Model.model_validate({"timeout": value})
    assert fragment in str(info.value)


def test_duration_json_schema_is_a_string_pattern() -> None:
    schema = _Model.model_json_schema()
    prop = schema["properties"]["timeout"]
    assert prop["type"] == "string"
    assert "pattern" in prop
