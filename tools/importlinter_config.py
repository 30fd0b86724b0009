"""Write the import-linter contracts for the current layout and print the config file's path.

The contracts are derived from ``plugins/*/src/*`` so a new plugin is covered the moment it exists:
- the framework never imports a plugin;
- plugins never import each other;
- only the Kubernetes adapter (``koord_framework.cluster.kube``) imports the ``kubernetes`` client.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def plugin_packages() -> list[str]:
    found = []
    for init in sorted(ROOT.glob("plugins/*/src/*/__init__.py")):
        found.append(init.parent.name)
    return found


def render() -> str:
    plugins = plugin_packages()
    roots = ["koord_framework", *plugins]
    lines = ["[importlinter]", "root_packages ="]
    lines += [f"    {r}" for r in roots]
    lines += ["include_external_packages = True", ""]
    if plugins:
        lines += [
            "[importlinter:contract:framework-never-imports-plugins]",
            "name = The framework never imports a plugin",
            "type = forbidden",
            "source_modules =",
            "    koord_framework",
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
