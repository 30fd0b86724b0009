"""A small renderer of Helm charts: Go's text/template language and the Helm/sprig functions charts use.

``helm`` cannot be installed from the package registries this project builds from, so the chart is
validated by rendering it here, with the semantics of ``helm template`` for the subset of the language the
chart uses (and errors, not guesses, for anything outside it):

* actions ``{{ }}`` with trim markers ``{{-``/``-}}``, comments, pipelines, parenthesised pipelines,
  variables (``$``, ``$x :=``, ``$x =``), fields of maps (a missing key is nil; a field of nil is an error,
  as in Go), method calls (``.Files.Get``);
* ``if``/``else if``/``else``, ``with``/``else``, ``range`` (lists and maps, maps in key order, with
  ``$i, $v :=``), ``define``, ``template``, ``include``;
* Go's truth rules and ``and``/``or``/``not``/``eq``/``ne``/``lt``/``le``/``gt``/``ge``/``len``/``index``/
  ``print``/``printf``, and the sprig/Helm functions listed in ``FUNCTIONS``.

``toYaml`` keys are sorted and the trailing newline dropped, as Helm's ``toYaml`` does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Chart", "TemplateError", "render_chart"]


class TemplateError(Exception):
    pass


# --- lexing ----------------------------------------------------------------------------------------------
@dataclass
class _Action:
    source: str
    line: int


def _lex(text: str, name: str) -> list[str | _Action]:
    """Text and actions, with trim markers already applied to the neighbouring text."""
    out: list[str | _Action] = []
    pos = 0
    trim_next = False
    while True:
        start = text.find("{{", pos)
        chunk = text[pos:] if start < 0 else text[pos:start]
        if trim_next:
            chunk = chunk.lstrip(" \t\r\n")
        if start < 0:
            out.append(chunk)
            return out
        inner_start = start + 2
        trim_left = text[inner_start : inner_start + 2] in ("- ", "-\t", "-\n", "-\r")
        if trim_left:
            chunk = chunk.rstrip(" \t\r\n")
            inner_start += 1
        out.append(chunk)
        end = _find_close(text, inner_start, name)
        inner_end = end
        trim_next = text[end - 2 : end] in (" -", "\t-", "\n-", "\r-")
        if trim_next:
            inner_end = end - 1
        source = text[inner_start:inner_end].strip()
        line = text.count("\n", 0, start) + 1
        if not (source.startswith("/*") and source.endswith("*/")):
            out.append(_Action(source, line))
        pos = end + 2


def _find_close(text: str, pos: int, name: str) -> int:
    if text[pos:].lstrip(" \t\r\n").startswith("/*"):
        # A comment: quotes inside it are prose, not literals.
        end = text.find("*/", pos)
        close = text.find("}}", end) if end >= 0 else -1
        if close < 0:
            raise TemplateError(f"{name}: unclosed comment")
        return close
    i = pos
    while i < len(text):
        char = text[i]
        if char in "\"'`":
            quote_char = char
            i += 1
            while i < len(text) and text[i] != quote_char:
                i += 2 if text[i] == "\\" and quote_char != "`" else 1
        elif text.startswith("}}", i):
            return i
        i += 1
    raise TemplateError(f"{name}: unclosed action")


_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<declare>:=)
  | (?P<field>(?:\.[A-Za-z_]\w*)+)
  | (?P<dot>\.)
  | (?P<var>\$[A-Za-z_0-9]*(?:\.[A-Za-z_]\w*)*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<punct>[()|,=])
    """,
    re.VERBOSE,
)


@dataclass
class _Tok:
    kind: str
    value: str
    adjacent: bool
    """No whitespace before it (distinguishes ``(x).Field`` from ``(x) .Field``)."""


def _tokens(source: str, where: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    adjacent = False
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:
            raise TemplateError(f"{where}: cannot parse {source[pos:]!r}")
        kind = m.lastgroup or ""
        if kind == "ws":
            adjacent = False
        else:
            toks.append(_Tok(kind, m.group(), adjacent))
            adjacent = True
        pos = m.end()
    return toks


# --- parsing -----------------------------------------------------------------------------------------
@dataclass
class _Operand:
    kind: str  # lit, dot, field, var, fn, paren
    value: Any = None
    names: tuple[str, ...] = ()


@dataclass
class _Pipeline:
    decl: tuple[str, ...]
    assign: bool
    commands: list[list[_Operand]]


@dataclass
class _Node:
    kind: str  # text, print, if, range, with, template
    text: str = ""
    pipe: _Pipeline | None = None
    body: list[_Node] = field(default_factory=list)
    branches: list[tuple[_Pipeline, list[_Node]]] = field(default_factory=list)
    else_body: list[_Node] = field(default_factory=list)
    name: str = ""
    where: str = ""


class _Parser:
    def __init__(self, items: list[str | _Action], name: str, defines: dict[str, list[_Node]]) -> None:
        self.items, self.name, self.defines, self.i = items, name, defines, 0

    def parse(self) -> list[_Node]:
        nodes, stop = self._list()
        if stop is not None:
            raise TemplateError(f"{self.name}:{stop[1]}: unexpected {{{{{stop[0]}}}}}")
        return nodes

    def _list(self) -> tuple[list[_Node], tuple[str, int] | None]:
        nodes: list[_Node] = []
        while self.i < len(self.items):
            item = self.items[self.i]
            self.i += 1
            if isinstance(item, str):
                if item:
                    nodes.append(_Node("text", text=item))
                continue
            where = f"{self.name}:{item.line}"
            src = item.source
            word = src.split(None, 1)[0] if src else ""
            rest = src[len(word) :].strip()
            if word in ("end", "else"):
                return nodes, (src, item.line)
            if word in ("if", "with"):
                nodes.append(self._conditional(word, rest, where))
            elif word == "range":
                node = _Node("range", pipe=_parse_pipeline(rest, where), where=where)
                node.body, stop = self._list()
                if stop and stop[0] == "else":
                    node.else_body, stop = self._list()
                self._expect_end(stop, where)
                nodes.append(node)
            elif word == "define":
                name = _string_literal(rest, where)
                body, stop = self._list()
                self._expect_end(stop, where)
                self.defines[name] = body
            elif word == "template":
                name_tok, _, arg = rest.partition(" ")
                pipe = _parse_pipeline(arg, where) if arg.strip() else None
                nodes.append(_Node("template", name=_string_literal(name_tok, where), pipe=pipe, where=where))
            elif word == "block":
                raise TemplateError(f"{where}: block is not supported")
            else:
                nodes.append(_Node("print", pipe=_parse_pipeline(src, where), where=where))
        return nodes, None

    def _conditional(self, word: str, rest: str, where: str) -> _Node:
        node = _Node(word, where=where)
        pipe = _parse_pipeline(rest, where)
        while True:
            body, stop = self._list()
            node.branches.append((pipe, body))
            if stop is None:
                raise TemplateError(f"{where}: missing {{{{end}}}}")
            text = stop[0]
            if text == "end":
                return node
            if text == "else":
                node.else_body, stop = self._list()
                self._expect_end(stop, where)
                return node
            if text.startswith(f"else {word} "):
                pipe = _parse_pipeline(text[len(f"else {word} ") :], where)
                continue
            raise TemplateError(f"{where}: unexpected {{{{{text}}}}}")

    @staticmethod
    def _expect_end(stop: tuple[str, int] | None, where: str) -> None:
        if stop is None or stop[0] != "end":
            raise TemplateError(f"{where}: missing {{{{end}}}}")


def _string_literal(text: str, where: str) -> str:
    text = text.strip()
    if text.startswith('"'):
        return str(json.loads(text))
    if text.startswith("`"):
        return text[1:-1]
    raise TemplateError(f"{where}: expected a quoted template name, got {text!r}")


def _parse_pipeline(source: str, where: str) -> _Pipeline:
    toks = _tokens(source, where)
    decl: tuple[str, ...] = ()
    assign = False
    # "$x :=", "$k, $v :=", "$x ="
    if toks and toks[0].kind == "var":
        if len(toks) > 1 and (toks[1].kind == "declare" or toks[1].value == "="):
            decl, assign, toks = (toks[0].value,), toks[1].value == "=", toks[2:]
        elif len(toks) > 3 and toks[1].value == "," and toks[2].kind == "var" and toks[3].kind == "declare":
            decl, toks = (toks[0].value, toks[2].value), toks[4:]
    pipe, rest = _pipeline_tokens(toks, where)
    if rest:
        raise TemplateError(f"{where}: unexpected {rest[0].value!r}")
    pipe.decl, pipe.assign = decl, assign
    return pipe


def _pipeline_tokens(toks: list[_Tok], where: str) -> tuple[_Pipeline, list[_Tok]]:
    commands: list[list[_Operand]] = []
    current: list[_Operand] = []
    while toks:
        tok = toks[0]
        if tok.value == ")":
            break
        toks = toks[1:]
        if tok.value == "|":
            if not current:
                raise TemplateError(f"{where}: empty command in pipeline")
            commands.append(current)
            current = []
            continue
        if tok.value == "(":
            inner, toks = _pipeline_tokens(toks, where)
            if not toks or toks[0].value != ")":
                raise TemplateError(f"{where}: unclosed (")
            toks = toks[1:]
            names: tuple[str, ...] = ()
            if toks and toks[0].kind == "field" and toks[0].adjacent:
                names = tuple(toks[0].value.split(".")[1:])
                toks = toks[1:]
            current.append(_Operand("paren", inner, names))
        elif tok.kind == "string":
            current.append(_Operand("lit", json.loads(tok.value)))
        elif tok.kind == "raw":
            current.append(_Operand("lit", tok.value[1:-1]))
        elif tok.kind == "number":
            current.append(_Operand("lit", float(tok.value) if "." in tok.value else int(tok.value)))
        elif tok.kind == "dot":
            current.append(_Operand("dot"))
        elif tok.kind == "field":
            current.append(_Operand("field", None, tuple(tok.value.split(".")[1:])))
        elif tok.kind == "var":
            var_name, *fields = tok.value.split(".")
            current.append(_Operand("var", var_name, tuple(fields)))
        elif tok.kind == "ident":
            literal = {"true": True, "false": False, "nil": None}
            if tok.value in literal:
                current.append(_Operand("lit", literal[tok.value]))
            else:
                current.append(_Operand("fn", tok.value))
        else:
            raise TemplateError(f"{where}: unexpected {tok.value!r}")
    if current:
        commands.append(current)
    if not commands:
        raise TemplateError(f"{where}: missing value")
    return _Pipeline((), False, commands), toks


# --- values and functions ---------------------------------------------------------------------------
def truth(value: Any) -> bool:
    """Go template truth: false, 0, nil and empty strings/collections are false."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0
    if isinstance(value, str | list | tuple | dict):
        return len(value) > 0
    return True


def go_print(value: Any) -> str:
    """``fmt.Sprint`` of the values templates print (nil prints as nothing, as Helm renders it)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_print(value[k])}" for k in sorted(value)) + "]"
    return str(value)


def to_yaml(value: Any) -> str:
    if value is None:
        return "null"
    return str(yaml.safe_dump(value, default_flow_style=False, sort_keys=True, width=1 << 16)).rstrip("\n")


def _indent(n: int, text: Any) -> str:
    pad = " " * int(n)
    return pad + go_print(text).replace("\n", "\n" + pad)


def _printf(fmt: str, *args: Any) -> str:
    out, i, arg = [], 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%" or i + 1 == len(fmt):
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1]
        i += 2
        if verb == "%":
            out.append("%")
            continue
        value = args[arg] if arg < len(args) else None
        arg += 1
        if verb in "sv":
            out.append(go_print(value))
        elif verb == "d":
            out.append(str(int(value if value is not None else 0)))
        elif verb == "q":
            out.append(json.dumps(go_print(value)))
        else:
            raise TemplateError(f"printf verb %{verb} is not supported")
    return "".join(out)


def _eq(a: Any, *others: Any) -> bool:
    return any(a == b for b in others)


def _default(default: Any, *given: Any) -> Any:
    value = given[0] if given else None
    return value if truth(value) else default


def _required(message: str, value: Any) -> Any:
    if value is None or value == "":
        raise TemplateError(message)
    return value


def _index(collection: Any, *keys: Any) -> Any:
    for key in keys:
        if collection is None:
            raise TemplateError("index of nil")
        if isinstance(collection, dict):
            collection = collection.get(key)
        else:
            collection = collection[int(key)]
    return collection


def _dict(*pairs: Any) -> dict[str, Any]:
    return {str(pairs[i]): pairs[i + 1] if i + 1 < len(pairs) else "" for i in range(0, len(pairs), 2)}


def _from_yaml(text: str) -> Any:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        return {"Error": str(err)}
    return data if data is not None else {}


FUNCTIONS: dict[str, Callable[..., Any]] = {
    # Go builtins
    "and": lambda *a: next((x for x in a if not truth(x)), a[-1]),
    "or": lambda *a: next((x for x in a if truth(x)), a[-1]),
    "not": lambda a: not truth(a),
    "eq": _eq,
    "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "len": lambda a: len(a),
    "index": _index,
    "print": lambda *a: "".join(go_print(x) for x in a),
    "printf": _printf,
    # sprig / Helm
    "default": _default,
    "required": _required,
    "empty": lambda a: not truth(a),
    "quote": lambda *a: " ".join(json.dumps(go_print(x)) for x in a if x is not None),
    "squote": lambda *a: " ".join(f"'{go_print(x)}'" for x in a if x is not None),
    "toYaml": to_yaml,
    "fromYaml": _from_yaml,
    "toJson": lambda a: json.dumps(a, separators=(",", ":"), sort_keys=True),
    "indent": _indent,
    "nindent": lambda n, text: "\n" + _indent(n, text),
    "replace": lambda old, new, s: go_print(s).replace(old, new),
    "trunc": lambda n, s: go_print(s)[: int(n)] if int(n) >= 0 else go_print(s)[int(n) :],
    "trimSuffix": lambda suffix, s: go_print(s).removesuffix(suffix),
    "trimPrefix": lambda prefix, s: go_print(s).removeprefix(prefix),
    "trim": lambda s: go_print(s).strip(),
    "upper": lambda s: go_print(s).upper(),
    "lower": lambda s: go_print(s).lower(),
    "contains": lambda sub, s: sub in go_print(s),
    "hasPrefix": lambda prefix, s: go_print(s).startswith(prefix),
    "hasSuffix": lambda suffix, s: go_print(s).endswith(suffix),
    "list": lambda *a: list(a),
    "dict": _dict,
    "hasKey": lambda d, k: isinstance(d, dict) and k in d,
    "compact": lambda items: [x for x in items if truth(x)],
    "join": lambda sep, items: sep.join(go_print(x) for x in items),
    "toString": go_print,
    "int": lambda a: int(float(a)) if a not in (None, "") else 0,
    "sha256sum": lambda s: hashlib.sha256(go_print(s).encode()).hexdigest(),
    "b64enc": lambda s: base64.b64encode(go_print(s).encode()).decode(),
    "ternary": lambda yes, no, cond: yes if truth(cond) else no,
    "coalesce": lambda *a: next((x for x in a if truth(x)), None),
}


# --- execution ---------------------------------------------------------------------------------------
class _Files:
    def __init__(self, root: Path) -> None:
        self.root = root

    def Get(self, name: str) -> str:  # Helm's method name
        path = self.root / name
        return path.read_text() if path.is_file() else ""


class _Engine:
    def __init__(self, defines: dict[str, list[_Node]]) -> None:
        self.defines = defines
        self.functions = dict(FUNCTIONS)
        self.functions["include"] = self._include
        self.depth = 0

    def _include(self, name: str, data: Any) -> str:
        return self.run_named(name, data)

    def run_named(self, name: str, data: Any) -> str:
        body = self.defines.get(name)
        if body is None:
            raise TemplateError(f"no template {name!r}")
        self.depth += 1
        if self.depth > 100:
            raise TemplateError(f"template {name!r}: recursion too deep")
        try:
            out: list[str] = []
            self.run(body, data, [{"$": data}], out)
            return "".join(out)
        finally:
            self.depth -= 1

    def run(self, nodes: list[_Node], dot: Any, scopes: list[dict[str, Any]], out: list[str]) -> None:
        for node in nodes:
            try:
                self._node(node, dot, scopes, out)
            except TemplateError as err:
                if node.where and not str(err).startswith(node.where):
                    raise TemplateError(f"{node.where}: {err}") from None
                raise

    def _node(self, node: _Node, dot: Any, scopes: list[dict[str, Any]], out: list[str]) -> None:
        if node.kind == "text":
            out.append(node.text)
        elif node.kind == "print":
            assert node.pipe is not None
            value = self.pipeline(node.pipe, dot, scopes)
            if not node.pipe.decl:
                out.append(go_print(value))
        elif node.kind in ("if", "with"):
            for pipe, body in node.branches:
                scope: dict[str, Any] = {}
                value = self.pipeline(pipe, dot, [*scopes, scope])
                if truth(value):
                    self.run(body, value if node.kind == "with" else dot, [*scopes, scope], out)
                    return
            self.run(node.else_body, dot, [*scopes, {}], out)
        elif node.kind == "range":
            assert node.pipe is not None
            pipe = _Pipeline((), False, node.pipe.commands)
            collection = self.pipeline(pipe, dot, scopes)
            if isinstance(collection, dict):
                items = [(k, collection[k]) for k in sorted(collection)]
            elif isinstance(collection, list | tuple):
                items = list(enumerate(collection))
            elif collection is None:
                items = []
            else:
                raise TemplateError(f"range can't iterate over {go_print(collection)}")
            if not items:
                self.run(node.else_body, dot, [*scopes, {}], out)
            for key, value in items:
                scope = {}
                if len(node.pipe.decl) == 1:
                    scope[node.pipe.decl[0]] = value
                elif len(node.pipe.decl) == 2:
                    scope[node.pipe.decl[0]], scope[node.pipe.decl[1]] = key, value
                self.run(node.body, value, [*scopes, scope], out)
        elif node.kind == "template":
            data = self.pipeline(node.pipe, dot, scopes) if node.pipe is not None else None
            out.append(self.run_named(node.name, data))

    def pipeline(self, pipe: _Pipeline, dot: Any, scopes: list[dict[str, Any]]) -> Any:
        value: Any = _NOTHING
        for command in pipe.commands:
            value = self._command(command, dot, scopes, value)
        if pipe.decl:
            name = pipe.decl[0]
            if pipe.assign:
                for scope in reversed(scopes):
                    if name in scope:
                        scope[name] = value
                        break
                else:
                    raise TemplateError(f"undefined variable {name}")
            else:
                scopes[-1][name] = value
        return value

    def _command(self, command: list[_Operand], dot: Any, scopes: list[dict[str, Any]], piped: Any) -> Any:
        head, args = command[0], command[1:]
        if head.kind == "fn":
            fn = self.functions.get(str(head.value))
            if fn is None:
                raise TemplateError(f'function "{head.value}" not defined')
            values = [self._operand(a, dot, scopes) for a in args]
            if piped is not _NOTHING:
                values.append(piped)
            try:
                return fn(*values)
            except TemplateError:
                raise
            except Exception as err:
                raise TemplateError(f"error calling {head.value}: {err}") from err
        if head.kind == "field" and (args or piped is not _NOTHING):
            target = self._fields(dot, head.names[:-1])
            method = getattr(target, head.names[-1], None)
            if not callable(method):
                raise TemplateError(f"{'.'.join(head.names)} is not a method but has arguments")
            values = [self._operand(a, dot, scopes) for a in args]
            if piped is not _NOTHING:
                values.append(piped)
            return method(*values)
        if args or piped is not _NOTHING:
            raise TemplateError("can't give argument to non-function")
        return self._operand(head, dot, scopes)

    def _operand(self, op: _Operand, dot: Any, scopes: list[dict[str, Any]]) -> Any:
        if op.kind == "lit":
            return op.value
        if op.kind == "dot":
            return dot
        if op.kind == "field":
            return self._fields(dot, op.names)
        if op.kind == "var":
            for scope in reversed(scopes):
                if op.value in scope:
                    return self._fields(scope[op.value], op.names)
            raise TemplateError(f"undefined variable {op.value}")
        if op.kind == "paren":
            return self._fields(self.pipeline(op.value, dot, scopes), op.names)
        if op.kind == "fn":
            return self._command([op], dot, scopes, _NOTHING)
        raise TemplateError(f"bad operand {op.kind}")

    @staticmethod
    def _fields(value: Any, names: tuple[str, ...]) -> Any:
        for name in names:
            if value is None:
                raise TemplateError(f"nil pointer evaluating interface {{}}.{name}")
            if isinstance(value, Mapping):
                value = value.get(name)
            elif hasattr(value, name):
                value = getattr(value, name)
            else:
                raise TemplateError(f"can't evaluate field {name} in type {type(value).__name__}")
        return value


_NOTHING = object()


# --- charts ------------------------------------------------------------------------------------------
def deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's values coalescing: maps merge recursively, anything else replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass
class Chart:
    root: Path

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(yaml.safe_load((self.root / "Chart.yaml").read_text()))

    @property
    def values(self) -> dict[str, Any]:
        return dict(yaml.safe_load((self.root / "values.yaml").read_text()) or {})

    def template_files(self) -> list[Path]:
        return sorted(p for p in (self.root / "templates").rglob("*") if p.is_file())

    def render(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        release: str = "koord",
        namespace: str = "default",
        kube_version: str = "v1.20.2",
    ) -> dict[str, str]:
        """Rendered text of every template file (partials ``_*`` and NOTES.txt excluded), by path."""
        meta = self.metadata
        merged = deep_merge(self.values, values or {})
        data = {
            "Values": merged,
            "Chart": {
                "Name": meta["name"],
                "Version": meta["version"],
                "AppVersion": meta.get("appVersion", ""),
            },
            "Release": {"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": True},
            "Capabilities": {"KubeVersion": {"Version": kube_version}},
            "Files": _Files(self.root),
        }
        defines: dict[str, list[_Node]] = {}
        parsed: dict[str, list[_Node]] = {}
        for path in self.template_files():
            rel = str(path.relative_to(self.root))
            parsed[rel] = _Parser(_lex(path.read_text(), rel), rel, defines).parse()
        engine = _Engine(defines)
        out: dict[str, str] = {}
        for rel, nodes in parsed.items():
            base = Path(rel).name
            if base.startswith("_") or base == "NOTES.txt":
                continue
            chunks: list[str] = []
            engine.run(nodes, data, [{"$": data}], chunks)
            out[rel] = "".join(chunks)
        return out


def render_chart(
    root: Path, values: Mapping[str, Any] | None = None, **kw: Any
) -> list[tuple[str, dict[str, Any]]]:
    """Every object the chart renders, as (template path, object), in ``helm template`` order of files."""
    objects: list[tuple[str, dict[str, Any]]] = []
    for rel, text in Chart(root).render(values, **kw).items():
        for doc in yaml.safe_load_all(text):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise TemplateError(f"{rel}: a rendered document is not a mapping: {doc!r}")
            objects.append((rel, doc))
    return objects
