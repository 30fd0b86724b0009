"""Pieces every configuration kind shares: Go durations, plugin sets, pluginConfig, leader election, client
connection, label selectors, and the strict base model they are built on.

The models mirror the Go API types field for field (JSON names, pointer-vs-value defaults). Decoding follows
Kubernetes' strict decoder: unknown keys are errors, a string is never silently turned into a number (or the
reverse), and ``null`` means "unset" exactly as it does for a Go field.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from koord_framework.attribute_docs import install as _install_attribute_docs

_install_attribute_docs()  # before the first model: class creation reads attribute docstrings

# --- Go durations -----------------------------------------------------------------------------------

_NANOS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "μs": 1_000,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_MAX_NANOS = (1 << 63) - 1
_DIGITS = "0123456789"


class DurationError(ValueError):
    """A string that Go's ``time.ParseDuration`` would refuse; the message is Go's, without ``time:``."""


def _go_quote(text: str) -> str:
    """Quote like Go's time package does in its errors, so messages match what kube components print."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return '"' + "".join(out) + '"'


def parse_duration_ns(text: str) -> int:
    """Parse a Go duration (``"10s"``, ``"1m30s"``, ``"300ms"``, ``"-1.5h"``) into integer nanoseconds.

    Follows ``time.ParseDuration`` exactly, including its quirks: a bare ``"0"`` needs no unit, every other
    number does, units may repeat (``"1s1s"`` is 2s), and anything beyond ±(2^63-1) ns is invalid.
    """
    orig = text
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationError(f"invalid duration {_go_quote(orig)}")
    total = 0
    while s:
        if not (s[0] == "." or s[0] in _DIGITS):
            raise DurationError(f"invalid duration {_go_quote(orig)}")
        # Integer part: Go rejects it once it cannot fit in 63 bits.
        i = 0
        whole = 0
        while i < len(s) and s[i] in _DIGITS:
            whole = whole * 10 + int(s[i])
            if whole > 1 << 63:
                raise DurationError(f"invalid duration {_go_quote(orig)}")
            i += 1
        had_whole = i > 0
        s = s[i:]
        frac, scale, had_frac = 0, 1, False
        if s and s[0] == ".":
            s = s[1:]
            j = 0
            overflow = False
            while j < len(s) and s[j] in _DIGITS:
                # Like Go's leadingFraction: digits past what fits are consumed but ignored.
                if not overflow:
                    nxt = frac * 10 + int(s[j])
                    if frac > ((1 << 63) - 1) // 10 or nxt > 1 << 63:
                        overflow = True
                    else:
                        frac = nxt
                        scale *= 10
                j += 1
            had_frac = j > 0
            s = s[j:]
        if not had_whole and not had_frac:
            raise DurationError(f"invalid duration {_go_quote(orig)}")
        k = 0
        while k < len(s) and not (s[k] == "." or s[k] in _DIGITS):
            k += 1
        if k == 0:
            raise DurationError(f"missing unit in duration {_go_quote(orig)}")
        unit_text, s = s[:k], s[k:]
        unit = _NANOS_PER_UNIT.get(unit_text)
        if unit is None:
            raise DurationError(f"unknown unit {_go_quote(unit_text)} in duration {_go_quote(orig)}")
        if whole > (1 << 63) // unit:
            raise DurationError(f"invalid duration {_go_quote(orig)}")
        value = whole * unit
        if frac > 0:
            # Go computes the fractional part in float64; int() truncates the same way uint64() does.
            value += int(float(frac) * (float(unit) / float(scale)))
            if value > 1 << 63:
                raise DurationError(f"invalid duration {_go_quote(orig)}")
        total += value
        if total > 1 << 63:
            raise DurationError(f"invalid duration {_go_quote(orig)}")
    if neg:
        return -total
    if total > _MAX_NANOS:
        raise DurationError(f"invalid duration {_go_quote(orig)}")
    return total


def parse_duration(text: str) -> float:
    """Parse a Go duration string into seconds (``"1m30s"`` → ``90.0``); raises ``DurationError``."""
    return parse_duration_ns(text) / 1e9


def _fraction(value: int, digits: int) -> str:
    """``value`` as the decimals of a ``digits``-place fraction, trailing zeros dropped ('' when zero)."""
    if value == 0:
        return ""
    return "." + str(value).rjust(digits, "0").rstrip("0")


def format_duration_ns(nanos: int) -> str:
    """Go's ``time.Duration.String()``: ``"1h0m0s"``, ``"1m30s"``, ``"300ms"``, ``"1.5µs"``, ``"0s"``."""
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    u = abs(nanos)
    if u < 1_000_000_000:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{u // 1_000}{_fraction(u % 1_000, 3)}µs"
        return f"{sign}{u // 1_000_000}{_fraction(u % 1_000_000, 6)}ms"
    secs, rest = divmod(u, 1_000_000_000)
    out = f"{secs % 60}{_fraction(rest, 9)}s"
    mins = secs // 60
    if mins:
        out = f"{mins % 60}m{out}"
        hours = mins // 60
        if hours:
            out = f"{hours}h{out}"
    return sign + out


def format_duration(seconds: float) -> str:
    """Seconds as a Go duration string (``90.0`` → ``"1m30s"``)."""
    return format_duration_ns(round(seconds * 1e9))


class Duration(float):
    """A Go ``metav1.Duration``: seconds as a float, read from and written as a Go duration string.

    YAML gives it as a string (``10s``); a bare number is refused as Kubernetes refuses it, because ``10``
    could mean seconds or nanoseconds. In Python, a ``Duration`` or ``timedelta`` is accepted, so models write
    their defaults as ``Duration(15)``.
    """

    @classmethod
    def parse(cls, text: str) -> Duration:
        return cls(parse_duration(text))

    def go_string(self) -> str:
        return format_duration(self)

    def __str__(self) -> str:
        return self.go_string()

    def __repr__(self) -> str:
        return f"Duration({self.go_string()!r})"

    @classmethod
    def _validate(cls, value: Any) -> Duration:
        if isinstance(value, Duration):
            return value
        if isinstance(value, timedelta):
            return cls(value.total_seconds())
        if isinstance(value, str):
            return cls.parse(value)
        raise PydanticCustomError(
            "duration_type", 'must be a duration string such as "10s", "1m30s" or "300ms"'
        )

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda v: format_duration(v), when_used="json"
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "pattern": r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$",
            "description": 'A Go duration such as "10s", "1m30s" or "300ms".',
        }


# --- names and selectors ----------------------------------------------------------------------------

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def qualified_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a Kubernetes qualified name (``[prefix/]name``), as apimachinery words it."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        if len(prefix) > 253:
            return ["prefix part must be no more than 253 characters"]
        if not _DNS1123_SUBDOMAIN_RE.match(prefix):
            return ["prefix part must be a lowercase RFC 1123 subdomain"]
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional "
            "DNS subdomain prefix and '/'"
        ]
    if not name:
        return ["name part must be non-empty"]
    if len(name) > 63:
        return ["name part must be no more than 63 characters"]
    if not _QUALIFIED_NAME_RE.match(name):
        return [
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        ]
    return []


def label_value_errors(value: str) -> list[str]:
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if not _LABEL_VALUE_RE.match(value):
        return [
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
            "'.', and must start and end with an alphanumeric character"
        ]
    return []


def hostname_errors(host: str) -> list[str]:
    """Syntax check for a host name (no DNS lookup: validation must not depend on the network)."""
    try:
        ipaddress.ip_address(host)
        return []
    except ValueError:
        pass
    if len(host) > 253 or not _DNS1123_SUBDOMAIN_RE.match(host.lower()):
        return [f"invalid host {host!r} in socket address"]
    return []


def split_host_port(address: str) -> tuple[str, str]:
    """Go's ``net.SplitHostPort``: ``"h:p"`` or ``"[v6]:p"``; raises ValueError with Go's wording."""
    if address.startswith("["):
        end = address.find("]")
        if end < 0:
            raise ValueError(f"address {address}: missing ']' in address")
        host, rest = address[1:end], address[end + 1 :]
        if not rest.startswith(":"):
            raise ValueError(f"address {address}: missing port in address")
        port = rest[1:]
        if "[" in port or "]" in port:
            raise ValueError(f"address {address}: unexpected ']' in address")
        return host, port
    idx = address.rfind(":")
    if idx < 0:
        raise ValueError(f"address {address}: missing port in address")
    host, port = address[:idx], address[idx + 1 :]
    if ":" in host:
        raise ValueError(f"address {address}: too many colons in address")
    if "[" in host or "]" in host:
        raise ValueError(f"address {address}: unexpected '[' in address")
    return host, port


def socket_address_errors(address: str) -> list[str]:
    """Why ``address`` is not a ``host:port`` listen address (Koordinator's ``isValidSocketAddr``)."""
    try:
        host, port = split_host_port(address)
    except ValueError as exc:
        return [f"must be a valid socket address (host:port), got error: {exc}"]
    if host:
        errs = hostname_errors(host)
        if errs:
            return errs
    if not port:
        return ["port must not be empty in socket address"]
    return []


# --- the strict base ---------------------------------------------------------------------------------

Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
UInt = Annotated[int, Field(ge=0, le=2**64 - 1)]
NonEmptyStr = Annotated[str, Field(min_length=1)]


class ConfigModel(BaseModel):
    """Base of every configuration model: strict types, unknown keys refused, camelCase YAML names, frozen.

    ``null`` for any field means "unset" (the Go zero value), so ``filter:`` with nothing under it is the same
    as leaving ``filter`` out, as it is for kube-scheduler.
    """

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
        allow_inf_nan=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data


class TypedConfig(ConfigModel):
    """A top-level configuration document: ``apiVersion`` and ``kind`` are fixed per kind."""

    API_VERSION: ClassVar[str] = ""
    KIND: ClassVar[str] = ""

    api_version: str = Field(default="", alias="apiVersion")
    kind: str = ""

    @field_validator("api_version")
    @classmethod
    def _check_api_version(cls, v: str) -> str:
        # An empty value is left to the loader, which knows whether the document named its kind at all.
        if v and v != cls.API_VERSION:
            raise ValueError(f"{v!r} is not supported for {cls.KIND}; use {cls.API_VERSION!r}")
        return v

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, v: str) -> str:
        if v and v != cls.KIND:
            raise ValueError(f"must be {cls.KIND!r}, got {v!r}")
        return v


# --- defaulting of the component configurations ----------------------------------------------------------


def apply_profile_defaults(
    data: Any, name_key: str, default_name: str, *, unset: tuple[object, ...] = (None,)
) -> Any:
    """Profile defaulting on the raw document, as kube-scheduler and Koordinator's descheduler both do it:
    no profiles -> one empty profile; a lone profile whose ``name_key`` is one of ``unset`` gets
    ``default_name``. ``unset`` differs because kube-scheduler's name is a pointer (only nil is unset) and
    the descheduler's a string (``""`` is unset too)."""
    if not isinstance(data, dict):
        return data
    profiles = data.get("profiles")
    if profiles is None or profiles == []:
        data = {**data, "profiles": [{}]}
        profiles = data["profiles"]
    lone = profiles[0] if isinstance(profiles, list) and len(profiles) == 1 else None
    if isinstance(lone, dict) and lone.get(name_key) in unset:
        data = {**data, "profiles": [{**lone, name_key: default_name}]}
    return data


def default_contention_profiling(data: Any) -> Any:
    """component-base's defaulting: an unset ``enableContentionProfiling`` follows ``enableProfiling``
    (itself true by default)."""
    if isinstance(data, dict) and data.get("enableContentionProfiling") is None:
        profiling = data.get("enableProfiling", True)
        if isinstance(profiling, bool):
            data = {**data, "enableContentionProfiling": profiling}
    return data


# --- plugin sets and plugin config ---------------------------------------------------------------------


class PluginRef(ConfigModel):
    """One entry of a plugin list: a name and, for Score, a weight (kube-scheduler's ``v1.Plugin``)."""

    name: NonEmptyStr
    """The plugin's registered name (``LoadAwareScheduling``), or ``*`` in ``disabled`` for every default."""
    weight: Int32 | None = None
    """Score weight; only read at the Score extension point (and multiPoint). Unset or 0 means 1."""

    @field_validator("weight")
    @classmethod
    def _weight_not_negative(cls, v: int | None) -> int | None:
        # kube-scheduler passes a negative weight through and inverts the score; call it the mistake it is.
        if v is not None and v < 0:
            raise PydanticCustomError("weight", "must be >= 0 (0 or unset means the default weight 1)")
        return v


class PluginSet(ConfigModel):
    """Enabled and disabled plugins of one extension point (kube-scheduler's ``v1.PluginSet``)."""

    enabled: list[PluginRef] = []
    """Plugins to run here, after the defaults, in this order. Naming a default re-configures it in place."""
    disabled: list[PluginRef] = []
    """Default plugins not to run here; ``- name: "*"`` drops every default of this point."""

    def disables_all(self) -> bool:
        return any(p.name == "*" for p in self.disabled)


class PluginConfig(ConfigModel):
    """Arguments for one plugin. Validated against that plugin's ``Args`` model once the name resolves."""

    name: NonEmptyStr
    args: dict[str, Any] | None = None


class LeaderElection(ConfigModel):
    """component-base ``LeaderElectionConfiguration`` with its recommended defaults.

    A zero duration means "unset" and takes the default, as in Go.
    """

    leader_elect: bool = True
    lease_duration: Duration = Duration(15)
    """How long non-leaders wait after the last renewal before taking over."""
    renew_deadline: Duration = Duration(10)
    """How long the leader keeps retrying a renewal before giving up leadership."""
    retry_period: Duration = Duration(2)
    """Wait between attempts to acquire or renew."""
    resource_lock: str = "leases"
    resource_name: str = ""
    resource_namespace: str = ""

    _ZERO_DEFAULTS: ClassVar[dict[str, float]] = {
        "lease_duration": 15,
        "renew_deadline": 10,
        "retry_period": 2,
    }

    @field_validator("lease_duration", "renew_deadline", "retry_period")
    @classmethod
    def _zero_is_default(cls, v: Duration, info: Any) -> Duration:
        return Duration(cls._ZERO_DEFAULTS[info.field_name]) if float(v) == 0.0 else v

    @field_validator("resource_lock")
    @classmethod
    def _lock_default(cls, v: str) -> str:
        return v or "leases"

    def with_lock_object(self, namespace: str, name: str) -> LeaderElection:
        """Fill the lock object's namespace and name where the document left them empty."""
        return self.model_copy(
            update={
                "resource_namespace": self.resource_namespace or namespace,
                "resource_name": self.resource_name or name,
            }
        )

    def problems(self) -> list[tuple[str, str]]:
        """component-base's ``ValidateLeaderElectionConfiguration``: (field, message) pairs."""
        if not self.leader_elect:
            return []
        out: list[tuple[str, str]] = []
        durations = {
            "leaseDuration": self.lease_duration,
            "renewDeadline": self.renew_deadline,
            "retryPeriod": self.retry_period,
        }
        out += [(name, "must be greater than zero") for name, value in durations.items() if value <= 0]
        if self.lease_duration <= self.renew_deadline:
            out.append(("leaseDuration", "must be greater than renewDeadline"))
        if self.renew_deadline <= 1.2 * self.retry_period:
            # client-go's NewLeaderElector refuses this at start-up (JitterFactor 1.2); say so up front.
            out.append(("renewDeadline", "must be greater than retryPeriod × 1.2"))
        for field, value in (
            ("resourceLock", self.resource_lock),
            ("resourceName", self.resource_name),
            ("resourceNamespace", self.resource_namespace),
        ):
            if not value:
                out.append((field, f"{field} is required"))
        return out


class ClientConnection(ConfigModel):
    """component-base ``ClientConnectionConfiguration`` with the scheduler's defaults (qps 50, burst 100)."""

    kubeconfig: str = ""
    """Path to a kubeconfig; empty means in-cluster (or the ``KOORD_KUBECONFIG`` process setting)."""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    """Requests per second to the API server; 0 means the default 50."""
    burst: Int32 = 100
    """Extra requests allowed in a burst; 0 means the default 100."""

    @field_validator("content_type")
    @classmethod
    def _content_type_default(cls, v: str) -> str:
        return v or "application/vnd.kubernetes.protobuf"

    @field_validator("qps")
    @classmethod
    def _qps_default(cls, v: float) -> float:
        return v or 50.0

    @field_validator("burst")
    @classmethod
    def _burst(cls, v: int) -> int:
        if v < 0:
            raise PydanticCustomError("burst", "must be non-negative")
        return v or 100


class LabelSelectorRequirement(ConfigModel):
    key: NonEmptyStr
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []


class LabelSelector(ConfigModel):
    """``metav1.LabelSelector``: every ``matchLabels`` pair and every expression must hold (AND)."""

    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []

    def problems(self) -> list[tuple[list[str | int], str]]:
        """``LabelSelectorAsSelector`` checks, as (relative path parts, message) pairs."""
        out: list[tuple[list[str | int], str]] = []
        for key, value in self.match_labels.items():
            out += [(["matchLabels", key], f"invalid label key: {m}") for m in qualified_name_errors(key)]
            out += [(["matchLabels", key], f"invalid label value: {m}") for m in label_value_errors(value)]
        for i, req in enumerate(self.match_expressions):
            here: list[str | int] = ["matchExpressions", i]
            out += [([*here, "key"], f"invalid label key: {m}") for m in qualified_name_errors(req.key)]
            if req.operator in ("In", "NotIn") and not req.values:
                out.append(([*here, "values"], "for 'In' and 'NotIn' operators, values must not be empty"))
            if req.operator in ("Exists", "DoesNotExist") and req.values:
                out.append(
                    ([*here, "values"], "for 'Exists' and 'DoesNotExist' operators, values must be empty")
                )
            for j, value in enumerate(req.values):
                out += [
                    ([*here, "values", j], f"invalid label value: {m}") for m in label_value_errors(value)
                ]
        return out

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether ``labels`` satisfy the selector (an empty selector matches everything)."""
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In" and not (present and labels[req.key] in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True
