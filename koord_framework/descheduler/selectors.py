"""Label selectors written as strings (``labels.Parse``), as the descheduler's ``nodeSelector`` args are.

``DefaultEvictorArgs.nodeSelector`` and ``MigrationControllerArgs.nodeSelector`` are selector strings such as
``"node-role.kubernetes.io/worker,zone in (a,b),!unschedulable"``; Kubernetes parses them with
``k8s.io/apimachinery/pkg/labels.Parse``. The grammar, comma-separated requirements:

* ``key`` (exists), ``!key`` (does not exist)
* ``key=value``, ``key==value``, ``key!=value`` (a value may be empty)
* ``key in (v1,v2)``, ``key notin (v1,v2)``
* ``key>5``, ``key<5`` (integers)

An empty string selects everything. The requirements themselves are ``koord_framework.api.selectors``'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache

from koord_framework.api.selectors import EVERYTHING, LabelSelector, Operator, Requirement, SelectorError

_TOKEN = re.compile(r"\s*(?:(?P<op>==|!=|=|>|<|!|\(|\)|,)|(?P<word>[^\s=!<>(),]+))")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:  # pragma: no cover - the pattern matches any non-blank character
            raise SelectorError("", f"unable to parse selector {text!r} at position {pos}")
        out.append(m.group("op") or m.group("word"))
        pos = m.end()
    return out


@lru_cache(maxsize=256)
def parse_selector(text: str) -> LabelSelector:
    """``labels.Parse``; raises ``SelectorError`` with Kubernetes' kind of message."""
    toks = _tokens(text)
    if not toks:
        return EVERYTHING
    reqs: list[Requirement] = []
    i = 0

    def expect_value() -> str:
        nonlocal i
        if i < len(toks) and toks[i] not in (",", "(", ")", "=", "==", "!=", "!", ">", "<"):
            i += 1
            return toks[i - 1]
        return ""

    while i < len(toks):
        tok = toks[i]
        if tok == "!":
            i += 1
            if i >= len(toks) or toks[i] in (",", "(", ")"):
                raise SelectorError("", f"unable to parse requirement: missing key after '!' in {text!r}")
            reqs.append(Requirement.new(toks[i], "DoesNotExist"))
            i += 1
        else:
            if tok in (",", "(", ")", "=", "==", "!=", ">", "<"):
                raise SelectorError(
                    "", f"unable to parse requirement: found {tok!r}, expected a key in {text!r}"
                )
            key = tok
            i += 1
            if i >= len(toks) or toks[i] == ",":
                reqs.append(Requirement.new(key, "Exists"))
            else:
                op = toks[i]
                i += 1
                if op in ("=", "=="):
                    reqs.append(Requirement.new(key, "Equals", [expect_value()]))
                elif op == "!=":
                    reqs.append(Requirement.new(key, "NotEquals", [expect_value()]))
                elif op in (">", "<"):
                    number_op: Operator = "Gt" if op == ">" else "Lt"
                    reqs.append(Requirement.new(key, number_op, [expect_value()]))
                elif op in ("in", "notin"):
                    if i >= len(toks) or toks[i] != "(":
                        raise SelectorError(
                            "", f"found {toks[i] if i < len(toks) else 'end'!r}, expected '(' in {text!r}"
                        )
                    i += 1
                    values: list[str] = []
                    while True:
                        values.append(expect_value())
                        if i >= len(toks):
                            raise SelectorError("", f"found end of string, expected ')' in {text!r}")
                        if toks[i] == ")":
                            i += 1
                            break
                        if toks[i] != ",":
                            raise SelectorError("", f"found {toks[i]!r}, expected ',' or ')' in {text!r}")
                        i += 1
                    reqs.append(Requirement.new(key, "In" if op == "in" else "NotIn", values))
                else:
                    raise SelectorError("", f"found {op!r}, expected an operator in {text!r}")
        if i < len(toks):
            if toks[i] != ",":
                raise SelectorError("", f"found {toks[i]!r}, expected ',' in {text!r}")
            i += 1
            if i >= len(toks):
                raise SelectorError("", f"found end of string, expected a requirement in {text!r}")
    return LabelSelector(tuple(reqs))


def parse_selector_string(text: str) -> Callable[[Mapping[str, str]], bool]:
    """A predicate over label maps for a selector string."""
    return parse_selector(text or "").matches
