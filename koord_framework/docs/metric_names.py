"""Which Prometheus metrics a source tree registers, read from the code without running it.

A README's Metrics section must name every metric its plugin registers; reading the names from the source
(rather than from a registry after instantiating the plugin) means the check needs no cluster, host or
profile, and finds metrics on code paths a test would not reach.

The scan parses every ``.py`` file and takes the calls of ``prometheus_client``'s ``Counter``, ``Gauge``,
``Histogram``, ``Summary``, ``Info`` and ``Enum`` (and of the ``*MetricFamily`` classes of custom
collectors), however they were imported. The name argument may be a string literal, a module- or
function-level constant, an f-string of those, or a ``+`` of those; ``namespace=`` and ``subsystem=`` are
applied as ``prometheus_client`` applies them. A name the scan cannot work out is reported as unresolved
rather than skipped, so a check built on it never passes by accident.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RegisteredMetric", "UnresolvedMetric", "exposed_names", "registered_metrics"]

_CONSTRUCTORS = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
    "Info": "info",
    "Enum": "stateset",
    "CounterMetricFamily": "counter",
    "GaugeMetricFamily": "gauge",
    "HistogramMetricFamily": "histogram",
    "SummaryMetricFamily": "summary",
    "InfoMetricFamily": "info",
    "StateSetMetricFamily": "stateset",
    "GaugeHistogramMetricFamily": "gaugehistogram",
}
_MODULES = ("prometheus_client", "prometheus_client.core", "prometheus_client.metrics")


@dataclass(frozen=True, order=True)
class RegisteredMetric:
    """A metric a source file registers: its exposed base name and where."""

    name: str
    """The name as ``prometheus_client`` keeps it: a counter's trailing ``_total`` is removed (it comes back
    on the exposed sample); see ``exposed_names``."""
    kind: str
    file: Path
    line: int


@dataclass(frozen=True, order=True)
class UnresolvedMetric:
    """A metric constructor call whose name the scan could not work out from the code."""

    kind: str
    file: Path
    line: int
    source: str


def exposed_names(metric: RegisteredMetric) -> tuple[str, ...]:
    """Every sample name a scrape shows for the metric (``foo_total`` for a counter ``foo``, ...)."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_count", "_sum", "_created"),
        "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
        "summary": ("_count", "_sum", "_created"),
        "info": ("_info",),
    }.get(metric.kind, ())
    return (metric.name, *(metric.name + s for s in suffixes))


def _statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a body and of its nested blocks (``if``, ``for``, ``with``, ``try``, ``match``),
    but not of nested functions or classes, which have scopes of their own."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                yield from _statements([child])
            elif isinstance(child, ast.ExceptHandler | ast.match_case):
                yield from _statements(child.body)


class _Scope:
    """String constants assigned in one module or function body (a name assigned twice is dropped)."""

    def __init__(self, body: Iterable[ast.stmt], outer: _Scope | None = None) -> None:
        self.outer = outer
        self.values: dict[str, str | None] = {}
        for stmt in _statements(body):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(stmt, ast.Assign):
                targets, value = list(stmt.targets), stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            for target in targets:
                if isinstance(target, ast.Name) and value is not None:
                    folded = _fold(value, self)
                    seen = target.id in self.values
                    self.values[target.id] = None if seen else folded

    def lookup(self, name: str) -> str | None:
        if name in self.values:
            return self.values[name]
        return self.outer.lookup(name) if self.outer is not None else None


def _fold(node: ast.expr, scope: _Scope | None) -> str | None:
    """The string value of a constant expression, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        # An f-string is known before run time when every placeholder is itself a plain constant.
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.conversion != -1 or value.format_spec is not None:
                    return None
                folded = _fold(value.value, scope)
            else:
                folded = _fold(value, scope)
            if folded is None:
                return None
            parts.append(folded)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _fold(node.left, scope), _fold(node.right, scope)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Name) and scope is not None:
        return scope.lookup(node.id)
    return None


def _constructor_names(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """Local names bound to metric classes, and local names bound to the ``prometheus_client`` modules."""
    classes: dict[str, str] = {}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in _MODULES:
            for alias in node.names:
                if alias.name in _CONSTRUCTORS:
                    classes[alias.asname or alias.name] = _CONSTRUCTORS[alias.name]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in _MODULES:
                    modules.add(alias.asname or alias.name)
    return classes, modules


def _kind_of_call(call: ast.Call, classes: dict[str, str], modules: set[str]) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return classes.get(func.id)
    if isinstance(func, ast.Attribute) and func.attr in _CONSTRUCTORS:
        base = ast.unparse(func.value)
        if base in modules:
            return _CONSTRUCTORS[func.attr]
    return None


def _full_name(call: ast.Call, kind: str, scope: _Scope) -> str | None:
    name_node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
    if name_node is None:
        return None
    name = _fold(name_node, scope)
    if name is None:
        return None
    prefix: list[str] = []
    for keyword in ("namespace", "subsystem"):
        node = next((k.value for k in call.keywords if k.arg == keyword), None)
        if node is not None:
            part = _fold(node, scope)
            if part is None:
                return None
            if part:
                prefix.append(part)
    full = "_".join([*prefix, name])
    if kind == "counter" and full.endswith("_total"):
        full = full[: -len("_total")]
    return full


def _scan_file(path: Path) -> tuple[list[RegisteredMetric], list[UnresolvedMetric]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    classes, modules = _constructor_names(tree)
    if not classes and not modules:
        return [], []
    found: list[RegisteredMetric] = []
    unresolved: list[UnresolvedMetric] = []
    module_scope = _Scope(tree.body)

    def visit(node: ast.AST, scope: _Scope) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, _Scope(child.body, scope))
                continue
            if isinstance(child, ast.Call):
                kind = _kind_of_call(child, classes, modules)
                if kind is not None:
                    name = _full_name(child, kind, scope)
                    if name is None:
                        unresolved.append(UnresolvedMetric(kind, path, child.lineno, ast.unparse(child)))
                    else:
                        found.append(RegisteredMetric(name, kind, path, child.lineno))
            visit(child, scope)

    visit(tree, module_scope)
    return found, unresolved


def registered_metrics(
    roots: Iterable[str | Path],
) -> tuple[list[RegisteredMetric], list[UnresolvedMetric]]:
    """Metrics registered by the ``.py`` files under ``roots`` (files or directories), sorted by name.

    Returns ``(found, unresolved)``; ``unresolved`` lists constructor calls whose name is not a constant.
    """
    found: list[RegisteredMetric] = []
    unresolved: list[UnresolvedMetric] = []
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            more, missing = _scan_file(path)
            found += more
            unresolved += missing
    return sorted(found), sorted(unresolved)
