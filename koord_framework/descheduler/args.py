"""Argument pieces several descheduler plugins share, spelled as Koordinator's v1alpha2 API spells them.

* ``Namespaces`` (``{include, exclude}``), ``PriorityThreshold`` (``{value, name}``) and
  ``LabelSelector`` (metav1) as nested models;
* ``priority_threshold_problems`` and ``selector_problems``: the checks of those pieces, for ``fail``;
* ``fail`` raises validation problems with a precise location inside a plugin's args, so the configuration
  loader reports ``profiles[0].pluginConfig[LowNodeLoad].args.lowThresholds.cpu: ...`` rather than a
  message about the args as a whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from koord_framework.api.selectors import LabelSelector as ParsedSelector
from koord_framework.api.selectors import SelectorError, parse_label_selector
from koord_framework.config.common import ConfigModel, LabelSelector

Loc = tuple[str | int, ...]


def fail(title: str, problems: Sequence[tuple[Loc, str, Any]]) -> None:
    """Raise every ``(location, message, input)`` as one pydantic ``ValidationError`` (no-op when empty)."""
    if not problems:
        return
    details = [
        InitErrorDetails(type=PydanticCustomError("invalid", message), loc=loc, input=value)
        for loc, message, value in problems
    ]
    raise ValidationError.from_exception_data(title, details)


class Namespaces(ConfigModel):
    """Namespaces a plugin works on: only ``include`` ones, or all but ``exclude`` ones (not both)."""

    include: list[str] = []
    """Only pods in these namespaces are considered. Default: none (no restriction)."""
    exclude: list[str] = []
    """Pods in these namespaces are never considered. Default: none."""

    def admits(self, namespace: str) -> bool:
        if self.include and namespace not in self.include:
            return False
        return not (self.exclude and namespace in self.exclude)


class PriorityThreshold(ConfigModel):
    """Only pods with a priority below this may be evicted: a ``value``, or a PriorityClass ``name``."""

    value: int | None = None
    """Priority value; pods at or above it are protected. Default: unset."""
    name: str = ""
    """PriorityClass whose value is the threshold (instead of ``value``). Default: unset."""

    @property
    def is_set(self) -> bool:
        return self.value is not None or bool(self.name)


def priority_threshold_problems(
    threshold: PriorityThreshold | None, loc: Loc = ("priorityThreshold",)
) -> list[tuple[Loc, str, Any]]:
    """``ValidatePriorityThreshold``: ``value`` and ``name`` are alternatives, as ``fail`` problems."""
    if threshold is not None and threshold.value is not None and threshold.name:
        return [
            (loc, "priority threshold misconfigured, only one of priorityThreshold fields can be set", None)
        ]
    return []


def selector_dict(selector: LabelSelector | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A LabelSelector model as the metav1 mapping (``matchLabels``/``matchExpressions``)."""
    if selector is None:
        return None
    if isinstance(selector, Mapping):
        return dict(selector)
    return {
        "matchLabels": dict(selector.match_labels),
        "matchExpressions": [
            {"key": r.key, "operator": r.operator, "values": list(r.values)}
            for r in selector.match_expressions
        ],
    }


def parse_selector_model(selector: LabelSelector | None) -> ParsedSelector | None:
    """``LabelSelectorAsSelector`` of an optional selector model (None stays None)."""
    as_dict = selector_dict(selector)
    return None if as_dict is None else parse_label_selector(as_dict)


def selector_problems(selector: LabelSelector | None, loc: Loc) -> list[tuple[Loc, str, Any]]:
    """Why a selector would not convert, as ``fail`` problems under ``loc``."""
    if selector is None:
        return []
    try:
        parse_label_selector(selector_dict(selector))
    except SelectorError as err:
        return [(loc, err.message if not err.path else f"{err.path}: {err.message}", None)]
    return []


__all__ = [
    "LabelSelector",
    "Namespaces",
    "PriorityThreshold",
    "fail",
    "parse_selector_model",
    "priority_threshold_problems",
    "selector_dict",
    "selector_problems",
]
