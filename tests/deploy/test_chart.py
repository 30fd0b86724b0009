"""The Helm chart (configs/helm/koord) and the CRDs (configs/crds), rendered and validated without helm."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from koord_framework.cluster.kinds import installed_kinds
from koord_framework.config.loader import load_text

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "configs" / "helm" / "koord"
NAMESPACED = {
    "ServiceAccount",
    "ConfigMap",
    "Secret",
    "Deployment",
    "DaemonSet",
    "Service",
    "Role",
    "RoleBinding",
}
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _load(name: str) -> ModuleType:
    # --import-mode=importlib: sibling modules are loaded by path.
    key = f"koord_deploy_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, Path(__file__).with_name(f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


helm = _load("helm_render")


def render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [obj for _, obj in helm.render_chart(CHART, values)]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} rendered"
    return matches[0]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    [main] = workload["spec"]["template"]["spec"]["containers"]
    assert isinstance(main, dict)
    return main


# --- structure ---------------------------------------------------------------------------------------
def test_every_object_is_well_formed() -> None:
    objects = render()
    assert len(objects) >= 20
    seen = set()
    for obj in objects:
        where = f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"
        assert isinstance(obj.get("apiVersion"), str) and obj["apiVersion"], where
        assert isinstance(obj.get("kind"), str) and obj["kind"], where
        name = obj["metadata"]["name"]
        assert DNS_1123.match(name) and len(name) <= 253, where
        if obj["kind"] in NAMESPACED:
            assert obj["metadata"]["namespace"] == "koordinator-system", where
        else:
            assert "namespace" not in obj["metadata"], where
        key = (obj["kind"], obj["metadata"].get("namespace"), name)
        assert key not in seen, f"{where} rendered twice"
        seen.add(key)
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "koord", where


def test_components_and_their_identities() -> None:
    objects = render()
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {
        ("Namespace", "koordinator-system"),
        ("Deployment", "koord-scheduler"),
        ("Deployment", "koord-descheduler"),
        ("DaemonSet", "koordlet"),
        ("ConfigMap", "koord-scheduler-config"),
        ("ConfigMap", "koord-descheduler-config"),
    } <= kinds
    for kind, name in (
        ("Deployment", "koord-scheduler"),
        ("Deployment", "koord-descheduler"),
        ("DaemonSet", "koordlet"),
    ):
        workload = find(objects, kind, name)
        pod = workload["spec"]["template"]
        assert workload["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        account = pod["spec"]["serviceAccountName"]
        find(objects, "ServiceAccount", account)
        bindings = [
            o for o in objects if o["kind"] == "ClusterRoleBinding" and o["subjects"][0]["name"] == account
        ]
        assert bindings, f"{account} is bound to no ClusterRole"
        find(objects, "ClusterRole", bindings[0]["roleRef"]["name"])
        main = container(workload)
        ports = {p["name"]: p["containerPort"] for p in main["ports"]}
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            assert main[probe]["httpGet"]["path"] == path, f"{name} {probe}"
            assert main[probe]["httpGet"]["port"] in ports, f"{name} {probe} names no container port"


def _allowed(role: dict[str, Any], group: str, resource: str, verb: str) -> bool:
    return any(
        group in rule["apiGroups"] or "*" in rule["apiGroups"]
        for rule in role["rules"]
        if (resource in rule["resources"] or "*" in rule["resources"])
        and (verb in rule["verbs"] or "*" in rule["verbs"])
    )


def test_rbac_grants_what_each_component_does() -> None:
    objects = render()
    scheduler = find(objects, "ClusterRole", "koord-scheduler-role")
    descheduler = find(objects, "ClusterRole", "koord-descheduler-role")
    koordlet = find(objects, "ClusterRole", "koordlet-role")
    assert _allowed(scheduler, "", "pods/binding", "create")
    assert _allowed(scheduler, "coordination.k8s.io", "leases", "update")
    assert _allowed(scheduler, "slo.koordinator.sh", "nodemetrics", "watch")
    assert _allowed(scheduler, "scheduling.sigs.k8s.io", "elasticquotas", "patch")
    assert _allowed(scheduler, "", "pods/eviction", "create"), "ElasticQuota's revoke controller evicts"
    assert _allowed(descheduler, "", "pods/eviction", "create")
    assert not _allowed(descheduler, "", "pods", "delete"), "the descheduler evicts, it never deletes"
    assert _allowed(descheduler, "coordination.k8s.io", "leases", "create")
    assert _allowed(koordlet, "slo.koordinator.sh", "nodemetrics/status", "update")
    assert not _allowed(koordlet, "", "pods/binding", "create")


def test_config_maps_carry_the_project_profiles_and_mount_where_the_args_point() -> None:
    objects = render({"installation": {"namespace": "koord-test"}})
    for component in ("scheduler", "descheduler"):
        source = yaml.safe_load((ROOT / "configs" / component / f"koord-{component}.yaml").read_text())
        expected = source["data"][f"koord-{component}-config"].replace("koordinator-system", "koord-test")
        cm = find(objects, "ConfigMap", f"koord-{component}-config")
        text = cm["data"][f"koord-{component}-config"]
        assert yaml.safe_load(text) == yaml.safe_load(expected)
        loaded = load_text(text, f"ConfigMap koord-{component}-config", component=component)  # type: ignore[arg-type]
        assert loaded is not None
        workload = find(objects, "Deployment", f"koord-{component}")
        config_arg = next(a for a in container(workload)["args"] if a.startswith("--config="))
        path = Path(config_arg.split("=", 1)[1])
        [mount] = [m for m in container(workload)["volumeMounts"] if m["name"] == "config"]
        assert str(path.parent) == mount["mountPath"]
        [volume] = [v for v in workload["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"]
        assert volume["configMap"]["name"] == cm["metadata"]["name"]
        assert volume["configMap"]["items"] == [{"key": f"koord-{component}-config", "path": path.name}]
    lease = yaml.safe_load(
        find(objects, "ConfigMap", "koord-scheduler-config")["data"]["koord-scheduler-config"]
    )
    assert lease["leaderElection"]["resourceNamespace"] == "koord-test"


# --- values flow through -----------------------------------------------------------------------------
def test_values_flow_through() -> None:
    objects = render(
        {
            "installation": {"namespace": "team-a"},
            "imageRepositoryHost": "registry.example",
            "imagePullSecrets": [{"name": "pull"}],
            "featureGates": "A=true",
            "scheduler": {
                "replicas": 3,
                "image": {"repository": "koord/scheduler", "tag": "9.9"},
                "log": {"level": "2"},
                "featureGates": "B=false",
                "resources": {"limits": {"cpu": "2", "memory": "2Gi"}},
                "nodeSelector": {"role": "control"},
                "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                },
            },
            "descheduler": {"replicas": 1, "port": 10299},
            "koordlet": {
                "features": "BECPUEvict=true",
                "metrics": {"port": 9999},
                "nodeSelector": {"pool": "batch"},
            },
        }
    )
    for obj in objects:
        if obj["kind"] in NAMESPACED:
            assert obj["metadata"]["namespace"] == "team-a"
    scheduler = find(objects, "Deployment", "koord-scheduler")
    spec = scheduler["spec"]["template"]["spec"]
    main = container(scheduler)
    assert scheduler["spec"]["replicas"] == 3
    assert main["image"] == "registry.example/koord/scheduler:9.9"
    assert "--v=2" in main["args"]
    assert "--feature-gates=A=true,B=false" in main["args"]
    assert main["resources"] == {
        "limits": {"cpu": "2", "memory": "2Gi"},
        "requests": {"cpu": "500m", "memory": "256Mi"},
    }
    assert spec["nodeSelector"] == {"role": "control"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["imagePullSecrets"] == [{"name": "pull"}]
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]["matchExpressions"][0]["values"] == ["a"]
    assert spec["affinity"]["podAntiAffinity"], "replicas spread across nodes"
    descheduler = find(objects, "Deployment", "koord-descheduler")
    assert descheduler["spec"]["replicas"] == 1
    assert container(descheduler)["ports"][0]["containerPort"] == 10299
    assert "--feature-gates=A=true" in container(descheduler)["args"]
    koordlet = find(objects, "DaemonSet", "koordlet")
    assert koordlet["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "batch"}
    assert koordlet["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert container(koordlet)["ports"] == [{"name": "http", "containerPort": 9999, "protocol": "TCP"}]
    assert "--health-address=0.0.0.0:9999" in container(koordlet)["args"]


def test_koordlet_serves_on_koordinators_metrics_port_by_default() -> None:
    koordlet = container(find(render(), "DaemonSet", "koordlet"))
    assert koordlet["ports"] == [{"name": "http", "containerPort": 9316, "protocol": "TCP"}]
    assert koordlet["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert koordlet["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def _cli_parser() -> argparse.ArgumentParser:
    """``koord``'s parser, with the serving commands whether or not the CLI registers them yet."""
    from koord_framework.cli import main, serve

    parser = main.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if "scheduler" not in sub.choices:
        serve.register(sub)
    return parser


@pytest.mark.parametrize("gates", ["", "A=true"])
def test_container_args_are_what_the_commands_accept(gates: str) -> None:
    objects = render({"featureGates": gates})
    parser = _cli_parser()
    for kind, name, command in (
        ("Deployment", "koord-scheduler", "scheduler"),
        ("Deployment", "koord-descheduler", "descheduler"),
        ("DaemonSet", "koordlet", "koordlet"),
    ):
        main = container(find(objects, kind, name))
        assert main["command"] == ["koord"]
        args = parser.parse_args(main["args"])
        assert args.command == command
        if command != "koordlet":
            assert args.address == f"0.0.0.0:{main['ports'][0]['containerPort']}"
            assert args.feature_gates == gates
        else:
            assert args.kubeconfig == "" and args.node_name == "$(NODE_NAME)" and args.host_root == "/host"
            assert args.health_address == f"0.0.0.0:{main['ports'][0]['containerPort']}"
            assert not args.once, "the DaemonSet runs the serving agent"


def test_defaults_leave_optional_fields_out() -> None:
    objects = render()
    spec = find(objects, "Deployment", "koord-scheduler")["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec and "tolerations" not in spec and "imagePullSecrets" not in spec
    assert container(find(objects, "Deployment", "koord-scheduler"))["image"] == "koord:0.1.0"
    assert not any(
        a.startswith("--feature-gates")
        for a in container(find(objects, "Deployment", "koord-scheduler"))["args"]
    )


def test_namespace_creation_is_optional() -> None:
    assert not [o for o in render({"installation": {"createNamespace": False}}) if o["kind"] == "Namespace"]


# --- CRDs --------------------------------------------------------------------------------------------
def test_crds_follow_crds_managed_and_per_crd_switches() -> None:
    crds = [o for o in render() if o["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 10
    assert not [o for o in render({"crds": {"managed": False}}) if o["kind"] == "CustomResourceDefinition"]
    some = [
        o["spec"]["names"]["kind"]
        for o in render({"crds": {"nodemetrics": False}})
        if o["kind"] == "CustomResourceDefinition"
    ]
    assert "NodeMetric" not in some and len(some) == 9


def test_crds_are_generated_and_in_sync() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "configs" / "crds" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    rendered = {o["metadata"]["name"]: o for o in render() if o["kind"] == "CustomResourceDefinition"}
    for path in sorted((ROOT / "configs" / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        assert rendered[crd["metadata"]["name"]] == crd, f"{path.name} differs in the chart"


KOORDINATOR_NAMES = {
    # kind: (group, plural, scope, status subresource), from Koordinator's config/crd/bases
    "NodeMetric": ("slo.koordinator.sh", "nodemetrics", "Cluster", True),
    "NodeSLO": ("slo.koordinator.sh", "nodeslos", "Cluster", True),
    "ElasticQuota": ("scheduling.sigs.k8s.io", "elasticquotas", "Namespaced", False),
    "PodGroup": ("scheduling.sigs.k8s.io", "podgroups", "Namespaced", False),
    "Device": ("scheduling.koordinator.sh", "devices", "Cluster", False),
    "Reservation": ("scheduling.koordinator.sh", "reservations", "Cluster", True),
    "PodMigrationJob": ("scheduling.koordinator.sh", "podmigrationjobs", "Cluster", True),
    "ClusterColocationProfile": ("config.koordinator.sh", "clustercolocationprofiles", "Cluster", True),
    "NodeResourceTopology": ("topology.node.k8s.io", "noderesourcetopologies", "Cluster", False),
}


@pytest.mark.parametrize("kind", sorted(KOORDINATOR_NAMES))
def test_crd_has_koordinators_coordinates(kind: str) -> None:
    group, plural, scope, status = KOORDINATOR_NAMES[kind]
    crd = yaml.safe_load((ROOT / "configs" / "crds" / f"{group}_{plural}.yaml").read_text())
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    assert (spec["group"], spec["names"]["plural"], spec["scope"], spec["names"]["kind"]) == (
        group,
        plural,
        scope,
        kind,
    )
    info = installed_kinds()[kind]  # the built-in kinds and those the plugins contribute
    served = {v["name"] for v in spec["versions"] if v["served"]}
    assert info.version in served, "the adapter's canonical version is served"
    assert sum(1 for v in spec["versions"] if v["storage"]) == 1
    assert all(("subresources" in v) == status for v in spec["versions"])
    if group.endswith(".k8s.io"):
        assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"], "protected group needs approval"
    for version in spec["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert schema["type"] == "object"


def test_project_example_objects_match_a_served_crd_version() -> None:
    served = {}
    for path in (ROOT / "configs" / "crds").glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            served[(crd["spec"]["names"]["kind"], f"{crd['spec']['group']}/{version['name']}")] = True
    checked = 0
    for path in sorted((ROOT / "configs" / "examples").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            items = doc.get("items", [doc]) if isinstance(doc, dict) else []
            for obj in items:
                if isinstance(obj, dict) and obj.get("kind") in KOORDINATOR_NAMES:
                    assert (obj["kind"], obj["apiVersion"]) in served, (
                        f"{path.name}: {obj['kind']} {obj['apiVersion']}"
                    )
                    checked += 1
    assert checked > 0


# --- the renderer itself -----------------------------------------------------------------------------
def _template(tmp_path: Path, text: str, values: dict[str, Any] | None = None) -> str:
    chart = tmp_path / "c"
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    (chart / "values.yaml").write_text(yaml.safe_dump(values or {}))
    (chart / "templates" / "t.yaml").write_text(text)
    return str(helm.Chart(chart).render()["templates/t.yaml"])


def test_renderer_follows_go_template_semantics(tmp_path: Path) -> None:
    values = {"m": {"b": 2, "a": 1}, "l": ["x", "y"], "empty": [], "s": "v", "zero": 0}
    assert _template(tmp_path, "a  {{- .Values.s -}}  b", values) == "avb"
    assert (
        _template(tmp_path, "{{ range $k, $v := .Values.m }}{{ $k }}={{ $v }};{{ end }}", values)
        == "a=1;b=2;"
    )
    assert _template(tmp_path, "{{ range $i, $v := .Values.l }}{{ $i }}{{ $v }}{{ end }}", values) == "0x1y"
    assert _template(tmp_path, "{{ with .Values.empty }}yes{{ else }}no{{ end }}", values) == "no"
    assert _template(tmp_path, "{{ if .Values.zero }}a{{ else if .Values.s }}b{{ end }}", values) == "b"
    assert _template(tmp_path, '{{ .Values.missing | default "d" | quote }}', values) == '"d"'
    assert _template(tmp_path, "{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}", values) == "2"
    assert (
        _template(tmp_path, '{{ define "t" }}[{{ . }}]{{ end }}{{ include "t" .Values.s | upper }}', values)
        == "[V]"
    )
    assert _template(tmp_path, "{{ toYaml .Values.m | nindent 2 }}", values) == "\n  a: 1\n  b: 2"
    assert _template(tmp_path, '{{ list "a" "" "b" | compact | join "," }}', values) == "a,b"
    assert _template(tmp_path, "{{/* it's a comment */}}ok", values) == "ok"


def test_renderer_refuses_what_go_refuses(tmp_path: Path) -> None:
    with pytest.raises(helm.TemplateError, match="nil pointer"):
        _template(tmp_path, "{{ .Values.missing.deeper }}")
    with pytest.raises(helm.TemplateError, match='function "nosuch" not defined'):
        _template(tmp_path, "{{ nosuch 1 }}")
    with pytest.raises(helm.TemplateError, match="missing"):
        _template(tmp_path, "{{ if true }}open")
