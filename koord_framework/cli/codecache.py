"""``python -m koord_framework.cli.codecache``: write the start-up table every koord process reads
(``koord_framework.codecache``: compiled dataclass methods and annotations, attribute docstrings). Run
after installing or upgrading koord distributions, as ``compileall`` is: ``make install`` and the image do.
"""

from __future__ import annotations

import argparse
import sys

from koord_framework import codecache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m koord_framework.cli.codecache",
        description="Write the table of compiled code and attribute docstrings that shortens every koord "
        "start-up (run after installing or upgrading koord distributions, like compileall).",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    args = parser.parse_args(argv)
    try:
        entries, failed = codecache.build()
    except (OSError, RuntimeError) as err:
        print(f"koord codecache: {err}", file=sys.stderr)
        return 1
    if not args.quiet:
        modules = codecache.stats()["documented_modules"]
        print(f"{codecache.cache_path()}: {entries} compiled entries, docstrings of {modules} modules")
        if failed:
            print(f"not imported (what they make is derived at run time): {', '.join(failed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
