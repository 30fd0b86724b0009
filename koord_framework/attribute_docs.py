"""Attribute docstrings of pydantic models, read from one parse of each module instead of one per class.

Every model of the project sets ``use_attribute_docstrings`` (the docstring under a field becomes its
description: the JSON schema's and the README's args tables). On Python < 3.13 pydantic finds a class's
source by walking the interpreter stack with ``inspect.getmodule`` for every frame, then tokenises and
parses the class's block, for each class it creates: about a quarter of ``koord scheduler``'s profile
loading (issue 22, gap 4: 0.24 of 0.85 CPU s). Here a module's source is parsed once and the class is found
in it by its qualified name; the docstrings are collected by pydantic's own visitor, so they are the same.
Whatever this cannot place with certainty (a class made in a function, two classes of one qualified name in
a module, no source) goes to pydantic's own lookup.

``install()`` runs when ``koord_framework.plugin`` is imported, before any model of the project exists. What
it reads is also recorded at install time (``koord_framework.codecache``): a start-up then parses no module
whose file is unchanged since.
"""

from __future__ import annotations

import ast
import linecache
import sys
from collections.abc import Callable
from typing import Any

from koord_framework import codecache

__all__ = ["install"]

_Extract = Callable[..., dict[str, str]]
_trees: dict[str, ast.Module | None] = {}


def _module_tree(filename: str) -> ast.Module | None:
    if filename not in _trees:
        lines = linecache.getlines(filename)
        try:
            _trees[filename] = ast.parse("".join(lines)) if lines else None
        except SyntaxError:
            _trees[filename] = None
    return _trees[filename]


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module's top level, those inside its ``if`` / ``try`` / ``with`` blocks too: a
    class defined under ``if TYPE_CHECKING:`` is still at module level (its qualified name says so)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out += _module_level(stmt.body) + _module_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                out += _module_level(part)
        elif isinstance(stmt, ast.With):
            out += _module_level(stmt.body)
    return out


def _class_node(tree: ast.Module, qualname: str) -> ast.ClassDef | None:
    """The one class statement at ``qualname`` (classes nested in classes only), or None if not one."""
    body: list[ast.stmt] = _module_level(tree.body)
    node: ast.ClassDef | None = None
    for part in qualname.split("."):
        found = [s for s in body if isinstance(s, ast.ClassDef) and s.name == part]
        if len(found) != 1:
            return None
        node = found[0]
        body = node.body
    return node


def _fast(original: _Extract, visitor_class: type[ast.NodeVisitor]) -> _Extract:
    def extract_docstrings_from_cls(cls: type[Any], use_inspect: bool = False) -> dict[str, str]:
        module = sys.modules.get(cls.__module__)
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str) or "<" in cls.__qualname__:
            return original(cls, use_inspect=use_inspect)
        recorded = codecache.attribute_docs_of(filename, cls.__qualname__)
        if recorded is not None:  # read at install time from this very file (no parse at start-up)
            return recorded
        tree = _module_tree(filename)
        node = _class_node(tree, cls.__qualname__) if tree is not None else None
        if node is None:
            return original(cls, use_inspect=use_inspect)
        visitor = visitor_class()
        visitor.generic_visit(node)
        attrs: dict[str, str] = getattr(visitor, "attrs", {})
        codecache.record_attribute_docs(filename, cls.__qualname__, attrs)
        return attrs

    extract_docstrings_from_cls.koord_fast = True  # type: ignore[attr-defined]
    return extract_docstrings_from_cls


def install() -> None:
    """Route pydantic's class docstring lookup through the per-module parse (once; a pydantic without the
    hook keeps its own lookup, which gives the same descriptions, only slower)."""
    if sys.version_info >= (3, 13):
        return  # pydantic reads the class's first line number there: no stack walk to save
    try:
        from pydantic._internal import _docs_extraction, _fields
    except ImportError:
        return
    original = getattr(_fields, "extract_docstrings_from_cls", None)
    visitor_class = getattr(_docs_extraction, "DocstringVisitor", None)
    if original is None or visitor_class is None or getattr(original, "koord_fast", False):
        return
    _fields.extract_docstrings_from_cls = _fast(original, visitor_class)  # type: ignore[attr-defined]
