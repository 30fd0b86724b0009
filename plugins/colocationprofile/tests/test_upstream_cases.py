"""Koordinator's unit-test cases of the ClusterColocationProfile mutating webhook
(``pkg/webhook/pod/mutating/cluster_colocation_profile_test.go`` at a7a1b76b,
``TestClusterColocationProfileMutatingPod``), through the handler's public interface.

Every case: namespace ``default`` labelled ``enable-koordinator-colocation=true``, PriorityClass
``koordinator-batch`` of value 5999 (``PriorityBatchValueMax``) with preemption policy
``fakePreemptionPolicy``, one profile ``test-profile``; the pod is mutated in place and compared whole.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from koord_plugin_colocationprofile import ClusterColocationProfile

BATCH_MAX = 5999
PATCH = {
    "metadata": {
        "labels": {"test-patch-label": "patch-a"},
        "annotations": {"test-patch-annotation": "patch-b"},
    }
}


class Lister:
    def __init__(self, objs: dict[str, list[dict[str, Any]]]) -> None:
        self.objs = objs

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        return next((o for o in self.objs.get(kind, []) if o["metadata"]["name"] == name), None)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.objs.get(kind, [])


class Gates:
    def __init__(self, **on: bool) -> None:
        self.on = on

    def enabled(self, name: str) -> bool:
        return self.on.get(name, False)


def resources(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


def batch(cpu: str, memory: str) -> dict[str, str]:
    return {"kubernetes.io/batch-cpu": cpu, "kubernetes.io/batch-memory": memory}


def pod(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": "default",
        "name": "test-pod-1",
        "labels": {"koordinator-colocation-pod": "true", **(labels or {})},
    }
    if annotations:
        meta["annotations"] = annotations
    return {
        "metadata": meta,
        "spec": {
            "initContainers": [
                {
                    "name": "test-init-container-a",
                    "resources": {"limits": resources("500m", "1Gi"), "requests": resources("500m", "1Gi")},
                }
            ],
            "containers": [
                {
                    "name": "test-container-a",
                    "resources": {"limits": resources("1", "4Gi"), "requests": resources("1", "4Gi")},
                }
            ],
            "overhead": resources("1", "2Gi"),
            "schedulerName": "nonExistSchedulerName",
            "priority": BATCH_MAX,
        },
    }


def batched(p: dict[str, Any]) -> dict[str, Any]:
    """The pod with its cpu / memory turned into batch resources (what every BE case expects)."""
    p = copy.deepcopy(p)
    p["spec"]["initContainers"][0]["resources"] = {
        "limits": batch("500", "1Gi"),
        "requests": batch("500", "1Gi"),
    }
    p["spec"]["containers"][0]["resources"] = {"limits": batch("1k", "4Gi"), "requests": batch("1k", "4Gi")}
    p["spec"]["overhead"] = batch("1k", "2Gi")
    return p


def profile(**spec: Any) -> dict[str, Any]:
    annotations = spec.pop("profile_annotations", None)
    base: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"enable-koordinator-colocation": "true"}},
        "selector": {"matchLabels": {"koordinator-colocation-pod": "true"}},
        "labels": {"testLabelA": "valueA"},
        "annotations": {"testAnnotationA": "valueA"},
        "schedulerName": "koordinator-scheduler",
        "qosClass": "BE",
        "priorityClassName": "koordinator-batch",
        "koordinatorPriority": 1111,
        "patch": PATCH,
    }
    base.update(spec)
    meta: dict[str, Any] = {"name": "test-profile"}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "config.koordinator.sh/v1alpha1",
        "kind": "ClusterColocationProfile",
        "metadata": meta,
        "spec": base,
    }


def mutated(
    p: dict[str, Any],
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``p`` after the base profile (labels, annotations, patch, QoS, priority, scheduler)."""
    p = copy.deepcopy(p)
    p["metadata"]["labels"].update(
        {
            "testLabelA": "valueA",
            "test-patch-label": "patch-a",
            "koordinator.sh/qosClass": "BE",
            "koordinator.sh/priority": "1111",
            **(labels or {}),
        }
    )
    p["metadata"]["annotations"] = {
        **p["metadata"].get("annotations", {}),
        "testAnnotationA": "valueA",
        "test-patch-annotation": "patch-b",
        **(annotations or {}),
    }
    p["spec"].update(
        {
            "schedulerName": "koordinator-scheduler",
            "priority": BATCH_MAX,
            "priorityClassName": "koordinator-batch",
            "preemptionPolicy": "fakePreemptionPolicy",
        }
    )
    return p


def limits_only() -> dict[str, Any]:
    p = pod()
    del p["spec"]["initContainers"], p["spec"]["overhead"]
    p["spec"]["containers"][0]["resources"] = {"limits": resources("1", "4Gi")}
    return p


def requests_only() -> dict[str, Any]:
    p = pod()
    del p["spec"]["initContainers"], p["spec"]["overhead"]
    p["spec"]["containers"][0]["resources"] = {"requests": resources("1", "4Gi")}
    return p


def _limits_only_expected() -> dict[str, Any]:
    p = mutated(limits_only())
    p["spec"]["containers"][0]["resources"] = {"limits": batch("1k", "4Gi"), "requests": batch("1k", "4Gi")}
    return p


def _requests_only_expected() -> dict[str, Any]:
    p = mutated(requests_only())
    p["spec"]["containers"][0]["resources"] = {"requests": batch("1k", "4Gi")}
    return p


CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    # (name, pod, profile, options, expected)
    ("mutating pod", pod(), profile(), {}, batched(mutated(pod()))),
    ("set default request to the limit", limits_only(), profile(), {}, _limits_only_expected()),
    ("keep limit unset", requests_only(), profile(), {}, _requests_only_expected()),
    ("mutating pod, percent 100", pod(), profile(probability=100), {}, batched(mutated(pod()))),
    # A skipped profile changes nothing, but the pod's own batch priority still moves its resources.
    ("mutating pod, percent 0", pod(), profile(probability=0), {}, batched(pod())),
    ("mutating pod, percent 50, rand=70", pod(), profile(probability=50), {"rand": 70}, batched(pod())),
    (
        "mutating pod, percent 50, rand=30",
        pod(),
        profile(probability=50),
        {"rand": 30},
        batched(mutated(pod())),
    ),
    (
        "mutating pod, skip update resource by profile annotation",
        pod(),
        profile(profile_annotations={"config.koordinator.sh/skip-update-resources": "true"}),
        {},
        mutated(pod()),
    ),
    (
        "mutating pod, skip update resource by leveraging profile",
        pod(),
        profile(),
        {"skip_gate": True},
        mutated(pod()),
    ),
    (
        "mutate pod labels according to labels",
        pod({"label-key-to-load": "test-label-value"}),
        profile(labelKeysMapping={"label-key-to-load": "label-key-to-store"}),
        {},
        batched(
            mutated(
                pod({"label-key-to-load": "test-label-value"}), {"label-key-to-store": "test-label-value"}
            )
        ),
    ),
    (
        "mutate pod labels according to labels 1",
        pod({"label-key-to-load": "test-label-value"}),
        profile(
            labelKeysMapping={
                "label-key-to-load": "label-key-to-store",
                "label-key-to-load-not-exist": "label-key-to-store-not-exist",
            }
        ),
        {},
        batched(
            mutated(
                pod({"label-key-to-load": "test-label-value"}),
                {"label-key-to-store": "test-label-value", "label-key-to-store-not-exist": ""},
            )
        ),
    ),
    (
        "mutate pod annotations according to annotations",
        pod(annotations={"annotation-key-to-load": "test-annotation-value"}),
        profile(annotationKeysMapping={"annotation-key-to-load": "annotation-key-to-store"}),
        {},
        batched(
            mutated(
                pod(annotations={"annotation-key-to-load": "test-annotation-value"}),
                annotations={"annotation-key-to-store": "test-annotation-value"},
            )
        ),
    ),
    (
        "mutate pod labels with labels and suffixes",
        pod({"label-key-to-load": "test-label-value"}),
        profile(
            labelKeysMapping={
                "label-key-to-load": "label-key-to-store",
                "label-key-to-load-not-exist": "label-key-to-store-not-exist",
            },
            labelSuffixes={"label-key-to-store": "suffix-0"},
        ),
        {},
        batched(
            mutated(
                pod({"label-key-to-load": "test-label-value"}),
                {"label-key-to-store": "test-label-valuesuffix-0", "label-key-to-store-not-exist": ""},
            )
        ),
    ),
]


@pytest.mark.parametrize(
    ("name", "the_pod", "the_profile", "options", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_cluster_colocation_profile_mutating_pod(
    name: str,
    the_pod: dict[str, Any],
    the_profile: dict[str, Any],
    options: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    handler = ClusterColocationProfile()
    handler.bind(
        Lister(
            {
                "Namespace": [
                    {"metadata": {"name": "default", "labels": {"enable-koordinator-colocation": "true"}}}
                ],
                "PriorityClass": [
                    {
                        "metadata": {"name": "koordinator-batch"},
                        "value": BATCH_MAX,
                        "preemptionPolicy": "fakePreemptionPolicy",
                    }
                ],
                "ClusterColocationProfile": [the_profile],
            }
        ),
        Gates(ColocationProfileSkipMutatingResources=bool(options.get("skip_gate"))),
    )
    if "rand" in options:
        handler.rand_intn = lambda n: int(options["rand"])
    p = copy.deepcopy(the_pod)
    handler.mutate(p)
    assert p == expected
