"""NodeSLO: Koordinator's defaults and the koordlet's merge of a node's spec over them."""

from __future__ import annotations

import pytest

from koord_framework.errors import ValidationError
from koord_framework.koordlet.nodeslo import (
    CPUBurstPolicy,
    CPUSuppressPolicy,
    NodeSLO,
    default_node_slo_spec,
    is_feature_disabled,
    merge_node_slo_spec,
)


def test_defaults() -> None:
    slo = NodeSLO.default("n")
    t = slo.threshold
    assert (
        t.enable,
        t.cpu_suppress_threshold_percent,
        t.cpu_suppress_policy,
        t.memory_evict_threshold_percent,
    ) == (
        False,
        65,
        CPUSuppressPolicy.CPUSET,
        70,
    )
    assert t.cpu_evict_policy is not None and t.cpu_evict_policy.value == "evictByRealLimit"
    b = slo.cpu_burst
    assert (b.policy, b.cpu_burst_percent, b.cfs_quota_burst_percent, b.cfs_quota_burst_period_seconds) == (
        CPUBurstPolicy.NONE,
        1000,
        300,
        -1,
    )
    assert b.share_pool_threshold_percent == 50
    assert slo.merged["systemStrategy"] == {"totalNetworkBandwidth": "0"}
    assert default_node_slo_spec()["resourceQOSStrategy"]["beClass"]["resctrlQOS"]["catRangeEndPercent"] == 30


def test_node_spec_overlays_defaults_field_by_field() -> None:
    slo = NodeSLO.from_spec(
        {
            "resourceUsedThresholdWithBE": {
                "enable": True,
                "cpuSuppressThresholdPercent": 50,
                "cpuSuppressPolicy": "",  # what Go would omit: the default stays
                "memoryEvictLowerPercent": None,
            },
            "cpuBurstStrategy": {"policy": "auto"},
        }
    )
    t = slo.threshold
    assert (t.enable, t.cpu_suppress_threshold_percent, t.cpu_suppress_policy) == (
        True,
        50,
        CPUSuppressPolicy.CPUSET,
    )
    assert t.memory_evict_threshold_percent == 70 and t.memory_evict_lower_percent is None
    assert slo.cpu_burst.policy is CPUBurstPolicy.AUTO and slo.cpu_burst.cpu_burst_percent == 1000


def test_zero_is_a_value_not_an_omission() -> None:
    t = NodeSLO.from_spec({"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 0}}).threshold
    assert t.cpu_suppress_threshold_percent == 0


def test_disabled_qos_classes_get_none_values() -> None:
    merged = merge_node_slo_spec({"resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}}})
    q = merged["resourceQOSStrategy"]
    assert q["lsClass"]["cpuQOS"] == {
        "enable": True,
        "groupIdentity": 2,
        "schedIdle": 0,
        "coreExpeller": True,
    }
    assert q["beClass"]["cpuQOS"] == {
        "enable": False,
        "groupIdentity": 0,
        "schedIdle": 0,
        "coreExpeller": False,
    }
    assert q["beClass"]["resctrlQOS"]["catRangeEndPercent"] == 100  # "none" resctrl while disabled
    assert q["lsrClass"]["memoryQOS"]["wmarkScalePermill"] == 50
    assert q["systemClass"]["cpuQOS"]["groupIdentity"] == 0 and q["systemClass"]["cpuQOS"]["enable"] is False


def test_extensions_merge_only_registered_keys_and_host_apps_pass_through() -> None:
    spec = {
        "extensions": {"known": {"a": 2}, "unknown": {"b": 1}},
        "hostApplications": [{"name": "nginx", "qos": "LS", "priority": "koord-prod"}],
    }
    merged = merge_node_slo_spec(spec, default_extensions={"known": {"a": 1, "c": 3}})
    assert merged["extensions"] == {"known": {"a": 2, "c": 3}}
    slo = NodeSLO.from_spec(spec)
    assert [a.name for a in slo.host_applications] == ["nginx"]
    assert slo.spec.extensions == {}


def test_invalid_values_name_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        NodeSLO.from_manifest(
            {
                "metadata": {"name": "n1"},
                "spec": {"resourceUsedThresholdWithBE": {"cpuSuppressThresholdPercent": 150}},
            }
        )
    text = str(info.value)
    assert "NodeSLO n1" in text
    assert "resourceUsedThresholdWithBE.cpuSuppressThresholdPercent" in text
    with pytest.raises(ValidationError, match="spec: must be an object"):
        NodeSLO.from_manifest({"metadata": {"name": "n1"}, "spec": [1]})


def test_feature_switch() -> None:
    on = NodeSLO.from_spec({"resourceUsedThresholdWithBE": {"enable": True}})
    off = NodeSLO.default()
    for feature in ("BECPUSuppress", "BECPUEvict", "BEMemoryEvict", "CPUEvict", "MemoryAllocatableEvict"):
        assert not is_feature_disabled(on, feature)
        assert is_feature_disabled(off, feature)
        assert is_feature_disabled(None, feature)
    assert is_feature_disabled(on, "CPUBurst")  # not a threshold feature
