"""Every broken profile is refused with a message that names the YAML path of the mistake.

Table-driven: each case is a document, the exact path expected in the error, and a fragment of its message.
"""

from __future__ import annotations

import textwrap

import pytest

from koord_framework.config import load_text
from koord_framework.errors import ValidationError
from koord_framework.registry import PluginRegistry

SCHED = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
DESCHED = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n"
KOORDLET = "apiVersion: koordlet.koordinator.sh/v1alpha1\nkind: KoordletConfiguration\n"


def doc(header: str, body: str) -> str:
    return header + textwrap.dedent(body)


CASES: list[tuple[str, str, str, str]] = [
    # (id, document, exact path, message fragment)
    (
        "removed-v1-field",
        doc(SCHED, "healthzBindAddress: 0.0.0.0:10251\n"),
        "healthzBindAddress",
        "unknown field",
    ),
    (
        "profile-key-typo",
        doc(SCHED, "profiles:\n- schedulerName: a\n  plugin: {}\n"),
        "profiles[0].plugin",
        'did you mean "plugins"?',
    ),
    (
        "extension-point-typo",
        doc(SCHED, "profiles:\n- plugins:\n    filtr:\n      enabled: [{name: LoadAwareScheduling}]\n"),
        "profiles[0].plugins.filtr",
        'did you mean "filter"?',
    ),
    (
        "percentage-as-string",
        doc(SCHED, "percentageOfNodesToScore: '50'\n"),
        "percentageOfNodesToScore",
        "must be an integer, got string '50'",
    ),
    (
        "percentage-out-of-range",
        doc(SCHED, "percentageOfNodesToScore: 150\n"),
        "percentageOfNodesToScore",
        "must be <= 100",
    ),
    (
        "profile-percentage-negative",
        doc(SCHED, "profiles:\n- percentageOfNodesToScore: -1\n"),
        "profiles[0].percentageOfNodesToScore",
        "must be >= 0",
    ),
    ("parallelism-zero", doc(SCHED, "parallelism: 0\n"), "parallelism", "must be > 0"),
    (
        "max-backoff-below-initial",
        doc(SCHED, "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n"),
        "podMaxBackoffSeconds",
        "greater than or equal to podInitialBackoffSeconds",
    ),
    (
        "weight-as-string",
        doc(
            SCHED,
            "profiles:\n- plugins:\n    score:\n      enabled: [{name: LoadAwareScheduling, weight: high}]\n",
        ),
        "profiles[0].plugins.score.enabled[0].weight",
        "must be an integer, got string 'high'",
    ),
    (
        "weight-negative",
        doc(
            SCHED,
            "profiles:\n- plugins:\n    score:\n      enabled: [{name: LoadAwareScheduling, weight: -3}]\n",
        ),
        "profiles[0].plugins.score.enabled[0].weight",
        "must be >= 0",
    ),
    (
        "enabled-plugin-not-installed",
        doc(
            SCHED,
            "profiles:\n- plugins:\n    filter:\n"
            "      enabled: [{name: NodeName}, {name: LoadAwareSchedulng}]\n",
        ),
        "profiles[0].plugins.filter.enabled[1]",
        'plugin "LoadAwareSchedulng" is not installed in '
        'koord.scheduler.plugins; did you mean "LoadAwareScheduling"?',
    ),
    (
        "pluginconfig-not-installed",
        doc(SCHED, "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n  - name: Foo\n    args: {}\n"),
        "profiles[0].pluginConfig[Foo]",
        'plugin "Foo" is not installed',
    ),
    (
        "args-out-of-range",
        doc(
            SCHED,
            """\
            profiles:
            - pluginConfig:
              - name: LoadAwareScheduling
                args:
                  usageThresholds: {cpu: 150, memory: 90}
            """,
        ),
        "profiles[0].pluginConfig[LoadAwareScheduling].args.usageThresholds.cpu",
        "must be <= 100",
    ),
    (
        "args-unknown-key",
        doc(
            SCHED,
            "profiles:\n- pluginConfig:\n  - name: LoadAwareScheduling\n"
            "    args: {usageThreshold: {cpu: 50}}\n",
        ),
        "profiles[0].pluginConfig[LoadAwareScheduling].args.usageThreshold",
        'unknown field; did you mean "usageThresholds"?',
    ),
    (
        "args-of-another-plugin",
        doc(
            SCHED,
            "profiles:\n- pluginConfig:\n  - name: LoadAwareScheduling\n"
            "    args: {kind: NodeResourcesFitArgs}\n",
        ),
        "profiles[0].pluginConfig[LoadAwareScheduling].args.kind",
        'must be "LoadAwareSchedulingArgs"',
    ),
    (
        "args-wrong-type",
        doc(
            SCHED,
            "profiles:\n- pluginConfig:\n  - name: LoadAwareScheduling\n"
            "    args: {nodeMetricExpirationSeconds: soon}\n",
        ),
        "profiles[0].pluginConfig[LoadAwareScheduling].args.nodeMetricExpirationSeconds",
        "must be an integer, got string 'soon'",
    ),
    (
        "args-not-a-mapping",
        doc(SCHED, "profiles:\n- pluginConfig:\n  - name: LoadAwareScheduling\n    args: [1, 2]\n"),
        "profiles[0].pluginConfig[LoadAwareScheduling].args",
        "must be a mapping, got a list",
    ),
    (
        "duplicate-pluginconfig",
        doc(SCHED, "profiles:\n- pluginConfig:\n  - name: ElasticQuota\n  - name: ElasticQuota\n"),
        "profiles[0].pluginConfig[1]",
        'duplicate config for plugin "ElasticQuota" (also pluginConfig[0])',
    ),
    (
        "plugin-at-wrong-point",
        doc(SCHED, "profiles:\n- plugins:\n    filter:\n      enabled: [{name: PrioritySort}]\n"),
        "profiles[0].plugins.filter.enabled[0]",
        'plugin "PrioritySort" does not implement Filter (it implements: QueueSort)',
    ),
    (
        "plugin-twice-at-a-point",
        doc(
            SCHED,
            "profiles:\n- plugins:\n    filter:\n"
            "      enabled: [{name: LoadAwareScheduling}, {name: LoadAwareScheduling}]\n",
        ),
        "profiles[0].plugins.filter.enabled[1]",
        "enabled more than once at filter",
    ),
    (
        "no-queue-sort",
        doc(SCHED, "profiles:\n- plugins:\n    queueSort:\n      disabled: [{name: '*'}]\n"),
        "profiles[0].plugins.queueSort",
        "exactly one queue sort plugin is required, got 0",
    ),
    (
        "two-queue-sorts",
        doc(SCHED, "profiles:\n- plugins:\n    queueSort:\n      enabled: [{name: Coscheduling}]\n"),
        "profiles[0].plugins.queueSort",
        "exactly one queue sort plugin is required, got 2 (PrioritySort, Coscheduling)",
    ),
    (
        "no-bind",
        doc(SCHED, "profiles:\n- plugins:\n    bind:\n      disabled: [{name: '*'}]\n"),
        "profiles[0].plugins.bind",
        "at least one bind plugin is required",
    ),
    (
        "duplicate-scheduler-name",
        doc(SCHED, "profiles:\n- schedulerName: a\n- schedulerName: a\n"),
        "profiles[1].schedulerName",
        'duplicate "a" (also profiles[0])',
    ),
    (
        "unnamed-second-profile",
        doc(SCHED, "profiles:\n- schedulerName: a\n- {}\n"),
        "profiles[1].schedulerName",
        "required when there is more than one profile",
    ),
    (
        "queue-sort-differs-between-profiles",
        doc(
            SCHED,
            """\
            profiles:
            - schedulerName: a
            - schedulerName: b
              plugins:
                queueSort:
                  disabled: [{name: '*'}]
                  enabled: [{name: Coscheduling}]
            """,
        ),
        "profiles[1].plugins.queueSort",
        "must be the same for all profiles",
    ),
    (
        "duration-without-unit",
        doc(SCHED, "leaderElection:\n  leaseDuration: '10'\n"),
        "leaderElection.leaseDuration",
        'missing unit in duration "10"',
    ),
    (
        "duration-as-number",
        doc(SCHED, "leaderElection:\n  retryPeriod: 2\n"),
        "leaderElection.retryPeriod",
        "must be a duration string",
    ),
    (
        "lease-shorter-than-renew",
        doc(SCHED, "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n"),
        "leaderElection.leaseDuration",
        "must be greater than renewDeadline",
    ),
    (
        "lock-not-leases",
        doc(SCHED, "leaderElection:\n  resourceLock: endpoints\n"),
        "leaderElection.resourceLock",
        'must be "leases"',
    ),
    (
        "old-api-version",
        "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n",
        "apiVersion",
        "is not supported for KubeSchedulerConfiguration; use 'kubescheduler.config.k8s.io/v1'",
    ),
    (
        "removed-plugin",
        doc(SCHED, "profiles:\n- plugins:\n    filter:\n      enabled: [{name: EBSLimits}]\n"),
        "profiles[0].plugins.filter.enabled[0]",
        "invalid in kubescheduler.config.k8s.io/v1",
    ),
    (
        "multipoint-duplicate",
        doc(
            SCHED,
            "profiles:\n- plugins:\n    multiPoint:\n"
            "      enabled: [{name: Reservation}, {name: Reservation}]\n",
        ),
        "profiles[0].plugins.multiPoint.enabled[1]",
        'plugin "Reservation" is enabled more than once in multiPoint',
    ),
    (
        "plugins-is-a-list",
        doc(SCHED, "profiles:\n- plugins: [filter]\n"),
        "profiles[0].plugins",
        "must be a mapping, got a list",
    ),
    (
        "plugin-entry-without-name",
        doc(SCHED, "profiles:\n- plugins:\n    filter:\n      enabled: [{weight: 2}]\n"),
        "profiles[0].plugins.filter.enabled[0].name",
        "required field is missing",
    ),
    (
        "extender-without-weight",
        doc(SCHED, "extenders:\n- urlPrefix: http://127.0.0.1:8888\n  prioritizeVerb: prioritize\n"),
        "extenders[0].weight",
        "must have a positive weight",
    ),
    (
        "required-args-without-pluginconfig",
        doc(SCHED, "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NeedsTarget}]\n"),
        "profiles[0].pluginConfig[NeedsTarget].args.target",
        "required field is missing (plugin NeedsTarget has no pluginConfig entry)",
    ),
    (
        "snake-case-key",
        doc(SCHED, "profiles:\n- scheduler_name: a\n"),
        "profiles[0].scheduler_name",
        'did you mean "schedulerName"?',
    ),
    (
        "boolean-as-string",
        doc(SCHED, "delayCacheUntilActive: 'true'\n"),
        "delayCacheUntilActive",
        "must be true or false, got string 'true'",
    ),
    (
        "configmap-data-not-a-string",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
        "data:\n  config:\n    kind: KubeSchedulerConfiguration\n",
        "data.config",
        "must be a string holding a YAML document, got a mapping",
    ),
    (
        "configmap-without-config",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: 'x: 1'\n  b: 'y: 2'\n",
        "data",
        "none of the keys (a, b) holds a",
    ),
    (
        "queue-sort-args-differ-between-profiles",
        doc(
            SCHED,
            """\
            profiles:
            - schedulerName: a
              plugins: {queueSort: {disabled: [{name: '*'}], enabled: [{name: SortByAge}]}}
            - schedulerName: b
              plugins: {queueSort: {disabled: [{name: '*'}], enabled: [{name: SortByAge}]}}
              pluginConfig:
              - {name: SortByAge, args: {oldestFirst: false}}
            """,
        ),
        "profiles[1].pluginConfig[SortByAge].args",
        "queueSort args must be the same for all profiles",
    ),
    (
        "configmap-wrong-api-version",
        "apiVersion: v2\nkind: ConfigMap\ndata:\n  c: 'kind: KoordletConfiguration'\n",
        "apiVersion",
        'a ConfigMap must have apiVersion "v1"',
    ),
    (
        "configmap-empty",
        "apiVersion: v1\nkind: ConfigMap\ndata: {}\n",
        "data",
        "the ConfigMap holds no configuration",
    ),
    (
        "configmap-holding-two-configurations",
        "apiVersion: v1\nkind: ConfigMap\ndata:\n"
        "  a: 'kind: KoordletConfiguration'\n  b: 'kind: DeschedulerConfiguration'\n",
        "data",
        "several keys hold a",
    ),
    (
        "missing-kind",
        "apiVersion: kubescheduler.config.k8s.io/v1\nprofiles: []\n",
        "kind",
        "required: one of KubeSchedulerConfiguration, DeschedulerConfiguration, KoordletConfiguration",
    ),
    # --- descheduler ---
    (
        "two-evict-plugins",
        doc(
            DESCHED, "profiles:\n- name: p\n  plugins:\n    evict:\n      enabled: [{name: DefaultEvictor}]\n"
        ),
        "profiles[0].plugins.evict",
        "only one evict plugin can be enabled, got 2 (MigrationController, DefaultEvictor)",
    ),
    (
        "no-evict-plugin",
        doc(DESCHED, "profiles:\n- plugins:\n    evict:\n      disabled: [{name: '*'}]\n"),
        "profiles[0].plugins.evict",
        "no evict plugin is enabled",
    ),
    (
        "interval-as-number",
        doc(DESCHED, "deschedulingInterval: 10\n"),
        "deschedulingInterval",
        'must be a duration string such as "10s"',
    ),
    (
        "negative-eviction-limit",
        doc(DESCHED, "maxNoOfPodsToEvictPerNode: -1\n"),
        "maxNoOfPodsToEvictPerNode",
        "must be >= 0",
    ),
    (
        "descheduler-plugin-with-weight",
        doc(
            DESCHED, "profiles:\n- plugins:\n    balance:\n      enabled: [{name: LowNodeLoad, weight: 1}]\n"
        ),
        "profiles[0].plugins.balance.enabled[0].weight",
        "unknown field",
    ),
    (
        "selector-in-without-values",
        doc(DESCHED, "nodeSelector:\n  matchExpressions:\n  - {key: pool, operator: In}\n"),
        "nodeSelector.matchExpressions[0].values",
        "values must not be empty",
    ),
    (
        "selector-bad-operator",
        doc(DESCHED, "nodeSelector:\n  matchExpressions:\n  - {key: pool, operator: Is, values: [a]}\n"),
        "nodeSelector.matchExpressions[0].operator",
        "must be one of 'In', 'NotIn', 'Exists' or 'DoesNotExist'",
    ),
    (
        "bind-address-without-port",
        doc(DESCHED, "healthzBindAddress: example\n"),
        "healthzBindAddress",
        "missing port in address",
    ),
    (
        "balance-plugin-as-evictor",
        doc(
            DESCHED,
            "profiles:\n- plugins:\n    evict:\n      disabled: [{name: '*'}]\n"
            "      enabled: [{name: LowNodeLoad}]\n",
        ),
        "profiles[0].plugins.evict.enabled[0]",
        'plugin "LowNodeLoad" does not implement Evict (it implements: Balance)',
    ),
    (
        "two-unnamed-descheduler-profiles",
        doc(DESCHED, "profiles:\n- {}\n- name: b\n"),
        "profiles[0].name",
        "required when there is more than one profile",
    ),
    (
        "migration-args-bad-policy",
        doc(
            DESCHED,
            "profiles:\n- pluginConfig:\n  - name: MigrationController\n    args: {evictionPolicy: Kill}\n",
        ),
        "profiles[0].pluginConfig[MigrationController].args.evictionPolicy",
        "must be one of 'Eviction', 'Delete' or 'SoftEviction', got string 'Kill'",
    ),
    # --- koordlet ---
    (
        "qos-strategy-not-installed",
        doc(KOORDLET, "qosStrategies:\n- name: BECPUSupress\n"),
        "qosStrategies[BECPUSupress].name",
        'did you mean "BECPUSuppress"?',
    ),
    (
        "qos-args-out-of-range",
        doc(KOORDLET, "qosStrategies:\n- name: BECPUSuppress\n  args: {cpuSuppressThresholdPercent: 120}\n"),
        "qosStrategies[BECPUSuppress].args.cpuSuppressThresholdPercent",
        "must be <= 100",
    ),
    (
        "hook-failure-policy",
        doc(KOORDLET, "runtimeHooks:\n  failurePolicy: Abort\n"),
        "runtimeHooks.failurePolicy",
        "must be one of 'Fail' or 'Ignore', got string 'Abort'",
    ),
    (
        "hook-not-installed",
        doc(KOORDLET, "runtimeHooks:\n  enabled: [GroupIdentity, CoreSched]\n"),
        "runtimeHooks.enabled[1]",
        'plugin "CoreSched" is not installed in koord.koordlet.runtimehooks',
    ),
    (
        "relative-host-path",
        doc(KOORDLET, "hostPaths:\n  procRoot: proc\n"),
        "hostPaths.procRoot",
        "must be an absolute path",
    ),
    (
        "zero-collect-interval",
        doc(KOORDLET, "collectResUsedInterval: 0s\n"),
        "collectResUsedInterval",
        "must be greater than 0s",
    ),
    (
        "metrics-address-without-port",
        doc(KOORDLET, "metricsAddress: localhost\n"),
        "metricsAddress",
        "missing port in address",
    ),
    (
        "duplicate-qos-strategy",
        doc(KOORDLET, "qosStrategies:\n- name: BEMemoryEvict\n- name: BEMemoryEvict\n  enabled: false\n"),
        "qosStrategies[1]",
        'duplicate strategy "BEMemoryEvict" (also qosStrategies[0])',
    ),
]


@pytest.mark.parametrize(("text", "path", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_profile_is_refused_naming_its_path(
    text: str, path: str, fragment: str, registries: dict[str, PluginRegistry]
) -> None:
    with pytest.raises(ValidationError) as info:
        load_text(text, "broken.yaml", registries=registries)
    err = info.value
    assert err.source == "broken.yaml"
    at_path = [p.message for p in err.problems if p.path == path]
    assert at_path, f"no problem at {path!r}; got:\n{err}"
    assert any(fragment in m for m in at_path), f"{fragment!r} not in the messages at {path}: {at_path}"
    assert f"  {path}: " in str(err)


def test_there_are_at_least_twenty_five_cases() -> None:
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)


def test_all_problems_are_collected_not_just_the_first(registries: dict[str, PluginRegistry]) -> None:
    text = doc(
        SCHED,
        """\
        parallelism: 0
        leaderElection: {leaseDuration: 1x}
        profiles:
        - schedulerName: a
          plugins:
            filter:
              enabled: [{name: Nope}]
          pluginConfig:
          - name: LoadAwareScheduling
            args: {usageThresholds: {cpu: 101}}
        """,
    )
    with pytest.raises(ValidationError) as info:
        load_text(text, "many.yaml", registries=registries)
    paths = [p.path for p in info.value.problems]
    assert paths == [
        "parallelism",
        "leaderElection.leaseDuration",
        "profiles[0].plugins.filter.enabled[0]",
        "profiles[0].pluginConfig[LoadAwareScheduling].args.usageThresholds.cpu",
    ]


def test_yaml_syntax_error_names_line_and_column(registries: dict[str, PluginRegistry]) -> None:
    text = SCHED + "profiles:\n  - schedulerName: a\n   plugins: {}\n"
    with pytest.raises(ValidationError) as info:
        load_text(text, "syntax.yaml", registries=registries)
    (found,) = info.value.problems
    assert found.path == ""
    assert found.message.startswith("invalid YAML at line 5, column 4:")
    assert str(info.value).startswith("syntax.yaml: 1 problem(s)")


def test_yaml_duplicate_key_is_refused_with_its_line(registries: dict[str, PluginRegistry]) -> None:
    text = SCHED + "parallelism: 4\nparallelism: 8\n"
    with pytest.raises(ValidationError) as info:
        load_text(text, "dup.yaml", registries=registries)
    (found,) = info.value.problems
    assert "found duplicate key 'parallelism'" in found.message
    assert "line 4, column 1" in found.message


def test_syntax_error_inside_configmap_points_into_the_file(registries: dict[str, PluginRegistry]) -> None:
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: ConfigMap
        data:
          koord-scheduler-config: |
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: KubeSchedulerConfiguration
            profiles: [
        """
    )
    with pytest.raises(ValidationError) as info:
        load_text(text, "cm.yaml", registries=registries)
    (found,) = info.value.problems
    assert found.path == "data.koord-scheduler-config"
    assert "invalid YAML at line 8" in found.message


def test_phase_two_runs_on_valid_profiles_when_another_part_is_broken(
    registries: dict[str, PluginRegistry],
) -> None:
    text = doc(
        SCHED,
        """\
        profiles:
        - schedulerName: a
          pluginConfig:
          - {name: LoadAwareScheduling, args: {usageThresholds: {cpu: 200}}}
        - schedulerName: b
          percentageOfNodesToScore: lots
          pluginConfig:
          - {name: LoadAwareScheduling, args: {usageThresholds: {memory: -1}}}
          - {name: Missing}
        """,
    )
    with pytest.raises(ValidationError) as info:
        load_text(text, "partial.yaml", registries=registries)
    paths = [p.path for p in info.value.problems]
    assert paths == [
        "profiles[1].percentageOfNodesToScore",
        "profiles[0].pluginConfig[LoadAwareScheduling].args.usageThresholds.cpu",
        "profiles[1].pluginConfig[LoadAwareScheduling].args.usageThresholds.memory",
        "profiles[1].pluginConfig[Missing]",
    ]
