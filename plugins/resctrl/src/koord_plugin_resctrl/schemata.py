"""The arithmetic of resctrl schemata, as Koordinator does it (``pkg/koordlet/util/system/resctrl.go`` and
``qosmanager/plugins/resctrl``): the L3 capacity mask of a percent range, the MB value by CPU vendor, the
lines Koordinator writes and the parse of what the kernel shows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from koord_framework.koordlet.system import AMD_VENDOR_ID

L3_PREFIX: Final = "L3"
MB_PREFIX: Final = "MB"

AMD_CCD_MAX_MB_GBPS: Final = 160
"""25 GB/s x 8 x 0.8 (Koordinator's ``AMDCCDMaxMBGbps``, measured on AMD EPYC Milan)."""
AMD_CCD_UNLIMITED_MB: Final = 2048
"""What AMD reads as unlimited bandwidth."""


class SchemataError(ValueError):
    """A mask or percent that cannot make a schemata value; the message says which input is wrong."""


def parse_cbm(text: str) -> int:
    """``info/L3/cbm_mask`` as an integer (hex, at most 32 bits as Koordinator's ``ParseUint(s, 16, 32)``)."""
    s = text.strip()
    if not s:
        raise SchemataError("cbm is empty")
    try:
        value = int(s, 16)
    except ValueError:
        raise SchemataError(f"cbm {s!r} is not hexadecimal") from None
    if s.startswith(("0x", "0X", "+", "-")) or value >= 1 << 32:
        raise SchemataError(f"cbm {s!r} is not a 32-bit hexadecimal mask")
    return value


def is_contiguous_from_zero(cbm: int) -> bool:
    """All ones from bit 0 (``popcount(cbm + 1) == 1``), which is what the kernel's ``cbm_mask`` always is."""
    return cbm >= 0 and (cbm + 1) & cbm == 0


def calculate_cat_l3_mask(cbm: int, start_percent: int, end_percent: int) -> str:
    """The L3 mask giving ``[start, end)`` percent of the ways (``CalculateCatL3MaskValue``): with
    ``ways = bitlen(cbm)``, bits ``ceil(ways x start / 100)`` up to ``ceil(ways x end / 100)``, in lowercase
    hex. Raises ``SchemataError`` for a cbm that is not ``2^k - 1`` or a range outside ``0 <= start < end <=
    100``."""
    if not is_contiguous_from_zero(cbm) or (cbm + 1).bit_count() != 1:
        raise SchemataError(f"illegal cbm {cbm}")
    if start_percent < 0 or end_percent > 100 or end_percent <= start_percent:
        raise SchemataError(f"illegal l3 cat percent: start {start_percent}, end {end_percent}")
    ways = cbm.bit_length()
    # float64 like Go: ways <= 32 and percents <= 100, so the products are exact and ceil agrees
    start_way = math.ceil(ways * start_percent / 100)
    end_way = math.ceil(ways * end_percent / 100)
    return format((1 << end_way) - (1 << start_way), "x")


def calculate_mba(mba_percent: int | None, vendor: str) -> str:
    """The MB value for a group (``calculateMbaPercentForGroup``): "" when unset or outside [1, 100]; on AMD
    100 -> 2048 (unlimited) else ``int(160 x p / 100)`` GB/s units; elsewhere percent rounded up to a
    multiple of 10 (Intel's granularity)."""
    if mba_percent is None or mba_percent <= 0 or mba_percent > 100:
        return ""
    if vendor == AMD_VENDOR_ID:
        if mba_percent == 100:
            return str(AMD_CCD_UNLIMITED_MB)
        return str(AMD_CCD_MAX_MB_GBPS * mba_percent // 100)
    if mba_percent % 10 != 0:
        return str(mba_percent // 10 * 10 + 10)
    return str(mba_percent)


def mba_value(percent: int, vendor: str) -> int:
    """The per-pod rule (``RDTEngine.calculateMba``): Intel rounds up to 10s, AMD as above, another vendor
    gets 0 (which then fails validation, so no MB line is written)."""
    if vendor == AMD_VENDOR_ID:
        return AMD_CCD_UNLIMITED_MB if percent == 100 else AMD_CCD_MAX_MB_GBPS * percent // 100
    if vendor == "GenuineIntel":
        return percent // 10 * 10 + 10 if percent % 10 else percent
    return 0


def l3_line(values: Mapping[int, int]) -> str:
    """``L3:0=ff;1=ff;\\n``: sorted cache ids, hex masks, a ';' after each and a newline (``L3String``)."""
    if not values:
        return ""
    return L3_PREFIX + ":" + "".join(f"{i}={values[i]:x};" for i in sorted(values)) + "\n"


def mb_line(values: Mapping[int, int]) -> str:
    """``MB:0=100;1=100;\\n`` (``MBString``)."""
    if not values:
        return ""
    return MB_PREFIX + ":" + "".join(f"{i}={values[i]};" for i in sorted(values)) + "\n"


def parse_schemata_map(content: str) -> dict[str, dict[int, str]]:
    """``{"L3": {0: "7ff"}, "MB": {0: "100"}}`` from a schemata file (``ParseResctrlSchemataMap``): lines
    ``KEY:id=v;id=v``, surrounding blanks ignored; a line or piece that does not split cleanly is skipped."""
    out: dict[str, dict[int, str]] = {}
    for raw in content.split("\n"):
        line = raw.strip()
        if not line:
            continue
        pair = line.split(":")
        if len(pair) != 2:
            continue
        masks: dict[int, str] = {}
        for piece in pair[1].split(";"):
            kv = piece.split("=")
            if len(kv) != 2:
                continue
            try:
                masks[_go_int(kv[0])] = kv[1]
            except ValueError:
                continue
        out[pair[0]] = masks
    return out


def _go_int(text: str) -> int:
    # strconv.ParseInt(s, 10, 32): optional sign, digits only, no blanks or underscores
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        raise ValueError(text)
    value = int(text)
    if not -(2**31) <= value < 2**31:
        raise ValueError(text)
    return value


@dataclass(slots=True)
class Schemata:
    """Parsed L3 masks and MB values per cache id, with the expected number of L3 caches
    (``ResctrlSchemataRaw``)."""

    l3: dict[int, int] = field(default_factory=dict)
    mb: dict[int, int] = field(default_factory=dict)
    l3_num: int = 1

    @classmethod
    def for_ids(cls, cache_ids: Iterable[int], l3_num: int | None = None) -> Schemata:
        ids = list(cache_ids)
        return cls(dict.fromkeys(ids, 0), dict.fromkeys(ids, 0), len(ids) if l3_num is None else l3_num)

    @classmethod
    def parse(cls, content: str, l3_num: int = -1) -> Schemata:
        """``ParseResctrlSchemata``: each of L3 (hex) and MB (decimal) present must have ``l3_num`` entries
        (-1: whatever the first present line has); a value that does not parse is an error."""
        found = parse_schemata_map(content)
        out = cls()
        for prefix, base, target in ((L3_PREFIX, 16, out.l3), (MB_PREFIX, 10, out.mb)):
            masks = found.get(prefix)
            if masks is None:
                continue
            if l3_num == -1:
                l3_num = len(masks)
            if len(masks) != l3_num:
                raise SchemataError(f"{prefix} masks has invalid count {len(masks)}, l3Num {l3_num}")
            for cache_id, text in masks.items():
                try:
                    target[cache_id] = int(text.strip(), base)
                except ValueError:
                    raise SchemataError(f"{prefix} mask {text!r} is invalid") from None
        out.l3_num = len(out.l3) if l3_num == -1 else l3_num
        return out

    def validate_l3(self) -> str | None:
        """None when the L3 part can be written, else why not (``ValidateL3``)."""
        if self.l3_num <= 0:
            return "L3 number is zero"
        if not self.l3:
            return "no L3 CAT info"
        if self.l3_num != len(self.l3):
            return "unmatched L3 number and CAT infos"
        if any(v <= 0 for v in self.l3.values()):
            return "wrong value of L3 mask"
        return None

    def validate_mb(self) -> str | None:
        if self.l3_num <= 0:
            return "L3 number is zero"
        if not self.mb:
            return "no MBA info"
        if any(v <= 0 for v in self.mb.values()):
            return "wrong value of MB mask"
        return None

    def validate(self) -> str | None:
        if (msg := self.validate_l3()) is not None:
            return f"L3 CAT is invalid, msg: {msg}"
        if (msg := self.validate_mb()) is not None:
            return f"MBA is invalid, msg: {msg}"
        return None
