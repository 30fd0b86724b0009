"""Write the import-linter contracts for the current layout and print the config file's path.

The contracts are derived from ``plugins/*/src/*``, ``libs/*/src/*`` and the framework's declared plugin API
(``koord_framework.public``), so a new plugin, library or public module is covered the moment it exists:
- the framework never imports a plugin or a family library;
- plugins never import each other;
- plugins and family libraries import only the public plugin API (every other framework module is private);
- family libraries never import a plugin;
- only the Kubernetes adapter (``koord_framework.cluster.kube``) imports the ``kubernetes`` client.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from koord_framework.public import private_modules  # noqa: E402  (after the path is set)


def plugin_packages() -> list[str]:
    return _packages("plugins")


def library_packages() -> list[str]:
    """Family libraries: ``libs/<name>`` distributions plugins of one family share (ADR 0005)."""
    return _packages("libs")


def _packages(where: str) -> list[str]:
    return [init.parent.name for init in sorted(ROOT.glob(f"{where}/*/src/*/__init__.py"))]


def render() -> str:
    plugins = plugin_packages()
    libs = library_packages()
    roots = ["koord_framework", *plugins, *libs]
    lines = ["[importlinter]", "root_packages ="]
    lines += [f"    {r}" for r in roots]
    lines += ["include_external_packages = True", ""]
    if plugins or libs:
        lines += [
            "[importlinter:contract:framework-never-imports-plugins]",
            "name = The framework never imports a plugin or a family library",
            "type = forbidden",
            "source_modules =",
            "    koord_framework",
            "forbidden_modules =",
            *[f"    {p}" for p in (*plugins, *libs)],
            "",
            "[importlinter:contract:plugins-import-only-the-public-api]",
            "name = Plugins and family libraries import only the public plugin API (koord_framework.public)",
            "type = forbidden",
            "source_modules =",
            *[f"    {p}" for p in (*plugins, *libs)],
            "forbidden_modules =",
            *[f"    {m}" for m in private_modules()],
            # A public module may use private ones: only what a plugin imports itself counts.
            "allow_indirect_imports = True",
            "",
        ]
    if libs and plugins:
        lines += [
            "[importlinter:contract:libraries-never-import-plugins]",
            "name = Family libraries never import a plugin",
            "type = forbidden",
            "source_modules =",
            *[f"    {lib}" for lib in libs],
            "forbidden_modules =",
            *[f"    {p}" for p in plugins],
            "",
        ]
    if len(plugins) > 1:
        lines += [
            "[importlinter:contract:plugins-independent]",
            "name = Plugins never import each other",
            "type = independence",
            "modules =",
            *[f"    {p}" for p in plugins],
            "",
        ]
    lines += [
        "[importlinter:contract:only-adapter-imports-kubernetes]",
        "name = Only the cluster adapter imports the kubernetes client",
        "type = forbidden",
        "source_modules =",
        *[f"    {r}" for r in roots],
        "forbidden_modules =",
        "    kubernetes",
        "ignore_imports =",
        "    koord_framework.cluster.kube -> kubernetes",
        "    koord_framework.cluster.kube.** -> kubernetes",
        "allow_indirect_imports = True",
        "unmatched_ignore_imports_alerting = none",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".venv" / "importlinter.ini"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render())
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
