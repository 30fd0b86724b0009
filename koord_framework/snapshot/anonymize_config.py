"""``--anonymize`` for the components' ConfigMaps: the names in them that refer to anonymized objects.

The three ConfigMaps (``koord-scheduler-config``, ``koord-descheduler-config``, ``slo-controller-config``)
are configuration, so they are kept except where they name what the rest of the snapshot hashes; those
names go through the same ``Anonymizer.word`` / ``label_value`` so that they still match:

* label selectors (``nodeSelector``, ``labelSelector``, ``podSelector``, ``namespaceSelector``,
  ``selector``, ``reservationSelector``, node-affinity terms and ``preference``): their values as the
  labels they select are rewritten (values of Koordinator's own keys stay); a selector written as a string
  (the descheduler's ``nodeSelector: "pool=a,zone in (b,c)"``) is rewritten requirement by requirement;
* namespace names: ``namespaces`` lists, ``include`` / ``exclude`` of ``namespaces`` and
  ``evictableNamespaces``, ``quotaGroupNamespace``;
* PriorityClass names: ``priorityThreshold.name``, ``priorityClassName``;
* the ``name`` of ``slo-controller-config``'s node strategies (``nodeConfigs`` / ``nodeStrategies``) and
  of LowNodeLoad's ``nodePools``: it names no object, but it is the cluster owner's word for a node pool.

Everything else (plugin names, thresholds, weights, scheduler and profile names, lease names, keys) is
kept. A data value that is not the YAML/JSON document it should be is kept verbatim, and one that has no
such name in it keeps its text, comments and layout; a rewritten one is written back as plain YAML/JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from koord_framework.snapshot.anonymize import Anonymizer

__all__ = ["anonymize_config_map", "rewrite_selector_string"]

_SELECTOR_KEYS = frozenset(
    {"nodeSelector", "labelSelector", "podSelector", "namespaceSelector", "selector", "reservationSelector"}
)
_NAMESPACE_SETS = frozenset({"namespaces", "evictableNamespaces"})
_NODE_POOL_LISTS = frozenset({"nodeConfigs", "nodeStrategies", "nodePools"})
_YAML_CONFIGS = frozenset({"koord-scheduler-config", "koord-descheduler-config"})
_JSON_CONFIGS = frozenset({"slo-controller-config"})

_REQUIREMENT = re.compile(
    r"^\s*(?P<key>!?\s*[^\s=!,()]+)\s*"
    r"(?:(?P<op>==|!=|=)\s*(?P<value>[^\s,()]*)|\s(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def anonymize_config_map(anonymizer: Anonymizer, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (a components' ConfigMap) with the names in its data rewritten, in place; other ConfigMaps
    are left as they are."""
    name = (obj.get("metadata") or {}).get("name")
    data = obj.get("data")
    if not isinstance(data, dict) or name not in _YAML_CONFIGS | _JSON_CONFIGS:
        return obj
    walker = _ConfigWalker(anonymizer)
    for key, text in data.items():
        if isinstance(text, str):
            data[key] = walker.text(text, json_form=name in _JSON_CONFIGS)
    return obj


def rewrite_selector_string(text: str, value: Callable[[str, str], str]) -> str:
    """A label selector in its string form (``a=b,c!=d,e in (f,g),!h``) with each value replaced by
    ``value(key, v)``. Raises ``ValueError`` for a requirement it cannot read."""
    out = []
    for part in _requirements(text):
        found = _REQUIREMENT.match(part)
        if found is None:
            raise ValueError(f"cannot read label selector requirement {part!r}")
        key = found["key"].replace(" ", "")
        plain = key.lstrip("!")
        if found["op"] is not None:
            out.append(f"{key}{found['op']}{value(plain, found['value'])}")
        elif found["set"] is not None:
            values = [v.strip() for v in found["values"].split(",") if v.strip()]
            out.append(f"{key} {found['set']} ({','.join(value(plain, v) for v in values)})")
        else:
            out.append(key)
    return ",".join(out)


def _requirements(text: str) -> list[str]:
    """Split on the commas that are not inside ``( )``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


class _ConfigWalker:
    def __init__(self, anonymizer: Anonymizer) -> None:
        self.a = anonymizer

    def text(self, text: str, *, json_form: bool) -> str:
        try:
            doc = json.loads(text) if json_form else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError):
            return text  # not what the component reads either: nothing to match it against
        try:
            rewritten = self.walk(doc)
        except ValueError:
            return text
        if rewritten == doc:
            return text
        if json_form:
            return json.dumps(rewritten, indent=2)
        return yaml.safe_dump(rewritten, sort_keys=False)

    def walk(self, data: Any, parent: str = "") -> Any:
        if isinstance(data, list):
            return [self.walk(item, parent) for item in data]
        if not isinstance(data, dict):
            return data
        out = {}
        for key, value in data.items():
            out[key] = self._field(str(key), value, parent)
        return out

    def _field(self, key: str, value: Any, parent: str) -> Any:
        a = self.a
        if key in _SELECTOR_KEYS or key == "preference":
            if isinstance(value, str):
                return rewrite_selector_string(value, a.label_value) if value else value
            return a.selector(value)
        if key == "nodeSelectorTerms" and isinstance(value, list):
            return [a.selector(term) for term in value]
        if isinstance(value, list) and (
            key == "namespaces" or (key in ("include", "exclude") and parent in _NAMESPACE_SETS)
        ):
            return [a.word(v) if isinstance(v, str) else v for v in value]
        if isinstance(value, str) and (
            key in ("quotaGroupNamespace", "priorityClassName")
            or (key == "name" and parent == "priorityThreshold")
            or (key == "name" and parent in _NODE_POOL_LISTS)
        ):
            return a.word(value)
        return self.walk(value, key)
