"""``koord snapshot``: a live cluster dumped, page by page, into manifests every ``--cluster`` command reads.

``kinds`` names what is dumped, ``clean`` strips what the API server manages, ``anonymize`` hashes what
identifies people and things, ``writer`` writes the directory atomically, ``source`` lists a real API server
in pages and ``run`` puts them together with progress on stderr. See docs/snapshot.md.
"""

from koord_framework.snapshot.anonymize import Anonymizer
from koord_framework.snapshot.clean import clean_object
from koord_framework.snapshot.kinds import CONFIG_MAPS, SNAPSHOT_KINDS
from koord_framework.snapshot.run import SnapshotOptions, SnapshotResult, take_snapshot
from koord_framework.snapshot.writer import INDEX_FILE, SnapshotWriter

__all__ = [
    "CONFIG_MAPS",
    "INDEX_FILE",
    "SNAPSHOT_KINDS",
    "Anonymizer",
    "SnapshotOptions",
    "SnapshotResult",
    "SnapshotWriter",
    "clean_object",
    "take_snapshot",
]
