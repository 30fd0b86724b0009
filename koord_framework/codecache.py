"""What start-up derives from the source, derived once at install time, as ``.pyc`` files keep modules.

Three things each koord process used to redo on every start (issue 22, gap 4: first bind within 1.5 s):

* **dataclass methods**: ``dataclasses`` writes the source of each class's ``__init__``, ``__repr__``,
  ``__eq__``, ... and compiles it when the class is made (~1 ms a class on Python 3.11; ``koord
  scheduler`` makes some 200 before its first bind);
* **annotation expressions**: ``typing.ForwardRef`` compiles every string annotation pydantic evaluates
  (some 900);
* **attribute docstrings**: the descriptions of the pydantic models' fields, read by parsing the modules'
  source (``koord_framework.attribute_docs``).

``install()`` gives ``dataclasses`` an ``exec`` and ``typing`` a ``compile`` (module globals shadow the
builtins for those modules alone) that answer a source text found in the table with its code, unmarshalled
on first use, and compile anything else as before; ``attribute_docs`` asks ``attribute_docs_of`` before it
parses a module. Compiled code is keyed by its whole source text, so the table can be incomplete but never
wrong; a module's docstrings are used only while its file has the size and modification time they were
read from. The table is a marshal file next to the package's bytecode, written by
``python -m koord_framework.cli.codecache`` after the modules are installed (``make install`` and the image
run it, as they run ``compileall``); nothing writes it at run time, so a read-only installation behaves the
same. A file of another interpreter (its magic number) or a damaged one is ignored
(``docs/adr/0008-startup-cache.md``).
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
import typing
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType
from typing import Any

__all__ = [
    "attribute_docs_of",
    "build",
    "cache_path",
    "install",
    "record_attribute_docs",
    "recording",
    "stats",
]

_FORMAT = b"koord-codecache-2\n"
_PREFIXES = ("koord_framework", "koord_plugin_", "koord_lib_", "koord_native")
_exec: dict[str, CodeType | bytes] = {}
"""dataclasses' method sources -> their code (``exec`` mode), or the code still marshalled."""
_eval: dict[str, CodeType | bytes] = {}
"""typing's forward-reference expressions -> their code (``eval`` mode), or the code still marshalled."""
_docs: dict[str, tuple[int, int, dict[str, dict[str, str]]]] = {}
"""Module file -> (mtime_ns, size, {class qualname: {attribute: docstring}})."""
_stat: dict[str, tuple[int, int] | None] = {}
_counts = {"hits": 0, "misses": 0}
_recording = [False]


def cache_path() -> Path | None:
    """Where the table of this interpreter lives (None when it keeps no bytecode cache at all)."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    return Path(__file__).resolve().parent / "__pycache__" / f"startup-cache.{tag}.marshal"


def _header() -> bytes:
    return _FORMAT + importlib.util.MAGIC_NUMBER


def _codes(section: Any) -> dict[str, bytes]:
    if not isinstance(section, dict):
        return {}
    return {k: v for k, v in section.items() if isinstance(k, str) and isinstance(v, bytes)}


def _read(path: Path) -> dict[str, Any]:
    """The table's sections (``exec``, ``eval``, ``docs``), empty ones for a missing, foreign or damaged
    file."""
    empty: dict[str, Any] = {"exec": {}, "eval": {}, "docs": {}}
    try:
        data = path.read_bytes()
    except OSError:
        return empty
    header = _header()
    if not data.startswith(header):
        return empty
    try:
        table = marshal.loads(data[len(header) :])
    except (EOFError, ValueError, TypeError):
        return empty
    if not isinstance(table, dict):
        return empty
    docs = table.get("docs")
    return {
        "exec": _codes(table.get("exec")),
        "eval": _codes(table.get("eval")),
        "docs": {
            k: v
            for k, v in (docs.items() if isinstance(docs, dict) else ())
            if isinstance(k, str) and isinstance(v, tuple) and len(v) == 3 and isinstance(v[2], dict)
        },
    }


def _code(table: dict[str, CodeType | bytes], source: str, mode: str) -> CodeType:
    code = table.get(source)
    if type(code) is bytes:
        try:
            code = table[source] = marshal.loads(code)
        except (EOFError, ValueError, TypeError):
            code = None
    if type(code) is CodeType:
        _counts["hits"] += 1
        return code
    _counts["misses"] += 1
    compiled = builtins.compile(source, "<string>", mode)
    if _recording[0]:
        table[source] = compiled
    return compiled


def _cached_exec(table: dict[str, CodeType | bytes]) -> Callable[..., Any]:
    def exec_cached(source: Any, globals: Any = None, locals: Any = None, /) -> Any:
        if type(source) is str:
            source = _code(table, source, "exec")
        return builtins.exec(source, globals, locals)

    exec_cached.koord_codecache = True  # type: ignore[attr-defined]
    return exec_cached


def _cached_compile(table: dict[str, CodeType | bytes]) -> Callable[..., Any]:
    def compile_cached(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
        if mode == "eval" and filename == "<string>" and not args and not kwargs and type(source) is str:
            return _code(table, source, "eval")
        return builtins.compile(source, filename, mode, *args, **kwargs)

    compile_cached.koord_codecache = True  # type: ignore[attr-defined]
    return compile_cached


def install(path: Path | None = None, *, record: bool = False) -> bool:
    """Read the table at ``path`` (default ``cache_path()``) and route ``dataclasses``' and ``typing``'s
    compiles through it; with ``record`` what is compiled or read meanwhile is added to the in-memory table
    (what ``build`` writes). Routes once per process: returns whether it routed them now. Nothing is routed
    when there is no table and nothing is being recorded."""
    if record:
        _recording[0] = True
    if getattr(getattr(dataclasses, "exec", None), "koord_codecache", False):
        return False
    location = path if path is not None else cache_path()
    if location is not None:
        table = _read(location)
        _exec.update(table["exec"])
        _eval.update(table["eval"])
        _docs.update(table["docs"])
    if not (_exec or _eval) and not record:
        return False
    # Both modules call the builtin by its global name; a module global shadows it for that module alone.
    dataclasses.exec = _cached_exec(_exec)  # type: ignore[attr-defined]
    typing.compile = _cached_compile(_eval)  # type: ignore[attr-defined]
    return True


def recording() -> bool:
    """Whether ``build`` is recording (``attribute_docs`` then hands over what it reads)."""
    return _recording[0]


def _file_stat(filename: str) -> tuple[int, int] | None:
    if filename not in _stat:
        try:
            st = os.stat(filename)
            _stat[filename] = (st.st_mtime_ns, st.st_size)
        except OSError:
            _stat[filename] = None
    return _stat[filename]


def attribute_docs_of(filename: str, qualname: str) -> dict[str, str] | None:
    """The attribute docstrings of class ``qualname`` in module file ``filename`` as recorded, or None when
    they were not recorded or the file changed since."""
    entry = _docs.get(filename)
    if entry is None or (entry[0], entry[1]) != _file_stat(filename):
        return None
    docs = entry[2].get(qualname)
    return dict(docs) if isinstance(docs, dict) else None


def record_attribute_docs(filename: str, qualname: str, docs: dict[str, str]) -> None:
    """Keep what ``attribute_docs`` read of a class while ``build`` records."""
    st = _file_stat(filename)
    if not _recording[0] or st is None:
        return
    entry = _docs.get(filename)
    if entry is None or (entry[0], entry[1]) != st:
        entry = _docs[filename] = (st[0], st[1], {})
    entry[2][qualname] = dict(docs)


def stats() -> dict[str, int]:
    """Compiles served from the table (``hits``) and made afresh (``misses``) in this process."""
    return {**_counts, "entries": len(_exec) + len(_eval), "documented_modules": len(_docs)}


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


def _marshalled(table: dict[str, CodeType | bytes]) -> dict[str, bytes]:
    return {k: v if isinstance(v, bytes) else marshal.dumps(v) for k, v in table.items()}


def build(path: Path | None = None, modules: Iterable[str] | None = None) -> tuple[int, list[str]]:
    """Import ``modules`` (default: every module of the installed koord distributions), recording every
    dataclass method and annotation compiled and every attribute docstring read meanwhile, and write the
    table to ``path`` (default ``cache_path()``). Returns the number of compiled entries and the modules
    that failed to import (an optional dependency missing: what they make is derived at run time, as
    without the table)."""
    location = path if path is not None else cache_path()
    if location is None:
        raise RuntimeError("this interpreter keeps no bytecode cache (sys.implementation.cache_tag is None)")
    install(location, record=True)
    for section in (_exec, _eval, _docs):  # what the modules make now, not what an older table held
        section.clear()
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
            marshal.dump({"exec": _marshalled(_exec), "eval": _marshalled(_eval), "docs": dict(_docs)}, out)
        os.chmod(tmp, 0o644)  # read by whoever runs koord (the image's user is not the one that built it)
        os.replace(tmp, location)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(_exec) + len(_eval), failed
