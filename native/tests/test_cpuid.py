"""CPUID answers on this machine, checked against what the kernel derived from the same instruction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

koord_native = pytest.importorskip("koord_native")


def _cpuinfo() -> tuple[str, set[str]]:
    vendor, flags = "", set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id" and not vendor:
            vendor = value.strip()
        elif key.strip() == "flags":
            flags.update(value.split())
    return vendor, flags


def test_vendor_is_the_one_the_kernel_reports() -> None:
    caps = koord_native.rdt_capabilities()
    vendor, _ = _cpuinfo()
    if not caps.cpuid_available:
        assert caps.vendor == "unknown"
        return
    assert caps.vendor == vendor
    assert koord_native.cpu_vendor() == vendor


def test_every_rdt_flag_of_the_kernel_is_backed_by_cpuid() -> None:
    """The kernel sets ``cat_l3``/``mba``/``cqm_*`` from these leaves; it may clear a flag (a boot option, a
    quirk) but never invents one, so each flag it shows must be in CPUID's answer."""
    caps = koord_native.rdt_capabilities()
    _, flags = _cpuinfo()
    if "cat_l3" in flags:
        assert caps.l3_cat is not None
        assert 1 <= caps.l3_cat.cbm_length <= 32
        assert caps.l3_cat.num_closids >= 1
    if "cdp_l3" in flags:
        assert caps.l3_cat is not None and caps.l3_cat.cdp
    if "cat_l2" in flags:
        assert caps.l2_cat is not None
    if "mba" in flags:
        assert caps.mba is not None and caps.mba.max_value > 0
    if "cqm_occup_llc" in flags:
        assert caps.monitoring is not None and caps.monitoring.cmt
    if "cqm_mbm_total" in flags:
        assert caps.monitoring is not None and caps.monitoring.mbm_total
    if "cqm_mbm_local" in flags:
        assert caps.monitoring is not None and caps.monitoring.mbm_local
    # and no allocation without the allocation flag the kernel derives from CPUID.(7,0):EBX[15]
    if "rdt_a" not in flags and "cat_l3" not in flags and "mba" not in flags:
        assert caps.l3_cat is None and caps.mba is None and not caps.supports_resctrl


def test_answer_is_stable_and_serialisable() -> None:
    first = koord_native.rdt_capabilities()
    assert koord_native.rdt_capabilities() == first
    data = first.as_dict()
    assert json.loads(json.dumps(data)) == data
    if first.l3_cat is not None:
        assert int(first.l3_cat.cbm_mask, 16) == (1 << first.l3_cat.cbm_length) - 1


def test_module_prints_the_machine_answer() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "koord_native"], check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(out) == koord_native.rdt_capabilities().as_dict()
