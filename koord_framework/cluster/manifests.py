"""Manifest files in, manifest files out: loading, validating and dumping cluster objects.

``load_manifests`` reads files and folders (``*.yaml``, ``*.yml``, ``*.json``; folders recursively, in
sorted order so that a load is reproducible, skipping hidden files), multi-document YAML and ``List`` kinds
(``kind: List`` or a typed ``PodList``), and validates every object before returning any
(``koord_framework.cluster.manifest_checks``). The first problem found raises ``ManifestError`` naming the
file, the document's index in that file (0-based, empty documents counted, so it matches the ``---``
separators) and the field, e.g. ``pods.yaml (document 2): items[0].spec.containers[1].resources.requests
.cpu: invalid quantity 'x'``. The same object defined twice, in one file or across files, is an error too.

``dump_manifests`` writes a cluster's objects back, one ``<plural>.yaml`` per kind, in a form that
``load_manifests`` reads back to equal objects (``koord simulate --write-state``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koord_framework.cluster.kinds import KindInfo, installed_kinds
from koord_framework.cluster.manifest_checks import describe_type, validate_object
from koord_framework.cluster.port import ClusterPort
from koord_framework.cluster.yaml_io import dump_yaml_documents, json_document, yaml_documents
from koord_framework.errors import ManifestError

__all__ = [
    "MANIFEST_SUFFIXES",
    "LoadedDocument",
    "dump_manifests",
    "load_documents",
    "load_manifests",
    "parse_documents",
    "validate_object",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class LoadedDocument:
    """One validated object and where it came from."""

    file: str
    doc: int
    prefix: str
    """Path of the object inside its document: ``""``, or ``"items[3]."`` for a member of a List."""
    obj: dict[str, Any]


# --- file discovery -----------------------------------------------------------------------------------


def _manifest_files(paths: Sequence[str | Path]) -> list[Path]:
    files: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                (
                    p
                    for p in path.rglob("*")
                    if p.is_file()
                    and p.suffix.lower() in MANIFEST_SUFFIXES
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)
                ),
                key=lambda p: p.relative_to(path).as_posix(),
            )
        elif path.is_file():
            found = [path]
        else:
            raise ManifestError(str(path), None, "", "no such file or directory")
        for p in found:
            resolved = p.resolve()
            if resolved not in seen:
                seen.add(resolved)
                files.append(p)
    return files


def parse_documents(
    text: str,
    file: str = "<string>",
    *,
    json_text: bool = False,
    kinds: Mapping[str, KindInfo] | None = None,
) -> list[LoadedDocument]:
    """Parse and validate the documents of one file's text (YAML, or JSON with ``json_text``).

    ``kinds``: the kinds known (a cluster's ``KindRegistry``); default the built-in ones."""
    out: list[LoadedDocument] = []
    if json_text:
        docs: Iterator[tuple[int, Any]] = iter([(0, json_document(text, file))])
    else:
        docs = yaml_documents(text, file)
    for index, data in docs:
        if data is None:
            continue
        _expand(data, file, index, "", out, kinds if kinds is not None else installed_kinds())
    return out


def load_documents(
    paths: Sequence[str | Path], kinds: Mapping[str, KindInfo] | None = None
) -> list[LoadedDocument]:
    """Every object of ``paths``, validated, with its origin; duplicates across all files are an error."""
    out: list[LoadedDocument] = []
    for path in _manifest_files(paths):
        name = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ManifestError(name, None, "", f"not UTF-8 text: {err}") from None
        except OSError as err:
            raise ManifestError(name, None, "", f"cannot read: {err.strerror or err}") from None
        out.extend(parse_documents(text, name, json_text=path.suffix.lower() == ".json", kinds=kinds))
    _check_duplicates(out)
    return out


def load_manifests(
    paths: Sequence[str | Path], kinds: Mapping[str, KindInfo] | None = None
) -> list[dict[str, Any]]:
    """The validated objects of the manifest files and folders ``paths``, in file and document order."""
    return [d.obj for d in load_documents(paths, kinds)]


def _check_duplicates(docs: Sequence[LoadedDocument]) -> None:
    first: dict[tuple[str, str, str], LoadedDocument] = {}
    for d in docs:
        meta = d.obj["metadata"]
        key = (d.obj["kind"], str(meta.get("namespace") or ""), str(meta["name"]))
        prior = first.setdefault(key, d)
        if prior is not d:
            where = f"{key[1]}/{key[2]}" if key[1] else key[2]
            raise ManifestError(
                d.file,
                d.doc,
                d.prefix + "metadata.name",
                f"{key[0]} {where} is defined twice (first in {prior.file}, document {prior.doc})",
            )


def _expand(
    data: Any, file: str, doc: int, prefix: str, out: list[LoadedDocument], kinds: Mapping[str, KindInfo]
) -> None:
    """Append the object(s) of one document: a ``List`` contributes each of its items."""
    if not isinstance(data, dict):
        raise ManifestError(
            file, doc, prefix.rstrip("."), f"expected an object (mapping), got {describe_type(data)}"
        )
    kind = data.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and kind not in kinds:
        items = data.get("items")
        if items is None:
            items = []
        if not isinstance(items, list):
            raise ManifestError(file, doc, prefix + "items", f"expected a list, got {describe_type(items)}")
        # A typed list (PodList) may leave kind and apiVersion off its items: they are implied.
        item_kind = kind[: -len("List")] if kind != "List" else None
        for i, item in enumerate(items):
            item_prefix = f"{prefix}items[{i}]."
            if item_kind is not None and isinstance(item, dict):
                item = dict(item)
                item.setdefault("kind", item_kind)
                if isinstance(data.get("apiVersion"), str):
                    item.setdefault("apiVersion", data["apiVersion"])
            _expand(item, file, doc, item_prefix, out, kinds)
        return
    out.append(LoadedDocument(file, doc, prefix, validate_object(data, file, doc, prefix, kinds)))


# --- writing ------------------------------------------------------------------------------------------


def dump_manifests(cluster: ClusterPort, directory: str | Path) -> list[Path]:
    """Write every object of ``cluster`` under ``directory``, one multi-document ``<plural>.yaml`` per kind
    (``nodes.yaml``, ``pods.yaml``, ``nodemetrics.yaml``...), objects sorted by namespace and name.

    ``load_manifests(directory)`` gives the same objects back. Only files of kinds that have objects are
    written (and overwritten); give a directory of its own, since older files there are left alone.
    """
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for info in cluster.kinds.values():
        objs, _ = cluster.list(info.kind)
        if not objs:
            continue
        objs.sort(key=lambda o: (str(o["metadata"].get("namespace") or ""), str(o["metadata"]["name"])))
        path = out_dir / f"{info.plural}.yaml"
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(dump_yaml_documents(objs))
        written.append(path)
    return written
