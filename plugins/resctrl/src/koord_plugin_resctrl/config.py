"""What the strategy reads from the cluster: the NodeSLO's ``resourceQOSStrategy.<class>.resctrlQOS`` per
group and the pod-level ``node.koordinator.sh/resctrl`` annotation, each checked with an error that names
the node (or pod), the group and the field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from koord_framework.api.qos import QoSClass

LSR_GROUP: Final = "LSR"
LS_GROUP: Final = "LS"
BE_GROUP: Final = "BE"
GROUPS: Final = (LSR_GROUP, LS_GROUP, BE_GROUP)
"""Koordinator's ``resctrlGroupList``, in its order."""

CLASS_OF_GROUP: Final = {LSR_GROUP: "lsrClass", LS_GROUP: "lsClass", BE_GROUP: "beClass"}

ANNOTATION_RESCTRL: Final = "node.koordinator.sh/resctrl"
POD_GROUP_PREFIX: Final = "koordlet-"
"""Pod-level groups are ``koordlet-<pod uid>`` (Koordinator's ``ClosdIdPrefix``)."""


def group_of(qos: QoSClass) -> str | None:
    """``getPodResctrlGroup``: LSE and LSR share LSR; LS; BE; anything else has no group."""
    if qos in (QoSClass.LSE, QoSClass.LSR):
        return LSR_GROUP
    if qos is QoSClass.LS:
        return LS_GROUP
    if qos is QoSClass.BE:
        return BE_GROUP
    return None


class ConfigError(ValueError):
    """A resctrl setting that cannot be applied; the message names object, group and field."""


@dataclass(frozen=True, slots=True)
class ResctrlQOS:
    """``resctrlQOS`` of one QoS class after the koordlet's merge over the defaults."""

    enable: bool
    cat_range_start_percent: int | None
    cat_range_end_percent: int | None
    mba_percent: int | None


def _int_field(cfg: Mapping[str, Any], key: str, where: str) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}.{key}: must be an integer, got {value!r}")
    return value


def resctrl_qos_of(strategy: Mapping[str, Any] | None, group: str, node: str) -> ResctrlQOS | None:
    """The group's ``resctrlQOS`` (None when the class or section is absent) with its values checked:
    ``0 <= catRangeStartPercent < catRangeEndPercent <= 100`` and ``mbaPercent`` in [1, 100]."""
    klass = CLASS_OF_GROUP[group]
    where = f"NodeSLO {node}: group {group}: resourceQOSStrategy.{klass}.resctrlQOS"
    if not isinstance(strategy, Mapping):
        return None
    cls_cfg = strategy.get(klass)
    if cls_cfg is None:
        return None
    if not isinstance(cls_cfg, Mapping):
        raise ConfigError(f"NodeSLO {node}: group {group}: resourceQOSStrategy.{klass}: must be an object")
    cfg = cls_cfg.get("resctrlQOS")
    if cfg is None:
        return None
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"{where}: must be an object")
    enable = cfg.get("enable")
    if enable is not None and not isinstance(enable, bool):
        raise ConfigError(f"{where}.enable: must be a boolean, got {enable!r}")
    start = _int_field(cfg, "catRangeStartPercent", where)
    end = _int_field(cfg, "catRangeEndPercent", where)
    mba = _int_field(cfg, "mbaPercent", where)
    if start is not None and not 0 <= start <= 100:
        raise ConfigError(f"{where}.catRangeStartPercent: must be in [0, 100], got {start}")
    if end is not None and not 0 <= end <= 100:
        raise ConfigError(f"{where}.catRangeEndPercent: must be in [0, 100], got {end}")
    if start is not None and end is not None and end <= start:
        raise ConfigError(
            f"{where}.catRangeEndPercent: must be greater than catRangeStartPercent ({start}), got {end}"
        )
    if mba is not None and not 1 <= mba <= 100:
        raise ConfigError(f"{where}.mbaPercent: must be in [1, 100], got {mba}")
    return ResctrlQOS(bool(enable), start, end, mba)


# --- the pod annotation (apis/extension/resctrl.go) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CacheSchemata:
    cache_id: int
    percent: int
    range: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ResctrlConfig:
    """``{"llc": {"schemata": {"range": [s, e]}, "schemataPerCache": [...]}, "mb": {"schemata":
    {"percent": p}, "schemataPerCache": [...]}}``; zero values where a field is absent, as Go decodes."""

    llc_range: tuple[int, ...] = ()
    llc_per_cache: tuple[CacheSchemata, ...] = ()
    mb_percent: int = 0
    mb_per_cache: tuple[CacheSchemata, ...] = ()


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be an object, got {json.dumps(value)}")
    return value


def _int(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: must be an integer, got {json.dumps(value)}")
    return value


def _range(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be a list of integers, got {json.dumps(value)}")
    return tuple(_int(v, f"{where}[{i}]") for i, v in enumerate(value))


def _schemata(value: Any, where: str) -> tuple[int, tuple[int, ...]]:
    cfg = _obj(value, where)
    return _int(cfg.get("percent"), f"{where}.percent"), _range(cfg.get("range"), f"{where}.range")


def _per_cache(value: Any, where: str) -> tuple[CacheSchemata, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be a list, got {json.dumps(value)}")
    out = []
    for i, item in enumerate(value):
        cfg = _obj(item, f"{where}[{i}]")
        percent, rng = _schemata(cfg, f"{where}[{i}]")
        out.append(CacheSchemata(_int(cfg.get("cacheID"), f"{where}[{i}].cacheID"), percent, rng))
    return tuple(out)


def parse_resctrl_annotation(raw: str, pod: str) -> ResctrlConfig:
    """The pod's annotation; ``ConfigError`` naming the pod and the field when it does not decode."""
    where = f"pod {pod}: annotation {ANNOTATION_RESCTRL}"
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"{where}: not JSON: {err}") from None
    top = _obj(data, where)
    llc = _obj(top.get("llc"), f"{where}: llc")
    mb = _obj(top.get("mb"), f"{where}: mb")
    _, llc_range = _schemata(llc.get("schemata"), f"{where}: llc.schemata")
    mb_percent, _ = _schemata(mb.get("schemata"), f"{where}: mb.schemata")
    return ResctrlConfig(
        llc_range=llc_range,
        llc_per_cache=_per_cache(llc.get("schemataPerCache"), f"{where}: llc.schemataPerCache"),
        mb_percent=mb_percent,
        mb_per_cache=_per_cache(mb.get("schemataPerCache"), f"{where}: mb.schemataPerCache"),
    )
