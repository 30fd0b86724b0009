"""CRD kinds as a registration seam (ADR 0004): a distribution contributes a kind through the ``koord.kinds``
entry-point group, every cluster gathers its own registry, and manifests, informers and the CRD generator
read kinds from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from koord_framework.cluster.clock import VirtualClock
from koord_framework.cluster.informer import SharedInformer
from koord_framework.cluster.kinds import (
    KIND_DISTRIBUTIONS,
    KINDS,
    KindInfo,
    KindProblem,
    KindRegistry,
    PrinterColumn,
)
from koord_framework.cluster.manifests import dump_manifests, load_manifests
from koord_framework.cluster.memory import MemoryCluster
from koord_framework.errors import ManifestError
from koord_framework.templates import render_plugin

ROOT = Path(__file__).resolve().parents[2]


def _check_widget(obj: Mapping[str, Any]) -> None:
    size = (obj.get("spec") or {}).get("size")
    if not isinstance(size, int) or size < 1:
        raise KindProblem("spec.size", f"must be a positive integer, got {size!r}")


WIDGET = KindInfo(
    "Widget",
    "example.dev",
    "v1alpha1",
    "widgets",
    True,
    validator=_check_widget,
    short_names=("wdg",),
    printer_columns=(PrinterColumn("Size", ".spec.size", "integer"),),
)


def _widget(name: str, size: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.dev/v1alpha1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"size": size},
    }


def test_a_cluster_serves_the_kinds_of_its_own_registry(tmp_path: Path) -> None:
    registry = KindRegistry.builtin().with_kinds([WIDGET])
    cluster = MemoryCluster(VirtualClock(), kinds=registry)
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(_widget("w1", 3)))
    assert cluster.load([tmp_path]) == 1
    assert cluster.get("Widget", "w1", "apps")["spec"]["size"] == 3
    informer = SharedInformer(cluster)
    seen: list[str] = []
    informer.add_handler("Widget", lambda o: seen.append(o["metadata"]["name"]))
    cluster.create(_widget("w2", 1))
    assert seen == ["w1", "w2"]
    out = tmp_path / "state"
    assert out / "widgets.yaml" in dump_manifests(cluster, out)
    # Another cluster in the same process knows nothing of it: there is no process-wide registry.
    other = MemoryCluster(VirtualClock(), kinds=KindRegistry.builtin())
    with pytest.raises(ManifestError, match="unknown kind 'Widget'"):
        other.load([tmp_path / "w.yaml"])
    with pytest.raises(ValueError, match="unknown kind 'Widget'"):
        SharedInformer(other).list("Widget")


def test_the_kind_validator_names_file_document_and_field(tmp_path: Path) -> None:
    registry = KindRegistry.builtin().with_kinds([WIDGET])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all([_widget("ok", 1), {"kind": "List", "items": [_widget("bad", 0)]}]))
    with pytest.raises(ManifestError) as err:
        load_manifests([path], registry)
    assert str(err.value) == f"{path} (document 1): items[0].spec.size: must be a positive integer, got 0"
    wrong_version = dict(_widget("v", 1), apiVersion="example.dev/v2")
    path.write_text(yaml.safe_dump(wrong_version))
    with pytest.raises(ManifestError, match=r"Widget is not served as 'example\.dev/v2'"):
        load_manifests([path], registry)


def test_koordinator_kinds_come_from_their_plugins(tmp_path: Path) -> None:
    path = tmp_path / "pg.yaml"
    pg = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "spec": {"minMember": "three"},
    }
    path.write_text(yaml.safe_dump(pg))
    messages = []
    for kinds in (None, KindRegistry.discover()):
        with pytest.raises(ManifestError) as err:
            load_manifests([path], kinds)
        messages.append(str(err.value))
    assert len(set(messages)) == 1
    assert messages[0].endswith("pg.yaml (document 0): spec.minMember: expected an integer, got string")
    # Without the distribution that contributes it, the kind is refused naming what to install.
    with pytest.raises(
        ManifestError, match=r"kind: unknown kind 'PodGroup'.*install koord-plugin-coscheduling"
    ):
        load_manifests([path], KindRegistry.builtin())
    builtin, installed = KindRegistry.builtin(), KindRegistry.discover()
    for name, dist in KIND_DISTRIBUTIONS.items():
        assert name not in builtin and name not in KINDS
        assert installed[name].validator is not None, dist
    for name in ("NodeMetric", "NodeResourceTopology", "PodMigrationJob"):
        assert builtin[name].validator is not None


def test_conflicting_contributions_are_refused() -> None:
    clash = KindInfo("NodeMetric", "example.dev", "v1", "nodemetrics", False)
    with pytest.raises(ValueError, match="NodeMetric is contributed twice"):
        KindRegistry.builtin().with_kinds([clash])
    with pytest.raises(TypeError, match="not a KindInfo"):
        KindRegistry(["Widget"])  # type: ignore[list-item]


def test_contributed_kinds_are_loaded_only_when_needed() -> None:
    calls: list[int] = []

    def contributed() -> list[KindInfo]:
        calls.append(1)
        return [WIDGET]

    registry = KindRegistry(KINDS.values(), contributed=contributed)
    assert registry["Pod"].plural == "pods"
    assert "Node" in registry
    assert calls == []
    assert registry["Widget"] is WIDGET
    assert "Widget" in registry and calls == [1]


def test_the_crd_generator_writes_a_contributed_kind() -> None:
    sys.path.insert(0, str(ROOT / "configs" / "crds"))
    try:
        import generate
    finally:
        sys.path.remove(str(ROOT / "configs" / "crds"))
    registry = KindRegistry.builtin().with_kinds([WIDGET])
    files = generate.render(registry)
    crd = yaml.safe_load(files[generate.CRD_DIR / "example.dev_widgets.yaml"].split("\n", 2)[2])
    assert crd["metadata"]["name"] == "widgets.example.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"]["shortNames"] == ["wdg"]
    assert crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["jsonPath"] == ".spec.size"
    # The framework's own kinds are written from the same registrations, unchanged.
    assert generate.main(["--check"]) == 0


PIP_INSTALL = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]

KINDS_MODULE = '''"""The kind this distribution contributes (ADR 0004): a cluster-scoped NodeLabelPolicy."""

from collections.abc import Mapping
from typing import Any

from koord_framework.cluster.kinds import KindInfo, KindProblem


def check(obj: Mapping[str, Any]) -> None:
    key = (obj.get("spec") or {}).get("labelKey")
    if not isinstance(key, str) or not key:
        raise KindProblem("spec.labelKey", f"must be a non-empty string, got {key!r}")


KINDS = [KindInfo("NodeLabelPolicy", "example.dev", "v1alpha1", "nodelabelpolicies", False, validator=check)]
'''


@pytest.mark.slow
def test_a_distribution_outside_the_repo_contributes_a_kind_koord_simulate_loads(tmp_path: Path) -> None:
    # The template, rendered outside the repository, gains a kind the way ADR 0004 tells an author to: a
    # module with KindInfo objects and one entry point. The framework is not touched.
    plugin_dir = render_plugin("NodeLabelPreference", tmp_path / "src")
    package = plugin_dir / "src" / "koord_plugin_nodelabelpreference"
    (package / "kinds.py").write_text(KINDS_MODULE)
    pyproject = plugin_dir / "pyproject.toml"
    entry_point = 'NodeLabelPolicy = "koord_plugin_nodelabelpreference.kinds:KINDS"'
    pyproject.write_text(pyproject.read_text() + f'\n[project.entry-points."koord.kinds"]\n{entry_point}\n')
    target = tmp_path / "site"
    subprocess.run(
        [*PIP_INSTALL, "--target", str(target), str(plugin_dir)],
        check=True,
        capture_output=True,
    )
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    # The base example (nodes, metrics, pods) and the NUMA nodes its LSR pods need: every pod of it fits, so
    # exit 0 means the run went well. The plugins' other example files add pods that cannot fit by design.
    example = ROOT / "configs" / "examples" / "cluster"
    for src in [*sorted(example.glob("[0-9]*.yaml")), example / "numa-nodes.yaml"]:
        (cluster / src.name).write_text(src.read_text())
    policy = {
        "apiVersion": "example.dev/v1alpha1",
        "kind": "NodeLabelPolicy",
        "metadata": {"name": "pools"},
        "spec": {"labelKey": "node-pool"},
    }
    (cluster / "policy.yaml").write_text(yaml.safe_dump(policy))
    env = dict(os.environ, PYTHONPATH=str(target))
    koord = [sys.executable, "-c", "import sys; from koord_framework.cli.main import main; sys.exit(main())"]
    state = tmp_path / "state"
    argv = ["simulate", "--cluster", str(cluster), "--now", "2024-01-01T00:00:00Z", "--output", "json"]
    run = subprocess.run(
        [*koord, *argv, "--write-state", str(state)], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["summary"]["scheduled"] > 0
    written = yaml.safe_load((state / "nodelabelpolicies.yaml").read_text())
    assert written["spec"] == {"labelKey": "node-pool"}
    # Its validator runs as the manifests load: a bad object is refused, naming file and field.
    policy["spec"] = {"labelKey": ""}
    (cluster / "policy.yaml").write_text(yaml.safe_dump(policy))
    run = subprocess.run([*koord, *argv], env=env, cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 2
    assert "policy.yaml (document 0): spec.labelKey: must be a non-empty string, got ''" in run.stderr
    # Without the distribution the kind is unknown.
    run = subprocess.run([*koord, *argv], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 2
    assert "unknown kind 'NodeLabelPolicy'" in run.stderr
