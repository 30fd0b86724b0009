"""Field checks for the validator of a contributed kind (ADR 0004): the same strict checks the framework's
manifest loader applies to its own kinds, raising ``KindProblem`` with the field's full path (the loader
adds the file and document).

A validator makes one ``FieldChecks`` per object and calls it for every field the plugin reads::

    def check(obj):
        c = FieldChecks()
        spec = c.mapping(obj.get("spec"), "spec")
        c.integer(spec.get("minMember"), "spec.minMember", minimum=0)
"""

from __future__ import annotations

from typing import Any

from koord_framework.cluster.kinds import KindProblem
from koord_framework.cluster.manifest_checks import _DNS1123_SUBDOMAIN, _check_pod_spec, _Checker

__all__ = ["FieldChecks", "check_pod_template", "check_subdomain_name"]


class FieldChecks(_Checker):
    """``mapping``, ``items``, ``string``, ``strings``, ``integer``, ``boolean``, ``string_map``, ``time``,
    ``duration``, ``quantity``, ``resources`` (a ResourceList, returned parsed), ``int_or_percent``,
    ``selector`` and ``resource_map``: each checks one field and raises ``KindProblem(field, message)``."""

    def __init__(self) -> None:
        super().__init__("", None, "")

    def fail(self, path: str, message: str) -> KindProblem:
        return KindProblem(path, message)


def check_pod_template(c: FieldChecks, template: Any, path: str, *, spec_required: bool = False) -> None:
    """A PodTemplateSpec at ``path`` (its labels, annotations and pod spec, as a Pod's are checked)."""
    tmpl = c.mapping(template, path, required=spec_required)
    meta = c.mapping(tmpl.get("metadata"), f"{path}.metadata")
    c.string_map(meta.get("labels"), f"{path}.metadata.labels")
    c.string_map(meta.get("annotations"), f"{path}.metadata.annotations")
    if spec_required or tmpl.get("spec") is not None:
        _check_pod_spec(c, c.mapping(tmpl.get("spec"), f"{path}.spec", required=True), f"{path}.spec")


def check_subdomain_name(c: FieldChecks, obj: Any) -> None:
    """``metadata.name`` is a DNS-1123 subdomain (a kind named after its node, as Device is)."""
    name = c.string(c.mapping(obj.get("metadata"), "metadata").get("name"), "metadata.name", required=True)
    if name is not None and (len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name)):
        raise c.fail(
            "metadata.name",
            f"{name!r} is not a valid DNS-1123 subdomain (lower-case letters, digits, '-' and '.', "
            "starting and ending with a letter or digit, at most 253 characters)",
        )
