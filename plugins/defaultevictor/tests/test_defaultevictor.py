"""DefaultEvictor: protections, constraints, pre-eviction checks and the eviction itself."""

from __future__ import annotations

from typing import Any

import pytest
from koord_plugin_defaultevictor import DefaultEvictor

from koord_framework.api.objects import PodInfo
from koord_framework.descheduler.interface import EvictionFailed, EvictOptions
from koord_framework.errors import KoordError
from koord_framework.testing.builders import make_node, make_pdb, make_pod
from koord_framework.testing.conformance import PluginConformance
from koord_framework.testing.descheduler import DeschedulerHarness

T0 = 1_704_067_200.0


class TestConformance(PluginConformance):
    plugin_class = DefaultEvictor
    group = "descheduler"
    valid_args = [
        {
            "evictLocalStoragePods": True,
            "ignorePvcPods": True,
            "nodeFit": True,
            "nodeSelector": "zone in (a,b)",
        },
        {"podProtections": {"defaultDisabled": ["DaemonSetPods"], "extraEnabled": ["PodsWithoutPDB"]}},
        {
            "priorityThreshold": {"value": 1000},
            "minReplicas": 2,
            "minPodAge": "5m",
            "noEvictionPolicy": "Mandatory",
        },
        {"apiVersion": "descheduler/v1alpha2", "kind": "DefaultEvictorArgs", "ignorePodsWithoutPDB": True},
    ]
    invalid_args = [
        {"priorityThreshold": {"value": 1, "name": "high"}},
        {"evictLocalStoragePods": True, "podProtections": {"defaultDisabled": ["DaemonSetPods"]}},
        {"podProtections": {"extraEnabled": ["DaemonSetPods"]}},
        {"podProtections": {"defaultDisabled": ["PodsWithPVC"]}},
        {"podProtections": {"defaultDisabled": ["DaemonSetPods", "DaemonSetPods"]}},
        {"noEvictionPolicy": "Sometimes"},
        {"nodeSelector": "a in b"},
        {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}},
    ]


def _harness(
    args: dict[str, Any] | None = None, *objs: dict[str, Any]
) -> tuple[DeschedulerHarness, DefaultEvictor]:
    harness = DeschedulerHarness([], evictor=(DefaultEvictor, args or {}), now=T0)
    harness.add(*objs)
    plugin = harness.plugin("DefaultEvictor")
    assert isinstance(plugin, DefaultEvictor)
    return harness, plugin


def _owned(name: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("owner_kind", "ReplicaSet")
    kw.setdefault("node", "n1")
    return make_pod(name, **kw)


def _info(manifest: dict[str, Any]) -> PodInfo:
    return PodInfo.from_manifest(manifest)


CASES: list[tuple[str, dict[str, Any], dict[str, Any], bool]] = [
    ("owned pod", {}, {}, True),
    ("bare pod", {"owner_kind": None}, {}, False),
    ("failed bare pod", {"owner_kind": None, "phase": "Failed"}, {"evictFailedBarePods": True}, True),
    ("running bare pod with evictFailedBarePods", {"owner_kind": None}, {"evictFailedBarePods": True}, False),
    ("daemonset pod", {"owner_kind": "DaemonSet"}, {}, False),
    ("daemonset pod allowed", {"owner_kind": "DaemonSet"}, {"evictDaemonSetPods": True}, True),
    ("mirror pod", {"annotations": {"kubernetes.io/config.mirror": "m"}}, {}, False),
    ("static pod", {"annotations": {"kubernetes.io/config.source": "file"}}, {}, False),
    ("api-sourced pod", {"annotations": {"kubernetes.io/config.source": "api"}}, {}, True),
    ("terminating pod", {"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}, {}, False),
    ("system critical", {"priority": 2_000_000_000}, {}, False),
    ("system critical allowed", {"priority": 2_000_000_000}, {"evictSystemCriticalPods": True}, True),
    ("above threshold", {"priority": 1000}, {"priorityThreshold": {"value": 1000}}, False),
    ("below threshold", {"priority": 999}, {"priorityThreshold": {"value": 1000}}, True),
    ("no priority, threshold", {}, {"priorityThreshold": {"value": 1000}}, True),
    ("emptyDir", {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}, {}, False),
    (
        "emptyDir allowed",
        {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}},
        {"evictLocalStoragePods": True},
        True,
    ),
    ("pvc", {"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}}, {}, True),
    (
        "pvc ignored",
        {"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}},
        {"ignorePvcPods": True},
        False,
    ),
    (
        "label selector miss",
        {"labels": {"app": "a"}},
        {"labelSelector": {"matchLabels": {"app": "b"}}},
        False,
    ),
    ("label selector hit", {"labels": {"app": "b"}}, {"labelSelector": {"matchLabels": {"app": "b"}}}, True),
    (
        "evict annotation wins",
        {"owner_kind": "DaemonSet", "annotations": {"descheduler.alpha.kubernetes.io/evict": ""}},
        {},
        True,
    ),
    (
        "mandatory no-eviction",
        {"annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}},
        {"noEvictionPolicy": "Mandatory"},
        False,
    ),
    (
        "preferred no-eviction",
        {"annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""}},
        {"noEvictionPolicy": "Preferred"},
        True,
    ),
    (
        "new-style protections",
        {"owner_kind": "DaemonSet"},
        {"podProtections": {"defaultDisabled": ["DaemonSetPods"]}},
        True,
    ),
]


@pytest.mark.parametrize(("pod_kw", "args", "admitted"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter(pod_kw: dict[str, Any], args: dict[str, Any], admitted: bool) -> None:
    _, plugin = _harness(args)
    pod = _info(_owned("p", **pod_kw))
    assert plugin.filter(pod) is admitted
    assert (plugin.reasons(pod) == []) is admitted


def test_pods_without_pdb_protection() -> None:
    _, plugin = _harness(
        {"ignorePodsWithoutPDB": True},
        make_pdb("db", match_labels={"app": "db"}, min_available=1),
    )
    assert plugin.filter(_info(_owned("a", labels={"app": "db"})))
    assert not plugin.filter(_info(_owned("b", labels={"app": "web"})))


def test_min_replicas_counts_the_owners_pods() -> None:
    harness, plugin = _harness({"minReplicas": 3}, make_node("n1"))
    pods = [_owned(f"w{i}", owner_name="rs") for i in range(2)]
    harness.add(*pods)
    cache = harness.descheduler.services.cache
    assert not plugin.filter(cache.pod("default", "w0"))  # type: ignore[arg-type]
    harness.add(_owned("w2", owner_name="rs"))
    assert plugin.filter(cache.pod("default", "w0"))  # type: ignore[arg-type]


def test_min_pod_age() -> None:
    _, plugin = _harness({"minPodAge": "10m"})
    young = _info(_owned("young", status={"startTime": "2023-12-31T23:55:00Z"}))
    old = _info(_owned("old", status={"startTime": "2023-12-31T23:00:00Z"}))
    assert not plugin.filter(young) and plugin.filter(old)


def test_priority_threshold_by_class_name() -> None:
    harness = DeschedulerHarness(
        [], evictor=(DefaultEvictor, {"priorityThreshold": {"name": "important"}}), now=T0
    )
    harness.add(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "important"},
            "value": 500,
        }
    )
    plugin = harness.plugin("DefaultEvictor")
    assert isinstance(plugin, DefaultEvictor)
    assert plugin.filter(_info(_owned("low", priority=100)))
    assert not plugin.filter(_info(_owned("high", priority=500)))


def test_pre_eviction_node_fit_and_namespace_labels() -> None:
    _, plugin = _harness(
        {"nodeFit": True, "namespaceLabelSelector": {"matchLabels": {"team": "a"}}},
        make_node("n1"),
        make_node("n2", taints=["dedicated=x:NoSchedule"]),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "a"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other", "labels": {"team": "b"}}},
    )
    pod = _owned("p", cpu="1")
    assert not plugin.pre_eviction_filter(_info(pod))  # the only other node is tainted
    tolerant = _owned("t", cpu="1", spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]})
    assert plugin.pre_eviction_filter(_info(tolerant))
    too_big = _owned("big", cpu="8", spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]})
    assert not plugin.pre_eviction_filter(_info(too_big))
    elsewhere = _owned("o", namespace="other", spec={"tolerations": [{"operator": "Exists"}]})
    assert not plugin.pre_eviction_filter(_info(elsewhere))


def test_node_fit_needs_a_free_pod_slot_on_the_other_node() -> None:
    # descheduler's fitsRequest: "insufficient pods" when the target has no pod slot left, even for a pod
    # that requests nothing. Koordinator's own NodeFit (the MigrationController's) does not check it.
    harness, plugin = _harness({"nodeFit": True}, make_node("n1"), make_node("n2", pods=1))
    mover = _owned("mover")
    harness.add(mover)
    assert plugin.pre_eviction_filter(_info(mover))  # n2 is empty: one slot
    harness.add(_owned("sitter", node="n2"))
    assert not plugin.pre_eviction_filter(_info(mover))  # n2's only slot is taken
    harness.add(_owned("done", node="n2", phase="Succeeded"))
    assert not plugin.pre_eviction_filter(_info(mover))  # a finished pod holds no slot; the sitter still does


def _anti(
    selector: dict[str, Any] | None, key: str = "kubernetes.io/hostname", **term: Any
) -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": key, **term}
                ]
            }
        }
    }


def test_node_fit_refuses_a_node_whose_pods_match_the_required_anti_affinity() -> None:
    # descheduler v0.35.1 podMatchesInterPodAntiAffinity: a running pod on the target matching one of the
    # mover's required anti-affinity terms, on a node that has the term's topology key.
    harness, plugin = _harness(
        {"nodeFit": True},
        make_node("n1"),
        make_node("n2", labels={"kubernetes.io/hostname": "n2"}),
        _owned("db-0", node="n2", labels={"app": "db"}),
    )
    mover = _owned("db-1", labels={"app": "db"}, spec=_anti({"matchLabels": {"app": "db"}}))
    assert not plugin.pre_eviction_filter(_info(mover))
    # Another topology key that n2 lacks: no conflict.
    other_key = _owned("db-2", labels={"app": "db"}, spec=_anti({"matchLabels": {"app": "db"}}, key="zone"))
    assert plugin.pre_eviction_filter(_info(other_key))
    # The term looks in its own namespaces only (the pod's by default).
    elsewhere = _owned(
        "db-3", labels={"app": "db"}, spec=_anti({"matchLabels": {"app": "db"}}, namespaces=["prod"])
    )
    assert plugin.pre_eviction_filter(_info(elsewhere))
    # A nil selector selects nothing; a pod of the same name is not a conflict.
    assert plugin.pre_eviction_filter(_info(_owned("db-4", spec=_anti(None))))
    assert plugin.pre_eviction_filter(
        _info(_owned("db-0", node="n1", spec=_anti({"matchLabels": {"app": "db"}})))
    )
    # Once db-0 has finished it holds nothing.
    harness.cluster.patch("Pod", "db-0", "default", {"status": {"phase": "Succeeded"}}, status=True)
    assert plugin.pre_eviction_filter(_info(mover))


def test_evict_uses_the_eviction_api_and_records_the_reason() -> None:
    harness, plugin = _harness({}, make_node("n1"), _owned("p"))
    assert plugin.evict(_info(_owned("p")), EvictOptions("LowNodeLoad", "node is overutilized"))
    assert harness.cluster.try_get("Pod", "p", "default") is None
    (record,) = harness.cluster.evictions
    assert (record.reason, record.requested_by) == ("node is overutilized", "LowNodeLoad")
    assert [(e.reason, e.message) for e in harness.cluster.events if e.reason == "Descheduled"] == [
        ("Descheduled", "pod evicted by node is overutilized")
    ]


def test_evict_refused_by_pdb_keeps_the_pod() -> None:
    harness, plugin = _harness(
        {},
        make_node("n1"),
        _owned("p", labels={"app": "db"}),
        make_pdb("db", match_labels={"app": "db"}, min_available=1),
    )
    with pytest.raises(EvictionFailed, match="disruption budget"):
        plugin.evict(_info(_owned("p")), EvictOptions("LowNodeLoad", "overloaded"))
    assert harness.cluster.try_get("Pod", "p", "default") is not None
    with pytest.raises(EvictionFailed, match="not found"):
        plugin.evict(_info(_owned("gone")), EvictOptions("LowNodeLoad", "overloaded"))


@pytest.mark.parametrize(
    "threshold",
    [{"value": 2_000_000_001}, {"name": "system-node-critical"}],
    ids=["value", "class name"],
)
def test_priority_threshold_above_system_critical_is_refused(threshold: dict[str, Any]) -> None:
    # GetPriorityValueFromPriorityThreshold refuses a threshold above SystemCriticalPriority, so New fails;
    # system-node-critical (2000001000) is the one built-in class that can trip it by name.
    harness = DeschedulerHarness([], evictor=(DefaultEvictor, {"priorityThreshold": threshold}), now=T0)
    harness.add(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "system-node-critical"},
            "value": 2_000_001_000,
        }
    )
    with pytest.raises(KoordError, match="priority threshold can't be greater than 2000000000"):
        harness.plugin("DefaultEvictor")


def test_priority_threshold_at_system_critical_is_accepted() -> None:
    _, plugin = _harness({"priorityThreshold": {"value": 2_000_000_000}})
    assert plugin.filter(_info(_owned("p", priority=1_999_999_999)))


def test_priority_threshold_is_not_resolved_when_critical_pods_are_evictable() -> None:
    # Upstream resolves the threshold only inside the SystemCriticalPods protection.
    _, plugin = _harness({"evictSystemCriticalPods": True, "priorityThreshold": {"value": 2_000_000_001}})
    assert plugin.filter(_info(_owned("p", priority=2_000_000_000)))


def test_namespace_label_selector_needs_match_labels() -> None:
    # Upstream builds (and consults) the namespace index only when matchLabels is non-empty: a selector of
    # matchExpressions alone filters nothing, and with matchLabels the expressions count too.
    namespaces = (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "a"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other", "labels": {"team": "b"}}},
    )
    expressions_only = {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}
    _, plugin = _harness({"namespaceLabelSelector": expressions_only}, *namespaces)
    assert plugin.pre_eviction_filter(_info(_owned("o", namespace="other")))
    assert plugin.pre_eviction_filter(_info(_owned("d")))

    both = {
        "matchLabels": {"team": "a"},
        "matchExpressions": [{"key": "tier", "operator": "Exists"}],
    }
    _, plugin = _harness({"namespaceLabelSelector": both}, *namespaces)
    assert not plugin.pre_eviction_filter(_info(_owned("d")))  # team=a but no tier label
