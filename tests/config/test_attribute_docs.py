"""Attribute docstrings found by one parse per module (koord_framework.attribute_docs) are pydantic's own."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict
from pydantic._internal import _docs_extraction, _fields

import koord_framework.config.loader
import koord_framework.settings  # noqa: F401


def _extract() -> Any:
    return getattr(_fields, "extract_docstrings_from_cls")  # noqa: B009 - private, not re-exported


def _project_models() -> Iterator[type[BaseModel]]:
    for dist in importlib.metadata.distributions():
        for ep in dist.entry_points:
            if ep.group.startswith("koord."):
                try:
                    ep.load()  # the plugins and their args models
                except Exception:  # a plugin that cannot load is another test's failure
                    continue
    seen: set[type[BaseModel]] = set()
    todo = list(BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("koord") and "<" not in cls.__qualname__:
            yield cls


def test_the_hook_is_installed() -> None:
    assert getattr(_extract(), "koord_fast", False)


def test_same_docstrings_as_pydantic_reads_from_the_source() -> None:
    models = list(_project_models())
    assert len(models) > 50
    documented = 0
    for cls in models:
        ours = _extract()(cls)
        theirs = _docs_extraction.extract_docstrings_from_cls(cls, use_inspect=True)
        assert ours == theirs, cls.__qualname__
        documented += len(ours)
    assert documented > 200


def test_a_model_made_in_a_function_still_gets_its_docstrings() -> None:
    class Local(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        size: int = 1
        """How big."""

    assert Local.model_fields["size"].description == "How big."
    assert pydantic.VERSION
