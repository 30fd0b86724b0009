"""``--anonymize`` on the components' ConfigMaps: names that refer to hashed objects follow them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from koord_framework.cluster.manifests import validate_object
from koord_framework.descheduler.selectors import parse_selector
from koord_framework.snapshot import Anonymizer
from koord_framework.snapshot.anonymize_config import rewrite_selector_string

SECRETS = ("payments", "team-pay", "payments-high", "pool-pay", "gpu-pool")

DESCHEDULER = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
profiles:
- name: koord-descheduler
  pluginConfig:
  - name: MigrationController
    args:
      kind: MigrationControllerArgs
      nodeSelector: "pool in (payments, gpu-pool),!drain,kubernetes.io/os=linux"
      namespaces:
        exclude: [kube-system, payments]
      priorityThreshold:
        name: payments-high
  - name: LowNodeLoad
    args:
      kind: LowNodeLoadArgs
      evictableNamespaces:
        include: [team-pay]
      nodePools:
      - name: pool-pay
        nodeSelector:
          matchLabels: {pool: payments}
"""

SCHEDULER = """\
apiVersion: kubescheduler.config.k8s.io/v1beta2
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  pluginConfig:
  - name: ElasticQuota
    args:
      quotaGroupNamespace: team-pay
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - {key: pool, operator: In, values: [payments]}
"""

UNTOUCHED = """\
# thresholds only: nothing here names an object
apiVersion: descheduler/v1alpha2
kind: DeschedulerConfiguration
deschedulingInterval: 10s
"""


def _config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "koordinator-system"},
        "data": data,
    }


def _slo() -> dict[str, Any]:
    colocation = {
        "enable": True,
        "nodeConfigs": [
            {
                "name": "pool-pay",
                "nodeSelector": {"matchLabels": {"pool": "payments", "node.koordinator.sh/kind": "big"}},
                "enable": False,
            }
        ],
    }
    threshold = {
        "clusterStrategy": {"enable": True},
        "nodeStrategies": [
            {
                "name": "gpu-pool",
                "nodeSelector": {
                    "matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu-pool"]}]
                },
                "cpuSuppressThresholdPercent": 50,
            }
        ],
    }
    return _config_map(
        "slo-controller-config",
        {
            "colocation-config": json.dumps(colocation),
            "resource-threshold-config": json.dumps(threshold),
            "cpu-burst-config": '{"clusterStrategy": {"policy": "auto"}}',
        },
    )


def test_names_in_the_three_config_maps_follow_the_hashed_objects() -> None:
    a = Anonymizer("salt")
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"pool": "payments"}},
    }
    a.anonymize(node)
    pool = node["metadata"]["labels"]["pool"]
    maps = [
        _config_map("koord-descheduler-config", {"koord-descheduler-config": DESCHEDULER}),
        _config_map("koord-scheduler-config", {"koord-scheduler-config": SCHEDULER}),
        _slo(),
    ]
    for cm in maps:
        a.anonymize(cm)
        validate_object(cm, "ConfigMap", None, "", None)
        text = json.dumps(cm)
        for secret in SECRETS:
            assert secret not in text, (cm["metadata"]["name"], secret)
    deschedule = yaml.safe_load(maps[0]["data"]["koord-descheduler-config"])
    migration, lownodeload = (p["args"] for p in deschedule["profiles"][0]["pluginConfig"])
    assert migration["namespaces"]["exclude"] == ["kube-system", a.word("payments")]
    assert migration["priorityThreshold"]["name"] == a.word("payments-high")
    assert parse_selector(migration["nodeSelector"]).matches({"pool": pool, "kubernetes.io/os": "linux"})
    assert "kubernetes.io/os=linux" in migration["nodeSelector"] and "!drain" in migration["nodeSelector"]
    assert lownodeload["evictableNamespaces"]["include"] == [a.word("team-pay")]
    assert lownodeload["nodePools"][0]["nodeSelector"]["matchLabels"] == {"pool": pool}
    assert lownodeload["nodePools"][0]["name"] == a.word("pool-pay")
    schedule = yaml.safe_load(maps[1]["data"]["koord-scheduler-config"])
    quota, affinity = (p["args"] for p in schedule["profiles"][0]["pluginConfig"])
    assert quota["quotaGroupNamespace"] == a.word("team-pay")
    term = affinity["addedAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"][0]["values"] == [pool]
    assert schedule["profiles"][0]["schedulerName"] == "koord-scheduler"
    colocation = json.loads(maps[2]["data"]["colocation-config"])
    assert colocation["nodeConfigs"][0]["nodeSelector"]["matchLabels"] == {
        "pool": pool,
        "node.koordinator.sh/kind": "big",  # Koordinator's own key: meaning, kept
    }
    assert colocation["nodeConfigs"][0]["name"] == a.word("pool-pay")
    threshold = json.loads(maps[2]["data"]["resource-threshold-config"])
    assert threshold["nodeStrategies"][0]["nodeSelector"]["matchExpressions"][0]["values"] == [
        a.word("gpu-pool")
    ]
    assert maps[2]["data"]["cpu-burst-config"] == '{"clusterStrategy": {"policy": "auto"}}'  # nothing named


def test_a_config_naming_nothing_keeps_its_text_and_other_config_maps_stay() -> None:
    a = Anonymizer()
    cm = _config_map("koord-descheduler-config", {"koord-descheduler-config": UNTOUCHED})
    assert a.anonymize(cm)["data"]["koord-descheduler-config"] == UNTOUCHED
    broken = _config_map("slo-controller-config", {"colocation-config": "{not json"})
    assert a.anonymize(broken)["data"]["colocation-config"] == "{not json"
    other = _config_map("app-settings", {"x": '{"namespaces": ["payments"]}'})
    assert a.anonymize(other)["data"]["x"] == '{"namespaces": ["payments"]}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", "a=B"),
        ("a==b,c!=d", "a==B,c!=D"),
        ("a in (b, c),!d,e", "a in (B,C),!d,e"),
        ("a notin (b)", "a notin (B)"),
        ("", ""),
    ],
)
def test_selector_strings_rewrite_values_only(text: str, expected: str) -> None:
    assert rewrite_selector_string(text, lambda _k, v: v.upper()) == expected


def test_a_selector_string_it_cannot_read_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot read"):
        rewrite_selector_string("a in b)", lambda _k, v: v)
