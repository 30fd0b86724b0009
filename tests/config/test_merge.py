"""Default plugins, ``mergePlugins`` and multiPoint expansion, mirroring kube-scheduler's own tests.

``TestMergePlugins`` (pkg/scheduler/apis/config/v1/default_plugins_test.go) and
``TestNewFrameworkMultiPointExpansion`` (pkg/scheduler/framework/runtime/framework_test.go) are re-stated
case by case; then the platform's own rule: defaults that are not installed are skipped, named plugins
are not.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from koord_framework.config.common import PluginRef, PluginSet
from koord_framework.config.scheduler import (
    DEFAULT_PLUGINS,
    EXTENSION_POINTS,
    KubeSchedulerProfile,
    Plugins,
    effective_plugins,
    merge_plugins,
    resolve_plugins,
)
from koord_framework.errors import ValidationError
from koord_framework.registry import PluginRegistry


def p(name: str, weight: int | None = None) -> PluginRef:
    return PluginRef(name=name, weight=weight)


def ps(enabled: list[PluginRef] | None = None, disabled: list[str] | None = None) -> PluginSet:
    return PluginSet(enabled=enabled or [], disabled=[PluginRef(name=n) for n in disabled or []])


MERGE_CASES: list[tuple[str, Plugins | None, Plugins, Plugins]] = [
    # (name, custom, default, expected) — kube-scheduler's TestMergePlugins
    (
        "AppendCustomPlugin",
        Plugins(filter=ps([p("CustomPlugin")])),
        Plugins(filter=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
        Plugins(filter=ps([p("DefaultPlugin1"), p("DefaultPlugin2"), p("CustomPlugin")])),
    ),
    (
        "InsertAfterDefaultPlugins2",
        Plugins(filter=ps([p("CustomPlugin"), p("DefaultPlugin2")], ["DefaultPlugin2"])),
        Plugins(filter=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
        Plugins(filter=ps([p("DefaultPlugin1"), p("CustomPlugin"), p("DefaultPlugin2")], ["DefaultPlugin2"])),
    ),
    (
        "InsertBeforeAllPlugins",
        Plugins(filter=ps([p("CustomPlugin"), p("DefaultPlugin1"), p("DefaultPlugin2")], ["*"])),
        Plugins(filter=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
        Plugins(filter=ps([p("CustomPlugin"), p("DefaultPlugin1"), p("DefaultPlugin2")], ["*"])),
    ),
    (
        "ReorderDefaultPlugins",
        Plugins(filter=ps([p("DefaultPlugin2"), p("DefaultPlugin1")], ["*"])),
        Plugins(filter=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
        Plugins(filter=ps([p("DefaultPlugin2"), p("DefaultPlugin1")], ["*"])),
    ),
    (
        "ApplyNilCustomPlugin",
        None,
        Plugins(filter=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
        Plugins(filter=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
    ),
    (
        "CustomPluginOverrideDefaultPlugin",
        Plugins(filter=ps([p("Plugin1", 2), p("Plugin3", 3)])),
        Plugins(filter=ps([p("Plugin1"), p("Plugin2"), p("Plugin3")])),
        Plugins(filter=ps([p("Plugin1", 2), p("Plugin2"), p("Plugin3", 3)])),
    ),
    (
        "OrderPreserveAfterOverride",
        Plugins(filter=ps([p("Plugin2", 2), p("Plugin1", 1)])),
        Plugins(filter=ps([p("Plugin1"), p("Plugin2"), p("Plugin3")])),
        Plugins(filter=ps([p("Plugin1", 1), p("Plugin2", 2), p("Plugin3")])),
    ),
    (
        "RepeatedCustomPlugin",
        Plugins(filter=ps([p("Plugin1"), p("Plugin2", 2), p("Plugin3"), p("Plugin2", 4)])),
        Plugins(filter=ps([p("Plugin1"), p("Plugin2"), p("Plugin3")])),
        Plugins(filter=ps([p("Plugin1"), p("Plugin2", 4), p("Plugin3"), p("Plugin2", 2)])),
    ),
    (
        "Append custom MultiPoint plugin",
        Plugins(multi_point=ps([p("CustomPlugin")])),
        Plugins(multi_point=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
        Plugins(multi_point=ps([p("DefaultPlugin1"), p("DefaultPlugin2"), p("CustomPlugin")])),
    ),
    (
        "Append disabled Multipoint plugins",
        Plugins(
            multi_point=ps([p("CustomPlugin"), p("CustomPlugin2")], ["DefaultPlugin2"]),
            score=ps(disabled=["CustomPlugin2"]),
        ),
        Plugins(multi_point=ps([p("DefaultPlugin1"), p("DefaultPlugin2")])),
        Plugins(
            multi_point=ps([p("DefaultPlugin1"), p("CustomPlugin"), p("CustomPlugin2")], ["DefaultPlugin2"]),
            score=ps(disabled=["CustomPlugin2"]),
        ),
    ),
    (
        "override default MultiPoint plugins with custom value",
        Plugins(multi_point=ps([p("DefaultPlugin", 5)])),
        Plugins(multi_point=ps([p("DefaultPlugin")])),
        Plugins(multi_point=ps([p("DefaultPlugin", 5)])),
    ),
    (
        "disabled MultiPoint plugin in default set",
        Plugins(multi_point=ps([p("CustomPlugin")])),
        Plugins(multi_point=ps([p("DefaultPlugin")], ["DefaultPlugin2"])),
        Plugins(multi_point=ps([p("DefaultPlugin"), p("CustomPlugin")], ["DefaultPlugin2"])),
    ),
    (
        "disabled MultiPoint plugin in default set for specific extension point",
        Plugins(multi_point=ps([p("CustomPlugin")])),
        Plugins(multi_point=ps([p("DefaultPlugin")]), score=ps(disabled=["DefaultPlugin2"])),
        Plugins(
            multi_point=ps([p("DefaultPlugin"), p("CustomPlugin")]), score=ps(disabled=["DefaultPlugin2"])
        ),
    ),
    (
        "multipoint with only disabled gets merged",
        Plugins(multi_point=ps(disabled=["DefaultPlugin"])),
        Plugins(multi_point=ps([p("DefaultPlugin")])),
        Plugins(multi_point=ps(disabled=["DefaultPlugin"])),
    ),
]


@pytest.mark.parametrize(
    ("custom", "default", "expected"), [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES]
)
def test_merge_plugins_matches_kube_scheduler(
    custom: Plugins | None, default: Plugins, expected: Plugins
) -> None:
    assert merge_plugins(default, custom) == expected


# --- multiPoint expansion: kube-scheduler's TestNewFrameworkMultiPointExpansion --------------------------

ALL_POINTS = [
    "QueueSort",
    "PreFilter",
    "Filter",
    "PostFilter",
    "PreScore",
    "Score",
    "Reserve",
    "Permit",
    "PreBind",
    "Bind",
    "PostBind",
]


@pytest.fixture
def expansion_registry(fakes: ModuleType) -> PluginRegistry:
    make = fakes.make_plugin
    return PluginRegistry.from_classes(
        "scheduler",
        [
            make("test-plugin", ALL_POINTS),
            make("score-plugin-1", ["PreScore", "Score"]),
            make("score-plugin-2", ["Score"]),
            make("score-with-normalize-plugin-1", ["Score"]),
            make("queue-sort-plugin", ["QueueSort"]),
            make("bind-plugin", ["Bind"]),
        ],
    )


T, S1, S2, SN, QS, B = (
    "test-plugin",
    "score-plugin-1",
    "score-plugin-2",
    "score-with-normalize-plugin-1",
    "queue-sort-plugin",
    "bind-plugin",
)


def everywhere(name: str, **override: list[str]) -> dict[str, list[str]]:
    points = {key: [name] for key, point in EXTENSION_POINTS.items() if point in ALL_POINTS}
    points.update(override)
    return points


EXPANSION_CASES: list[tuple[str, Plugins, dict[str, list[str]], dict[str, int]]] = [
    # (name, plugins, expected names per point (others empty), expected score weights)
    ("plugin expansion", Plugins(multi_point=ps([p(T, 5)])), everywhere(T), {T: 5}),
    (
        "disable MultiPoint plugin at some extension points",
        Plugins(multi_point=ps([p(T)]), pre_score=ps(disabled=[T]), score=ps(disabled=[T])),
        everywhere(T, preScore=[], score=[]),
        {},
    ),
    (
        "Multiple MultiPoint plugins",
        Plugins(multi_point=ps([p(T), p(S1)])),
        everywhere(T, preScore=[T, S1], score=[T, S1]),
        {T: 1, S1: 1},
    ),
    (
        "disable MultiPoint extension",
        Plugins(multi_point=ps([p(T), p(S1)]), pre_score=ps(disabled=["*"])),
        everywhere(T, preScore=[], score=[T, S1]),
        {T: 1, S1: 1},
    ),
    (
        "Reorder MultiPoint plugins (specified extension takes precedence)",
        Plugins(multi_point=ps([p(SN), p(T), p(S1)]), score=ps([p(S1), p(T)])),
        everywhere(T, preScore=[T, S1], score=[S1, T, SN]),
        {S1: 1, T: 1, SN: 1},
    ),
    (
        "Reorder MultiPoint plugins (specified extension only takes precedence when it exists in MultiPoint)",
        Plugins(multi_point=ps([p(T), p(S1)]), score=ps([p(SN), p(S1), p(T)])),
        everywhere(T, preScore=[T, S1], score=[S1, T, SN]),
        {S1: 1, T: 1, SN: 1},
    ),
    (
        "Override MultiPoint plugins weights",
        Plugins(multi_point=ps([p(T), p(S1)]), score=ps([p(S1, 5), p(T, 3)])),
        everywhere(T, preScore=[T, S1], score=[S1, T]),
        {S1: 5, T: 3},
    ),
    (
        "disable and enable MultiPoint plugins with '*'",
        Plugins(multi_point=ps([p(QS), p(B), p(S1)], ["*"])),
        {"queueSort": [QS], "preScore": [S1], "score": [S1], "bind": [B]},
        {S1: 1},
    ),
    (
        "disable and enable MultiPoint plugin by name",
        Plugins(multi_point=ps([p(B), p(QS), p(S1)], [S1])),
        {"queueSort": [QS], "preScore": [S1], "score": [S1], "bind": [B]},
        {S1: 1},
    ),
    (
        "Override MultiPoint plugins weights and avoid a plugin being loaded multiple times",
        Plugins(multi_point=ps([p(T), p(S1)]), score=ps([p(S1, 5), p(S2, 5), p(T, 3)])),
        everywhere(T, preScore=[T, S1], score=[S1, T, S2]),
        {S1: 5, T: 3, S2: 5},
    ),
]


@pytest.mark.parametrize(
    ("plugins", "expected", "weights"), [c[1:] for c in EXPANSION_CASES], ids=[c[0] for c in EXPANSION_CASES]
)
def test_multipoint_expansion_matches_kube_scheduler(
    plugins: Plugins,
    expected: dict[str, list[str]],
    weights: dict[str, int],
    expansion_registry: PluginRegistry,
) -> None:
    eff, problems = resolve_plugins(
        KubeSchedulerProfile(plugins=plugins), expansion_registry, defaults=Plugins()
    )
    assert problems == []
    assert {k: list(v) for k, v in eff.points.items()} == {
        key: expected.get(key, []) for key in EXTENSION_POINTS
    }
    assert dict(eff.score_weights) == weights


def test_multipoint_double_registration_is_refused(expansion_registry: PluginRegistry) -> None:
    profile = KubeSchedulerProfile(plugins=Plugins(multi_point=ps([p(T), p(T)])))
    _, problems = resolve_plugins(profile, expansion_registry, defaults=Plugins())
    assert [(x.path, x.message) for x in problems] == [
        (
            "profiles[0].plugins.multiPoint.enabled[1]",
            'plugin "test-plugin" is enabled more than once in multiPoint',
        )
    ]


# --- the default set against installed plugins ----------------------------------------------------------

K8S_DEFAULTS: dict[str, list[str]] = {
    "SchedulingGates": ["PreEnqueue"],
    "PrioritySort": ["QueueSort"],
    "NodeUnschedulable": ["Filter"],
    "NodeName": ["Filter"],
    "TaintToleration": ["Filter", "PreScore", "Score"],
    "NodeAffinity": ["PreFilter", "Filter", "PreScore", "Score"],
    "NodePorts": ["PreFilter", "Filter"],
    "NodeResourcesFit": ["PreFilter", "Filter", "PreScore", "Score"],
    "VolumeRestrictions": ["PreFilter", "Filter"],
    "NodeVolumeLimits": ["PreFilter", "Filter"],
    "VolumeBinding": ["PreFilter", "Filter", "Reserve", "PreBind", "PreScore", "Score"],
    "VolumeZone": ["PreFilter", "Filter"],
    "PodTopologySpread": ["PreFilter", "Filter", "PreScore", "Score"],
    "InterPodAffinity": ["PreFilter", "Filter", "PreScore", "Score"],
    "DynamicResources": ["PreEnqueue", "PreFilter", "Filter", "PostFilter", "Reserve", "PreBind"],
    "DefaultPreemption": ["PostFilter"],
    "NodeResourcesBalancedAllocation": ["PreScore", "Score"],
    "ImageLocality": ["Score"],
    "DefaultBinder": ["Bind"],
}


def k8s_registry(
    fakes: ModuleType, names: list[str] | None = None, extra: list[Any] | None = None
) -> PluginRegistry:
    wanted = names if names is not None else list(K8S_DEFAULTS)
    classes = [fakes.make_plugin(n, K8S_DEFAULTS[n]) for n in wanted]
    return PluginRegistry.from_classes("scheduler", classes + (extra or []))


def test_default_plugin_set_is_kube_schedulers() -> None:
    entries = [(x.name, x.weight) for x in DEFAULT_PLUGINS.multi_point.enabled]
    assert entries == [
        ("SchedulingGates", None),
        ("PrioritySort", None),
        ("NodeUnschedulable", None),
        ("NodeName", None),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodePorts", None),
        ("NodeResourcesFit", 1),
        ("VolumeRestrictions", None),
        ("NodeVolumeLimits", None),
        ("VolumeBinding", None),
        ("VolumeZone", None),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("DynamicResources", None),
        ("DefaultPreemption", None),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("DefaultBinder", None),
    ]
    for key in EXTENSION_POINTS:
        assert DEFAULT_PLUGINS.at(key) == PluginSet()


def test_default_profile_with_every_default_installed(fakes: ModuleType) -> None:
    eff = effective_plugins(KubeSchedulerProfile(), k8s_registry(fakes))
    assert eff.skipped_defaults == ()
    assert eff.points["preEnqueue"] == ("SchedulingGates", "DynamicResources")
    assert eff.points["queueSort"] == ("PrioritySort",)
    assert eff.points["filter"] == (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
    )
    assert eff.points["postFilter"] == ("DynamicResources", "DefaultPreemption")
    assert eff.points["score"] == (
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    )
    assert dict(eff.score_weights) == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "VolumeBinding": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    assert eff.points["reserve"] == ("VolumeBinding", "DynamicResources")
    assert eff.points["bind"] == ("DefaultBinder",)
    assert eff.points["permit"] == ()
    assert eff.at("Filter") == eff.points["filter"]


def test_defaults_that_are_not_installed_are_skipped_and_reported(fakes: ModuleType) -> None:
    installed = ["PrioritySort", "NodeName", "TaintToleration", "NodeResourcesFit", "DefaultBinder"]
    eff = effective_plugins(KubeSchedulerProfile(), k8s_registry(fakes, installed))
    assert eff.skipped_defaults == (
        "SchedulingGates",
        "NodeUnschedulable",
        "NodeAffinity",
        "NodePorts",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "DefaultPreemption",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    )
    assert eff.points["filter"] == ("NodeName", "TaintToleration", "NodeResourcesFit")
    assert eff.points["score"] == ("TaintToleration", "NodeResourcesFit")
    assert eff.needed == ("PrioritySort", "NodeName", "TaintToleration", "NodeResourcesFit", "DefaultBinder")


def test_a_named_plugin_that_is_not_installed_is_an_error_even_if_it_is_a_default(fakes: ModuleType) -> None:
    installed = ["PrioritySort", "DefaultBinder"]
    profile = KubeSchedulerProfile(plugins=Plugins(multi_point=ps([p("ImageLocality", 4)])))
    with pytest.raises(ValidationError) as info:
        effective_plugins(profile, k8s_registry(fakes, installed), source="p.yaml")
    assert [(x.path, x.message) for x in info.value.problems] == [
        (
            "profiles[0].plugins.multiPoint.enabled[0]",
            'plugin "ImageLocality" is not installed in koord.scheduler.plugins '
            "(installed: DefaultBinder, PrioritySort)",
        )
    ]


def test_reconfiguring_a_default_keeps_its_place_and_takes_the_weight(fakes: ModuleType) -> None:
    profile = KubeSchedulerProfile(plugins=Plugins(multi_point=ps([p("NodeResourcesFit", 7)])))
    eff = effective_plugins(profile, k8s_registry(fakes))
    assert eff.score_weights["NodeResourcesFit"] == 7
    assert eff.points["score"].index("NodeResourcesFit") == 2


def test_disabling_a_default_at_one_point_keeps_it_elsewhere(fakes: ModuleType) -> None:
    profile = KubeSchedulerProfile(plugins=Plugins(score=ps(disabled=["NodeResourcesFit"])))
    eff = effective_plugins(profile, k8s_registry(fakes))
    assert "NodeResourcesFit" not in eff.points["score"]
    assert "NodeResourcesFit" in eff.points["filter"]
    assert "NodeResourcesFit" not in eff.score_weights


def test_disable_star_at_multipoint_drops_every_default(fakes: ModuleType) -> None:
    profile = KubeSchedulerProfile(
        plugins=Plugins(multi_point=ps([p("PrioritySort"), p("DefaultBinder"), p("NodeName")], ["*"]))
    )
    eff = effective_plugins(profile, k8s_registry(fakes))
    assert eff.needed == ("PrioritySort", "DefaultBinder", "NodeName")
    assert eff.points["filter"] == ("NodeName",)
    assert eff.skipped_defaults == ()


def test_specific_point_entry_overrides_a_default_and_runs_first(fakes: ModuleType) -> None:
    profile = KubeSchedulerProfile(plugins=Plugins(score=ps([p("ImageLocality", 9)])))
    eff = effective_plugins(profile, k8s_registry(fakes))
    assert eff.points["score"][0] == "ImageLocality"
    assert eff.score_weights["ImageLocality"] == 9
