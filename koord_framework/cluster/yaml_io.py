"""Reading and writing YAML (and JSON) the way Kubernetes tooling does, for manifests and state dumps.

Reading: libyaml (when PyYAML has it) parses and composes the node graph; the nodes are then turned into
JSON values in one pass instead of through PyYAML's generic constructor, which is several times slower,
would turn timestamps into ``datetime`` objects and silently keeps the last of duplicate keys. The result is
what ``sigs.k8s.io/yaml`` gives the API server: timestamps stay strings, a key repeated in one mapping is
an error, non-string scalar keys become strings, explicit tags other than the core ones are refused, and
aliases may not expand a document past ``MAX_ALIAS_EXPANSION`` nodes.

Writing: a small block-style emitter for JSON values (dicts, lists, strings, numbers, booleans, null),
kubectl-like in layout. It is several times faster than PyYAML's representer, and quotes every string that
a YAML 1.1 or 1.2 reader (PyYAML, go-yaml, kubectl) could take for anything but a string, so that what it
writes reads back to equal values.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

import yaml

from koord_framework.errors import ManifestError

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "dump_yaml_documents",
    "join_path",
    "json_document",
    "yaml_documents",
]

MAX_ALIAS_EXPANSION = 1_000_000
"""Nodes a document that uses YAML aliases may expand to (guards against "billion laughs" documents)."""
MAX_DEPTH = 100
"""Nesting depth of a document; real Kubernetes objects stay far below it."""

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

# --- reading ------------------------------------------------------------------------------------------

# libyaml (when PyYAML has it) parses and composes the node graph; the nodes are then turned into JSON values
# here in one pass instead of through PyYAML's generic constructor, which is several times slower, would
# turn timestamps into datetimes and silently keep the last of duplicate keys.

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + t for t in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ, _MERGE, _TIMESTAMP = (_TAG + t for t in ("map", "seq", "merge", "timestamp"))


_IMPLICIT_RESOLVERS: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


@functools.lru_cache(maxsize=65536)
def _implicit_tag(value: str) -> str:
    """PyYAML's implicit resolution of a plain scalar, minus timestamps; cached because manifests repeat the
    same few hundred scalars (field values, quantities, label values) over and over."""
    for tag, regexp in _IMPLICIT_RESOLVERS.get(value[:1], []) + _IMPLICIT_RESOLVERS.get(None, []):
        if regexp.match(value):
            return tag
    return _STR


class _Loader(_BaseLoader):  # type: ignore[misc]
    """The safe loader without the timestamp resolver (``2024-01-01T00:00:00Z`` stays a string), and with
    a cached resolver: libyaml calls ``resolve`` for every node, which otherwise dominates parsing."""

    yaml_implicit_resolvers = _IMPLICIT_RESOLVERS

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode:
            return _implicit_tag(value) if implicit[0] else _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None  # no path resolvers are registered: skip the bookkeeping

    def ascend_resolver(self) -> None:
        return None


def _yaml_error_text(err: yaml.YAMLError) -> str:
    if isinstance(err, yaml.MarkedYAMLError):
        parts = [p for p in (err.context, err.problem) if p]
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        return f"invalid YAML: {where}{'; '.join(parts) or 'syntax error'}"
    return f"invalid YAML: {err}"


def yaml_documents(text: str, file: str) -> Iterator[tuple[int, Any]]:
    loader = _Loader(text)
    may_alias = "&" in text  # no anchor, no alias: the expansion check can be skipped
    index = 0
    try:
        while True:
            try:
                if not loader.check_node():
                    return
                node = loader.get_node()
            except yaml.YAMLError as err:
                raise ManifestError(file, index, "", _yaml_error_text(err)) from None
            except RecursionError:
                raise ManifestError(file, index, "", "invalid YAML: nesting too deep") from None
            if node is None:
                yield index, None
            else:
                if may_alias:
                    _check_expansion(node, file, index)
                yield index, _NodeConverter(loader, file, index).value(node, "", 0)
            index += 1
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, file: str, doc: int) -> None:
    """Refuse recursive aliases, and aliases that expand the document past ``MAX_ALIAS_EXPANSION`` nodes
    ("billion laughs"), by sizing the node graph without expanding it."""
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(node: yaml.Node) -> int:
        if isinstance(node, yaml.ScalarNode):
            return 1
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in active:
            raise ManifestError(file, doc, "", "a YAML alias refers to its own ancestor (recursive)")
        if len(active) > MAX_DEPTH:
            raise ManifestError(file, doc, "", f"nests deeper than {MAX_DEPTH} levels")
        active.add(id(node))
        if isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            total = 1 + sum(size(v) for v in node.value)
        active.discard(id(node))
        sizes[id(node)] = min(total, MAX_ALIAS_EXPANSION + 1)
        return sizes[id(node)]

    if size(root) > MAX_ALIAS_EXPANSION:
        raise ManifestError(file, doc, "", f"YAML aliases expand past {MAX_ALIAS_EXPANSION} nodes")


class _NodeConverter:
    """YAML nodes to JSON values, as ``sigs.k8s.io/yaml`` would read them, naming the path of any problem."""

    def __init__(self, loader: Any, file: str, doc: int) -> None:
        self.loader, self.file, self.doc = loader, file, doc

    def fail(self, path: str, message: str, node: yaml.Node | None = None) -> ManifestError:
        if node is not None:
            message = f"line {node.start_mark.line + 1}: {message}"
        return ManifestError(self.file, self.doc, path, message)

    def value(self, node: yaml.Node, path: str, depth: int) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path)
        if depth >= MAX_DEPTH:
            raise self.fail(path, f"nests deeper than {MAX_DEPTH} levels", node)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                raise self.fail(path, f"unsupported YAML tag {node.tag!r}", node)
            return [self.value(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(node.value)]
        if node.tag != _MAP:
            raise self.fail(path, f"unsupported YAML tag {node.tag!r}", node)
        return self.mapping(node, path, depth)

    def mapping(self, node: yaml.Node, path: str, depth: int) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        own: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                # "<<: *base" or "<<: [*a, *b]": earlier sources win over later ones, own keys over all.
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in reversed(sources):
                    if not isinstance(source, yaml.MappingNode):
                        raise self.fail(
                            path, "a merge key (<<) needs a mapping or a list of mappings", source
                        )
                    merged.update(self.value(source, path, depth))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(path, "a mapping key must be a scalar", key_node)
            key = self.key(key_node, path)
            child = join_path(path, key)
            if key in own:
                raise self.fail(child, f"duplicate key {key!r}", key_node)
            own[key] = self.value(value_node, child, depth + 1)
        if merged:
            merged.update(own)
            return merged
        return own

    def key(self, node: yaml.ScalarNode, path: str) -> str:
        """A scalar mapping key as ``sigs.k8s.io/yaml`` turns it into a JSON key."""
        key = self.scalar(node, path)
        if isinstance(key, str):
            return key
        if isinstance(key, bool):
            return "true" if key else "false"
        if isinstance(key, (int, float)):
            return str(key) if isinstance(key, int) else repr(key)
        raise self.fail(path, f"mapping key {node.value!r} cannot be a JSON object key", node)

    def scalar(self, node: yaml.ScalarNode, path: str) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return yaml.constructor.SafeConstructor.construct_yaml_bool(self.loader, node)
        if tag == _INT:
            return yaml.constructor.SafeConstructor.construct_yaml_int(self.loader, node)
        if tag == _FLOAT:
            value = yaml.constructor.SafeConstructor.construct_yaml_float(self.loader, node)
            if not math.isfinite(value):
                raise self.fail(path, f"{node.value!r} is not a JSON number", node)
            return value
        raise self.fail(path, f"unsupported YAML tag {tag!r}", node)


def json_document(text: str, file: str) -> Any:
    """One JSON document, refusing duplicate keys, non-finite numbers, unpaired surrogates (which no YAML
    or UTF-8 text can hold) and absurd nesting."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ManifestError(file, 0, "", f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ManifestError(file, 0, "", f"{name} is not a JSON number")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except (json.JSONDecodeError, RecursionError) as err:
        raise ManifestError(file, 0, "", f"invalid JSON: {err}") from None

    def depth_ok(value: Any, path: str, depth: int) -> None:
        if isinstance(value, str):
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise ManifestError(file, 0, path, "string holds an unpaired UTF-16 surrogate") from None
        elif isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                raise ManifestError(file, 0, path, f"nests deeper than {MAX_DEPTH} levels")
            if isinstance(value, dict):
                for k, v in value.items():
                    depth_ok(k, path, depth + 1)
                    depth_ok(v, join_path(path, k), depth + 1)
            else:
                for i, v in enumerate(value):
                    depth_ok(v, f"{path}[{i}]", depth + 1)

    depth_ok(data, "", 0)
    return data


@functools.lru_cache(maxsize=65536)
def join_path(path: str, key: str) -> str:
    """``path`` extended by a mapping key: ``spec.nodeName``, or ``requests[kubernetes.io/batch-cpu]`` for
    keys that are not plain identifiers."""
    part = key if _PLAIN_KEY.fullmatch(key) else f"[{key}]"
    if not path:
        return part
    return path + part if part.startswith("[") else f"{path}.{part}"


# --- writing ------------------------------------------------------------------------------------------

# Strings that some YAML reader would not read back as the same string when written plain: YAML 1.1
# booleans and nulls (go-yaml v2 also takes y/n), and YAML 1.2 numbers that PyYAML's 1.1 rules miss.
_AMBIGUOUS_WORDS = frozenset(
    w
    for word in ("y", "n", "yes", "no", "on", "off", "true", "false", "null", "~")
    for w in (word, word.upper(), word.capitalize())
)
_YAML12_NUMBER = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^0[xo][0-9a-fA-F]+$")
_PLAIN_SAFE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")
_DEFAULT_RESOLVER = yaml.resolver.Resolver()
_YAML_STR_TAG = "tag:yaml.org,2002:str"


def _resolve_plain(text: str) -> str:
    """The tag PyYAML's default (YAML 1.1, timestamps included) resolver gives a plain scalar."""
    tag: str = _DEFAULT_RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return tag


@functools.lru_cache(maxsize=65536)
def _scalar_text(text: str) -> str:
    """A string as a YAML scalar: plain when every reader takes it back as this string, else quoted."""
    if (
        _PLAIN_SAFE.fullmatch(text)
        and text not in _AMBIGUOUS_WORDS
        and not _YAML12_NUMBER.fullmatch(text)
        and _resolve_plain(text) == _YAML_STR_TAG
    ):
        return text
    return _double_quoted(text)


def _double_quoted(text: str) -> str:
    if text.isascii() and text.isprintable():
        return json.dumps(text)
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"' or ch == "\\":
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0xA0:
            out.append(f"\\x{code:02x}")  # C0 and C1 controls, DEL
        elif (
            (code <= 0xD7FF and code not in (0x2028, 0x2029))
            or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
            or code >= 0x10000
        ):
            out.append(ch)  # printable in YAML: written as is
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"string {text!r} holds an unpaired UTF-16 surrogate, which YAML cannot hold")
        else:
            out.append(f"\\u{code:04x}")  # line and paragraph separators, BOM, non-characters
    out.append('"')
    return "".join(out)


def _number_text(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"{value!r} cannot be written: not a JSON number")
    text = repr(value)
    mantissa, sep, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"  # YAML 1.1 floats need the dot: "1e-05" alone would read back as a string
    if sep and exponent[0] not in "+-":
        exponent = "+" + exponent
    return mantissa + (f"e{exponent}" if sep else "")


def _inline(value: Any) -> str | None:
    """The text of a value that fits after ``key: `` or ``- ``; None for a non-empty container."""
    if isinstance(value, str):
        return _scalar_text(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _number_text(value)
    if isinstance(value, dict):
        return None if value else "{}"
    if isinstance(value, list):
        return None if value else "[]"
    raise ValueError(f"cannot write a {type(value).__name__} as YAML: not a JSON value")


def _emit(value: Any, indent: str, out: list[str], first_prefix: str | None = None) -> None:
    """Append the block lines of a non-empty dict or list. ``first_prefix`` replaces the indentation of
    the first line (used for a mapping that starts on a ``- `` line)."""
    prefix = indent if first_prefix is None else first_prefix
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"cannot write mapping key {key!r}: JSON keys are strings")
            text = _inline(item)
            head = f"{prefix}{_scalar_text(key)}:"
            prefix = indent
            if text is not None:
                out.append(f"{head} {text}\n")
            elif isinstance(item, dict):
                out.append(head + "\n")
                _emit(item, indent + "  ", out)
            else:
                out.append(head + "\n")
                _emit(item, indent, out)  # kubectl style: a list sits at its key's indentation
        return
    for item in value:
        text = _inline(item)
        if text is not None:
            out.append(f"{prefix}- {text}\n")
        elif isinstance(item, dict):
            _emit(item, indent + "  ", out, first_prefix=f"{prefix}- ")
        else:
            out.append(f"{prefix}-\n")
            _emit(item, indent + "  ", out)
        prefix = indent


def dump_yaml_documents(values: Iterable[Any]) -> Iterator[str]:
    """YAML text of each value as its own document (``---`` between documents), chunk by chunk."""
    for i, value in enumerate(values):
        out: list[str] = ["---\n"] if i else []
        text = _inline(value)
        if text is not None:
            out.append(text + "\n")
        else:
            _emit(value, "", out)
        yield "".join(out)
