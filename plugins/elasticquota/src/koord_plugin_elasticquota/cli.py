"""``koord quota``: look at the ElasticQuotas of a cluster described by manifests, offline.

    koord quota tree  --cluster PATH [--output table|json] [--no-scale-min]
    koord quota check --cluster PATH

``tree`` builds the quota trees the scheduler would (nodes give the cluster total, pods their requests and
used) and prints every quota under its parent with min, max, runtime (the share it may use now, lending
included), request and used. ``check`` validates the quota objects as the webhook will (min <= max, known
parents marked is-parent, no cycle, children's mins within the parent's, no pods on a parent) and prints one
line per problem.

Exit status: 0 fine, 1 ``check`` found problems, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import format_resource_list
from koord_framework.cluster.manifests import load_manifests
from koord_framework.errors import KoordError
from koord_plugin_elasticquota.args import ElasticQuotaArgs
from koord_plugin_elasticquota.manager import GroupQuotaManager
from koord_plugin_elasticquota.quota_object import ROOT_QUOTA_NAME
from koord_plugin_elasticquota.quota_set import QuotaSet
from koord_plugin_elasticquota.validation import validate_quotas

__all__ = ["build_quota_set", "register", "render_tree"]

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "quota",
        help="ElasticQuota trees of a cluster described by manifests: runtime shares, validation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="quota_command", metavar="SUBCOMMAND")
    tree = sub.add_parser("tree", help="print the quota trees with min, max, runtime, request and used")
    tree.add_argument(
        "--cluster", action="append", required=True, metavar="PATH", help="manifest file or folder"
    )
    tree.add_argument("--output", "-o", choices=("table", "json"), default="table")
    tree.add_argument("--no-scale-min", action="store_true", help="as enableMinQuotaScale: false")
    tree.set_defaults(func=run_tree)
    check = sub.add_parser("check", help="validate the ElasticQuota objects as the webhook would")
    check.add_argument(
        "--cluster", action="append", required=True, metavar="PATH", help="manifest file or folder"
    )
    check.set_defaults(func=run_check)

    def usage(_args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return EXIT_USAGE

    parser.set_defaults(func=usage)


def _load(paths: list[str]) -> list[dict[str, Any]] | None:
    try:
        return load_manifests(paths)
    except (KoordError, OSError) as exc:
        print(f"koord quota: error: {exc}", file=sys.stderr)
        return None


def build_quota_set(objects: list[dict[str, Any]], *, scale_min: bool = True) -> QuotaSet:
    """The quota trees the scheduler would build from these objects (default ElasticQuotaArgs)."""
    args = ElasticQuotaArgs(enable_min_quota_scale=scale_min)
    quotas = QuotaSet(
        scale_min_enabled=scale_min, system_max=args.system_max(), default_max=args.default_max()
    )
    for obj in objects:
        if obj.get("kind") == "Node":
            quotas.on_node_add(obj)
    quotas.replace_quotas([o for o in objects if o.get("kind") == "ElasticQuota"])
    for obj in objects:
        if obj.get("kind") == "Pod":
            quotas.on_pod_add(PodInfo.from_manifest(obj))
    return quotas


def _resources(d: dict[str, int]) -> str:
    if not d:
        return "-"
    return ",".join(f"{k}:{v}" for k, v in sorted(format_resource_list(d).items()))


def _walk(
    mgr: GroupQuotaManager,
    summaries: dict[str, dict[str, Any]],
    name: str,
    depth: int,
    seen: set[str],
    lines: list[str],
) -> None:
    for child in mgr.children(name):
        if child in seen:
            continue  # a cycle: print each quota once
        seen.add(child)
        s = summaries.get(child)
        if s is None:
            continue
        indent = "  " * depth
        kind = "parent" if s["isParent"] else "leaf"
        lines.append(f"{indent}- {child} ({kind}{'' if s['allowLentResource'] else ', does not lend'})")
        for field in ("min", "max", "runtime", "request", "used"):
            lines.append(f"{indent}    {field + ':':<9}{_resources(s[field])}")
        _walk(mgr, summaries, child, depth + 1, seen, lines)


def render_tree(quotas: QuotaSet) -> str:
    summaries = quotas.summaries()
    lines: list[str] = []
    for mgr in quotas.managers():
        title = f"tree {mgr.tree_id!r}" if mgr.tree_id else "default tree"
        lines.append(f"{title}: cluster total {_resources(mgr.refresh_runtime(ROOT_QUOTA_NAME) or {})}")

        _walk(mgr, summaries, ROOT_QUOTA_NAME, 0, set(), lines)
        if mgr.tree_id == "":
            for name in ("koordinator-system-quota", "koordinator-default-quota"):
                s = summaries.get(name)
                if s is not None:
                    lines.append(
                        f"- {name} (built-in): used {_resources(s['used'])},"
                        f" request {_resources(s['request'])}"
                    )
    for name, err in sorted(quotas.errors.items()):
        lines.append(f"ignored {name}: {err}")
    return "\n".join(lines) + "\n"


def run_tree(args: argparse.Namespace) -> int:
    objects = _load(args.cluster)
    if objects is None:
        return EXIT_USAGE
    quotas = build_quota_set(objects, scale_min=not args.no_scale_min)
    if args.output == "json":
        out = {
            name: {k: (format_resource_list(v) if isinstance(v, dict) else v) for k, v in s.items()}
            for name, s in sorted(quotas.summaries().items())
        }
        json.dump(out, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_tree(quotas))
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    objects = _load(args.cluster)
    if objects is None:
        return EXIT_USAGE
    quota_objs = [o for o in objects if o.get("kind") == "ElasticQuota"]
    problems = validate_quotas(quota_objs, [o for o in objects if o.get("kind") == "Pod"])
    for problem in problems:
        print(problem)
    print(f"{len(quota_objs)} ElasticQuota(s), {len(problems)} problem(s)", file=sys.stderr)
    return EXIT_PROBLEM if problems else EXIT_OK
