"""The snapshot directory, written so that a run that fails never leaves one that looks complete.

Everything goes to ``DIR.partial`` first (marked by ``.koord-snapshot-partial`` inside, so that a later run
knows it may remove it); each kind to a hidden ``.<plural>.yaml.tmp`` renamed to ``<plural>.yaml`` when the
kind is complete (a kind skipped half-way leaves no file). The index ``.koord-snapshot.json`` (hidden: the
``--cluster`` loader skips it) is written last, then ``DIR.partial`` is renamed to ``DIR``. A directory named
``DIR`` is therefore always a finished snapshot; whether it is complete or partial (a kind forbidden) its
index says.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import IO, Any

from koord_framework.cluster.yaml_io import dump_yaml_documents
from koord_framework.errors import KoordError

__all__ = ["INDEX_FILE", "PARTIAL_MARKER", "KindFile", "SnapshotWriter"]

INDEX_FILE = ".koord-snapshot.json"
PARTIAL_MARKER = ".koord-snapshot-partial"
INDEX_FORMAT = 1


class KindFile:
    """One kind's manifest file being written: documents appended as pages arrive."""

    def __init__(self, directory: Path, plural: str) -> None:
        self.final = directory / f"{plural}.yaml"
        self.tmp = directory / f".{plural}.yaml.tmp"
        self._fh: IO[str] | None = self.tmp.open("w", encoding="utf-8")
        self.count = 0

    def write(self, objs: list[dict[str, Any]]) -> None:
        assert self._fh is not None
        for obj in objs:
            if self.count:
                self._fh.write("---\n")
            self._fh.writelines(dump_yaml_documents([obj]))
            self.count += 1

    def restart(self) -> None:
        """Drop what was written (the list is started again)."""
        assert self._fh is not None
        self._fh.seek(0)
        self._fh.truncate()
        self.count = 0

    def commit(self) -> Path | None:
        """Close; the file takes its final name when it holds objects (else it is removed)."""
        self._close()
        if self.count:
            os.replace(self.tmp, self.final)
            return self.final
        self.tmp.unlink(missing_ok=True)
        return None

    def discard(self) -> None:
        self._close()
        self.tmp.unlink(missing_ok=True)

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class SnapshotWriter:
    """Writes ``directory`` through ``directory.partial``; ``finish(index)`` makes it appear, ``abort()``
    removes the partial one."""

    def __init__(self, directory: str | Path, *, force: bool = False) -> None:
        self.final = Path(directory)
        self.partial = self.final.with_name(self.final.name + ".partial")
        if self.final.exists() and not force and (not self.final.is_dir() or any(self.final.iterdir())):
            raise KoordError(f"-o {self.final}: already exists (give --force to replace it)")
        if self.partial.exists():
            if not (self.partial / PARTIAL_MARKER).exists():
                raise KoordError(
                    f"{self.partial} exists and is not an unfinished snapshot of koord: move it away"
                )
            shutil.rmtree(self.partial)  # an earlier run that failed
        try:
            self.partial.mkdir(parents=True)
            (self.partial / PARTIAL_MARKER).write_text("koord snapshot in progress\n", encoding="utf-8")
        except OSError as err:
            raise KoordError(
                f"-o {self.final}: cannot create {self.partial}: {err.strerror or err}"
            ) from None

    def kind_file(self, plural: str) -> KindFile:
        return KindFile(self.partial, plural)

    def write_file(self, name: str, objs: list[dict[str, Any]]) -> Path:
        """A whole small file at once (the ConfigMaps)."""
        path = self.partial / name
        with path.open("w", encoding="utf-8") as fh:
            fh.writelines(dump_yaml_documents(objs))
        return path

    def finish(self, index: dict[str, Any]) -> Path:
        """Write the index, then give the directory its name (replacing an old one with ``force``)."""
        index = {"format": INDEX_FORMAT, **index}
        with (self.partial / INDEX_FILE).open("w", encoding="utf-8") as fh:
            json.dump(index, fh, indent=2, sort_keys=False)
            fh.write("\n")
        (self.partial / PARTIAL_MARKER).unlink()
        if self.final.exists():
            shutil.rmtree(self.final) if self.final.is_dir() else self.final.unlink()
        os.replace(self.partial, self.final)
        return self.final

    def abort(self) -> None:
        shutil.rmtree(self.partial, ignore_errors=True)
