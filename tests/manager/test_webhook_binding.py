"""``/validate-pod-binding`` (``BindingAdmission``): Koordinator's ``binding_admission_test.go`` cases at
a7a1b76b (flag parsing, the escapes, the bypass labels and annotations), the manager's flags, and the code."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from koord_framework.cli.manager_webhook import add_webhook_flags, handler_args_from
from koord_framework.featuregates import gates_for
from koord_framework.manager.webhook.admission import AdmissionRequest, GroupVersionKind, GroupVersionResource
from koord_framework.manager.webhook.binding import BindingAdmission, parse_list
from koord_framework.manager.webhook.dispatch import Dispatcher
from koord_framework.testing.conformance import AdmissionHandlerConformance

DENIED = "binding denied: username is not in the allowed list"


class TestBindingAdmissionConformance(AdmissionHandlerConformance):
    plugin_class = BindingAdmission


class Pods:
    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        assert kind == "Pod"
        return self.pods.get((namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return list(self.pods.values())


@pytest.mark.parametrize(
    ("text", "want"),
    [("", []), ("koord-scheduler", ["koord-scheduler"]), ("a,b,c", ["a", "b", "c"]), (" a , b ", ["a", "b"])],
)
def test_parse_list(text: str, want: list[str]) -> None:
    assert parse_list(text) == want


def test_setup_from_args() -> None:
    h = BindingAdmission({"user_name": "x", "namespaces": "*"})
    assert h.user_names == ["x"] and h.all_namespaces and not h.namespaces
    h = BindingAdmission({"user_name": "koord", "bypass_labels": "app.kubernetes.io/managed-by,custom-label"})
    assert h.bypass_labels == {"app.kubernetes.io/managed-by", "custom-label"} and not h.all_namespaces
    h = BindingAdmission({"user_name": "koord", "bypass_annotations": "custom.io/delegated"})
    assert h.bypass_annotations == {"custom.io/delegated"}
    assert BindingAdmission().excluded == {"kube-system"}
    assert BindingAdmission().bypass_labels == {"koordinator.sh/binding-admission-bypass"}


def _request(op: str = "CREATE", sub: str = "binding", username: str = "kube-scheduler", ns: str = "default"):  # type: ignore[no-untyped-def]
    return AdmissionRequest(
        uid="u",
        kind=GroupVersionKind("", "v1", "Binding"),
        resource=GroupVersionResource("", "v1", "pods"),
        operation=op,  # type: ignore[arg-type]
        name="p",
        namespace=ns,
        sub_resource=sub,
        object={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": ns}},
        user_info={"username": username},
    )


def _answer(
    args: dict[str, Any], request: AdmissionRequest, on: bool = True, *pods: dict[str, Any]
) -> dict[str, Any]:
    handler = BindingAdmission(args)
    handler.bind(Pods(*pods), gates_for("manager").parse("BindingAdmissionWebhook=true" if on else ""))
    return Dispatcher.admit([handler], request)


ALL = {"namespaces": "*", "exclude_namespaces": ""}

HANDLE_CASES = [
    ("feature off - allow", False, {"user_name": "koord"}, _request(), True),
    ("empty whitelist - allow", True, {}, _request(), True),
    (
        "username match - allow",
        True,
        {"user_name": "koord-scheduler"},
        _request(username="system:sa:koord-scheduler"),
        True,
    ),
    ("multi user-name second match", True, {"user_name": "a,koord"}, _request(username="system:koord"), True),
    ("no match - deny", True, {"user_name": "koord-scheduler", **ALL}, _request(), False),
    (
        "excluded ns - allow",
        True,
        {"user_name": "koord-scheduler", "namespaces": "*", "exclude_namespaces": "kube-system"},
        _request(ns="kube-system"),
        True,
    ),
    (
        "ns not in scope - allow",
        True,
        {"user_name": "koord-scheduler", "namespaces": "test", "exclude_namespaces": ""},
        _request(ns="production"),
        True,
    ),
    (
        "ns in scope - deny",
        True,
        {"user_name": "koord-scheduler", "namespaces": "test", "exclude_namespaces": ""},
        _request(ns="test"),
        False,
    ),
    (
        "dry-run - allow (would deny)",
        True,
        {"user_name": "koord-scheduler", "dry_run": True, **ALL},
        _request(),
        True,
    ),
    ("non-binding - skip", True, {"user_name": "koord"}, _request(sub=""), True),
    ("non-create - skip", True, {"user_name": "koord"}, _request(op="UPDATE"), True),
    (
        "no namespaces configured - allow",
        True,
        {"user_name": "koord-scheduler", "exclude_namespaces": ""},
        _request(),
        True,
    ),
]


@pytest.mark.parametrize(
    ("on", "args", "request_", "allowed"), [c[1:] for c in HANDLE_CASES], ids=[c[0] for c in HANDLE_CASES]
)
def test_handle(on: bool, args: dict[str, Any], request_: AdmissionRequest, allowed: bool) -> None:
    pod = {"metadata": {"name": "p", "namespace": request_.namespace, "labels": {}}}
    response = _answer(args, request_, on, pod)
    assert response["allowed"] is allowed
    if not allowed:
        # admission.Denied: 403 with the message.
        assert response["status"]["code"] == 403 and response["status"]["message"] == DENIED


def _pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "default",
            "labels": labels or {},
            "annotations": annotations or {},
        }
    }


DEFAULT = "koordinator.sh/binding-admission-bypass"
BYPASS_CASES = [
    ("default bypass label present - allow", _pod({DEFAULT: "true"}), DEFAULT, "", "kube-scheduler", True),
    (
        "default bypass label any value - allow",
        _pod({DEFAULT: "anything"}),
        DEFAULT,
        "",
        "kube-scheduler",
        True,
    ),
    ("no bypass label - deny", _pod({"app": "x"}), DEFAULT, "", "kube-scheduler", False),
    (
        "custom bypass label - allow",
        _pod({"app.kubernetes.io/managed-by": "virtual-kubelet"}),
        "app.kubernetes.io/managed-by",
        "",
        "kube-scheduler",
        True,
    ),
    (
        "multiple bypass labels, one matches - allow",
        _pod({"custom.io/delegated": "true"}),
        f"{DEFAULT},custom.io/delegated",
        "",
        "kube-scheduler",
        True,
    ),
    (
        "multiple bypass labels, none matches - deny",
        _pod({"app": "web"}),
        f"{DEFAULT},custom.io/delegated",
        "",
        "kube-scheduler",
        False,
    ),
    (
        "bypass annotation present - allow",
        _pod(annotations={"custom.io/delegated-scheduler": "vk"}),
        "",
        "custom.io/delegated-scheduler",
        "kube-scheduler",
        True,
    ),
    (
        "bypass annotation absent - deny",
        _pod(annotations={"other": "value"}),
        "",
        "custom.io/delegated-scheduler",
        "kube-scheduler",
        False,
    ),
    (
        "label miss, annotation hit - allow",
        _pod({"app": "web"}, {"custom.io/producer": "delegated"}),
        "custom.io/delegated",
        "custom.io/producer",
        "kube-scheduler",
        True,
    ),
    ("username match - skip pod check", _pod(), DEFAULT, "", "system:sa:koord-scheduler", True),
]


@pytest.mark.parametrize(
    ("pod", "labels", "annotations", "username", "allowed"),
    [c[1:] for c in BYPASS_CASES],
    ids=[c[0] for c in BYPASS_CASES],
)
def test_bypass(pod: dict[str, Any], labels: str, annotations: str, username: str, allowed: bool) -> None:
    args = {"user_name": "koord-scheduler", "bypass_labels": labels, "bypass_annotations": annotations, **ALL}
    assert _answer(args, _request(username=username), True, pod)["allowed"] is allowed


def test_a_pod_missing_from_the_cache_is_let_through() -> None:
    assert _answer({"user_name": "koord-scheduler", **ALL}, _request(), True)["allowed"] is True


def test_the_managers_flags_become_the_handlers_args() -> None:
    parser = argparse.ArgumentParser()
    add_webhook_flags(parser)
    assert handler_args_from(parser.parse_args([])) == {}
    args = parser.parse_args(
        [
            "--binding-admission-user-name=koord-scheduler",
            "--binding-admission-namespaces=*",
            "--binding-admission-dry-run",
        ]
    )
    got = handler_args_from(args)
    assert got == {"BindingAdmission": {"user_name": "koord-scheduler", "namespaces": "*", "dry_run": True}}
    handler = BindingAdmission(got["BindingAdmission"])
    assert handler.all_namespaces and handler.args.dry_run
