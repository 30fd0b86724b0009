"""Compiled dataclass methods kept between processes, as ``.pyc`` files keep modules.

``dataclasses`` writes the source of each class's ``__init__``, ``__repr__``, ``__eq__``, ... and compiles
it when the class is made. On Python 3.11 that compile is most of the ~1 ms a class costs, and ``koord
scheduler`` makes some 300 dataclasses (its own, its plugins', pydantic's) before its first bind: about an
eighth of the instructions of importing its modules and loading its profile (issue 22, gap 4: first bind
within 1.5 s).

``install()`` hands ``dataclasses`` an ``exec`` that looks the source text up in a table of code compiled
earlier, and compiles what it does not find as before. The table is keyed by the whole text, so it can be
incomplete but never wrong. It is a marshal file next to the package's bytecode, written by
``python -m koord_framework.cli.codecache`` after the modules are installed (``make install`` and the image
run it, as they run ``compileall``); nothing writes it at run time, so a read-only installation behaves the
same. A file written by another interpreter (its magic number) or damaged is ignored. ``docs/adr/0008``.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import importlib.util
import marshal
import os
import pkgutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = ["build", "cache_path", "install", "stats"]

_FORMAT = b"koord-codecache-1\n"
_PREFIXES = ("koord_framework", "koord_plugin_", "koord_lib_", "koord_native")
_table: dict[str, CodeType | bytes] = {}
"""Source text -> its code, or the code still marshalled (unmarshalled on first use: a scheduler uses about
half of what the installed distributions define)."""
_counts = {"hits": 0, "misses": 0}
_recording = [False]


def cache_path() -> Path | None:
    """Where the table of this interpreter lives (None when it keeps no bytecode cache at all)."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    return Path(__file__).resolve().parent / "__pycache__" / f"dataclass-methods.{tag}.marshal"


def _header() -> bytes:
    return _FORMAT + importlib.util.MAGIC_NUMBER


def _read(path: Path) -> dict[str, bytes]:
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    header = _header()
    if not data.startswith(header):
        return {}
    try:
        table = marshal.loads(data[len(header) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, bytes)}


def _cached_exec(table: dict[str, CodeType | bytes]) -> Callable[..., Any]:
    def exec_cached(source: Any, globals: Any = None, locals: Any = None, /) -> Any:
        if type(source) is str:
            code = table.get(source)
            if type(code) is bytes:
                try:
                    code = table[source] = marshal.loads(code)
                except (EOFError, ValueError, TypeError):
                    code = None
            if type(code) is not CodeType:
                _counts["misses"] += 1
                code = compile(source, "<string>", "exec")
                if _recording[0]:
                    table[source] = code
            else:
                _counts["hits"] += 1
            source = code
        return builtins.exec(source, globals, locals)

    exec_cached.koord_codecache = True  # type: ignore[attr-defined]
    return exec_cached


def install(path: Path | None = None, *, record: bool = False) -> bool:
    """Route ``dataclasses``' compiles through the table at ``path`` (default ``cache_path()``); with
    ``record`` the sources compiled meanwhile are added to the in-memory table (what ``build`` writes).
    Once per process: returns whether it routed them now. Nothing is routed when there is no table and
    nothing is being recorded."""
    if record:
        _recording[0] = True
    if getattr(getattr(dataclasses, "exec", None), "koord_codecache", False):
        return False
    location = path if path is not None else cache_path()
    if location is not None:
        _table.update(_read(location))
    if not _table and not record:
        return False
    # ``dataclasses`` calls ``exec`` by its global name; a module global shadows the builtin for it alone.
    dataclasses.exec = _cached_exec(_table)  # type: ignore[attr-defined]
    return True


def stats() -> dict[str, int]:
    """Compiles served from the table (``hits``) and made afresh (``misses``) in this process."""
    return {**_counts, "entries": len(_table)}


def _ignore(_name: str) -> None:
    """``walk_packages`` could not import a package to look inside: ``build`` reports it when importing."""


def _modules() -> list[str]:
    """Every module of the koord distributions installed next to this one."""
    names: list[str] = []
    for info in pkgutil.iter_modules():
        if not info.name.startswith(_PREFIXES):
            continue
        names.append(info.name)
        if info.ispkg:
            spec = importlib.util.find_spec(info.name)
            locations = spec.submodule_search_locations if spec is not None else None
            found = pkgutil.walk_packages(list(locations or ()), prefix=f"{info.name}.", onerror=_ignore)
            names += [sub.name for sub in found]
    return [n for n in dict.fromkeys(names) if n.rsplit(".", 1)[-1] != "__main__"]


def build(path: Path | None = None, modules: Iterable[str] | None = None) -> tuple[int, list[str]]:
    """Import ``modules`` (default: every module of the installed koord distributions), recording every
    dataclass method compiled meanwhile, and write the table to ``path`` (default ``cache_path()``).
    Returns the number of entries and the modules that failed to import (an optional dependency
    missing: their classes are compiled at run time, as without the table)."""
    location = path if path is not None else cache_path()
    if location is None:
        raise RuntimeError("this interpreter keeps no bytecode cache (sys.implementation.cache_tag is None)")
    _table.clear()  # what the modules make now, not what an older version made
    install(location, record=True)
    failed: list[str] = []
    for name in modules if modules is not None else _modules():
        try:
            importlib.import_module(name)
        except Exception:
            failed.append(name)
    location.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=location.parent, prefix=location.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_header())
            marshal.dump({k: v if isinstance(v, bytes) else marshal.dumps(v) for k, v in _table.items()}, out)
        os.chmod(tmp, 0o644)  # read by whoever runs koord (the image's user is not the one that built it)
        os.replace(tmp, location)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(_table), failed
