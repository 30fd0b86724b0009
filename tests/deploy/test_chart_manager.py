"""The chart's koord-manager: its Deployment, webhook Service, Secret and webhook configurations, and RBAC."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "configs" / "helm" / "koord"


def _load(name: str) -> ModuleType:
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


def manager_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    [main] = find(objects, "Deployment", "koord-manager")["spec"]["template"]["spec"]["containers"]
    assert isinstance(main, dict)
    return main


def webhooks(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for kind, name in (
        ("MutatingWebhookConfiguration", "koordinator-mutating-webhook-configuration"),
        ("ValidatingWebhookConfiguration", "koordinator-validating-webhook-configuration"),
    ):
        for hook in find(objects, kind, name)["webhooks"] or ():
            out[hook["name"]] = hook
    return out


def test_manager_runs_the_image_with_koordinators_settings() -> None:
    objects = render()
    main = manager_container(objects)
    assert main["command"] == ["koord"]
    from koord_framework.cli import main as cli

    args = cli.build_parser().parse_args(main["args"])
    assert args.command == "manager"
    assert args.config_namespace == "koordinator-system"
    assert args.leader_election_namespace == "koordinator-system"
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports == {"webhook-server": 9876, "metrics": 8080}
    assert args.metrics_addr == ":8080"
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert env["WEBHOOK_PORT"] == "9876"
    assert "POD_NAMESPACE" in env
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert main[probe]["httpGet"] == {"path": path, "port": "metrics"}
    assert main["securityContext"]["runAsNonRoot"] is True
    assert main["securityContext"]["allowPrivilegeEscalation"] is False


def test_webhook_service_reaches_the_managers_webhook_port() -> None:
    objects = render({"manager": {"webhook": {"port": 9443}}})
    service = find(objects, "Service", "koordinator-webhook-service")
    pod = find(objects, "Deployment", "koord-manager")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    [port] = service["spec"]["ports"]
    assert port["port"] == 443 and port["targetPort"] == 9443
    main = manager_container(objects)
    assert {"name": "webhook-server", "containerPort": 9443, "protocol": "TCP"} in main["ports"]
    assert {"name": "WEBHOOK_PORT", "value": "9443"} in main["env"]
    find(objects, "Secret", "koordinator-webhook-certs")
    for hook in webhooks(objects).values():
        assert hook["clientConfig"]["service"]["name"] == "koordinator-webhook-service"
        assert hook["clientConfig"]["service"]["namespace"] == "koordinator-system"


def test_webhooks_are_koordinators_with_policy_and_timeout_from_values() -> None:
    hooks = webhooks(render())
    assert set(hooks) == {
        "mpod-create.koordinator.sh",
        "vpod.koordinator.sh",
        "melasticquota.koordinator.sh",
        "velasticquota.koordinator.sh",
    }
    assert hooks["mpod-create.koordinator.sh"]["clientConfig"]["service"]["path"] == "/mutate-pod"
    assert hooks["vpod.koordinator.sh"]["clientConfig"]["service"]["path"] == "/validate-pod"
    assert (
        hooks["velasticquota.koordinator.sh"]["clientConfig"]["service"]["path"]
        == "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
    )
    assert hooks["velasticquota.koordinator.sh"]["rules"][0]["apiGroups"] == ["scheduling.sigs.k8s.io"]
    assert all(h["failurePolicy"] == "Ignore" and h["timeoutSeconds"] == 30 for h in hooks.values())
    assert all(h["sideEffects"] == "None" for h in hooks.values())

    hooks = webhooks(
        render(
            {
                "webhookConfiguration": {
                    "failurePolicy": {"pods": "Fail", "elasticquotas": "Ignore"},
                    "timeoutSeconds": 5,
                }
            }
        )
    )
    assert hooks["mpod-create.koordinator.sh"]["failurePolicy"] == "Fail"
    assert hooks["vpod.koordinator.sh"]["failurePolicy"] == "Fail"
    assert hooks["velasticquota.koordinator.sh"]["failurePolicy"] == "Ignore"
    assert {h["timeoutSeconds"] for h in hooks.values()} == {5}
    main = manager_container(render({"webhookConfiguration": {"failurePolicy": {"pods": "Fail"}}}))
    assert {"name": "WEBHOOK_CONFIGURATION_FAILURE_POLICY_PODS", "value": "Fail"} in main["env"]


@pytest.mark.parametrize(
    ("gate", "gone"),
    [
        ("PodMutatingWebhook=false", "mpod-create.koordinator.sh"),
        ("PodValidatingWebhook=false", "vpod.koordinator.sh"),
        ("ElasticValidatingWebhook=false", "velasticquota.koordinator.sh"),
        ("ElasticMutatingWebhook=false", "melasticquota.koordinator.sh"),
    ],
)
def test_a_feature_gate_turns_a_webhook_off(gate: str, gone: str) -> None:
    objects = render({"featureGates": gate})
    hooks = webhooks(objects)
    assert gone not in hooks and len(hooks) == 3
    assert f"--feature-gates={gate}" in manager_container(objects)["args"]


def _grants(objects: list[dict[str, Any]], group: str, resource: str, verb: str, name: str = "") -> bool:
    """Whether koord-manager's roles allow ``verb`` on ``resource`` (of ``name`` when given)."""
    rules = find(objects, "ClusterRole", "koord-manager-role")["rules"]
    rules = rules + find(objects, "Role", "koord-manager-role")["rules"]
    for rule in rules:
        if group not in rule["apiGroups"] or resource not in rule["resources"] or verb not in rule["verbs"]:
            continue
        if "resourceNames" in rule and name not in rule["resourceNames"]:
            continue
        return True
    return False


def test_manager_rbac_is_what_it_does_and_no_more() -> None:
    objects = render()
    for group, resource, verb in (
        ("", "nodes", "watch"),
        ("", "pods", "list"),
        ("", "configmaps", "watch"),
        ("", "nodes/status", "patch"),
        ("", "nodes", "patch"),  # the ratio annotations (Koordinator's nodes: get;list;watch;patch)
        ("slo.koordinator.sh", "nodeslos", "create"),
        ("slo.koordinator.sh", "nodemetrics", "update"),
        ("config.koordinator.sh", "clustercolocationprofiles", "list"),
        ("scheduling.sigs.k8s.io", "elasticquotas", "get"),
        ("scheduling.koordinator.sh", "devices", "watch"),  # GPUDeviceResource, RDMADeviceResource
        ("scheduling.sigs.k8s.io", "elasticquotas", "create"),  # quotaprofile: the root quotas
        ("scheduling.sigs.k8s.io", "elasticquotas", "update"),
        ("quota.koordinator.sh", "elasticquotaprofiles", "watch"),
        ("quota.koordinator.sh", "elasticquotaprofiles", "patch"),  # the tree-id label
        ("coordination.k8s.io", "leases", "update"),
        ("", "events", "create"),
    ):
        assert _grants(objects, group, resource, verb), f"{verb} {group}/{resource}"
    for group, resource, verb in (
        ("", "pods", "update"),
        ("", "pods", "delete"),
        ("", "nodes", "update"),
        ("", "configmaps", "update"),
        ("scheduling.koordinator.sh", "devices", "update"),
        ("scheduling.sigs.k8s.io", "elasticquotas", "delete"),  # a profile's quota outlives it
        ("", "secrets", "create"),
        ("", "*", "*"),
    ):
        assert not _grants(objects, group, resource, verb), f"{verb} {group}/{resource} is not needed"
    # Its own webhook configurations and certificate Secret, and no one else's.
    certs = "koordinator-webhook-certs"
    assert _grants(objects, "", "secrets", "update", certs)
    assert not _grants(objects, "", "secrets", "update", "someone-elses")
    admission = "admissionregistration.k8s.io"
    for resource, name in (
        ("mutatingwebhookconfigurations", "koordinator-mutating-webhook-configuration"),
        ("validatingwebhookconfigurations", "koordinator-validating-webhook-configuration"),
    ):
        assert _grants(objects, admission, resource, "update", name)
        assert not _grants(objects, admission, resource, "update", "another-webhook")
    role = find(objects, "Role", "koord-manager-role")
    assert role["metadata"]["namespace"] == "koordinator-system"
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(objects, binding_kind, "koord-manager-rolebinding")
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": "koord-manager-role",
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "koord-manager", "namespace": "koordinator-system"}
        ]


def test_slo_controller_config_is_koordinators_and_the_manager_takes_it() -> None:
    from koord_framework.manager.sloconfig import SLOConfig

    objects = render({"installation": {"namespace": "koord"}})
    config_map = find(objects, "ConfigMap", "slo-controller-config")
    assert config_map["metadata"]["namespace"] == "koord"
    manager = manager_container(objects)
    assert "--config-namespace=koord" in manager["args"], "the manager reads it where the chart puts it"
    assert set(config_map["data"]) == {"colocation-config", "resource-threshold-config"}
    config = SLOConfig()
    assert config.update(config_map["data"]) == [], "every key parses"
    assert config.colocation({}).enable is True
    assert config.strategy("resource-threshold-config", {})["enable"] is True


def test_an_alpha_webhook_is_registered_when_its_gate_is_on() -> None:
    assert "vconfigmap.koordinator.sh" not in webhooks(render())
    objects = render({"featureGates": "ConfigMapValidatingWebhook=true"})
    hook = webhooks(objects)["vconfigmap.koordinator.sh"]
    assert hook["clientConfig"]["service"]["path"] == "/validate-configmap"
    assert hook["failurePolicy"] == "Fail"  # Koordinator's: a bad slo-controller-config is never stored
    assert hook["rules"][0]["resources"] == ["configmaps"]
    assert set(hook["rules"][0]["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    assert _grants(objects, "", "nodes", "list")  # the check reads the nodes


def test_the_node_webhooks_follow_their_gates_and_policies() -> None:
    hooks = webhooks(render())
    assert "vnode.koordinator.sh" not in hooks and "mnode-status.koordinator.sh" not in hooks
    objects = render(
        {
            "featureGates": "NodeMutatingWebhook=true,NodeValidatingWebhook=true",
            "webhookConfiguration": {"failurePolicy": {"nodes": "Fail", "nodeStatus": "Ignore"}},
        }
    )
    hooks = webhooks(objects)
    status = hooks["mnode-status.koordinator.sh"]
    assert status["clientConfig"]["service"]["path"] == "/mutate-node-status"
    assert status["rules"][0]["resources"] == ["nodes/status"] and status["failurePolicy"] == "Ignore"
    node = hooks["vnode.koordinator.sh"]
    assert node["clientConfig"]["service"]["path"] == "/validate-node"
    assert node["rules"][0]["resources"] == ["nodes"] and node["failurePolicy"] == "Fail"


def test_the_elasticquota_mutating_webhook_is_koordinators() -> None:
    hook = webhooks(render({"webhookConfiguration": {"failurePolicy": {"elasticquotas": "Fail"}}}))[
        "melasticquota.koordinator.sh"
    ]
    assert hook["clientConfig"]["service"]["path"] == "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
    assert hook["rules"][0]["operations"] == ["CREATE"] and hook["rules"][0]["resources"] == ["elasticquotas"]
    assert hook["failurePolicy"] == "Fail"


def test_pod_binding_admission_follows_its_gate() -> None:
    assert "vpodbinding.koordinator.sh" not in webhooks(render())
    hook = webhooks(render({"featureGates": "BindingAdmissionWebhook=true"}))["vpodbinding.koordinator.sh"]
    assert hook["clientConfig"]["service"]["path"] == "/validate-pod-binding"
    assert hook["rules"][0]["resources"] == ["pods/binding"] and hook["rules"][0]["operations"] == ["CREATE"]
    assert hook["failurePolicy"] == "Ignore"  # Koordinator's: bindings go on when the manager is away


def test_quota_gates_grant_what_their_webhook_steps_need() -> None:
    # The quotaprofile controller (on without a gate, as Koordinator's) already needs both, so the quota
    # webhooks' gates add nothing.
    objects = render({"featureGates": "EnableQuotaAdmission=true,MultiQuotaTree=true"})
    assert _grants(objects, "scheduling.sigs.k8s.io", "elasticquotas", "update")
    assert _grants(objects, "quota.koordinator.sh", "elasticquotaprofiles", "watch")
