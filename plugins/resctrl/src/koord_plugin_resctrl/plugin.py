"""``Resctrl``: isolate pods in the last-level cache and memory bandwidth through resctrl (Koordinator's
``RdtResctrl`` feature, ``qosmanager/plugins/resctrl``).

Every tick, when the node has a NodeSLO with a ``resourceQOSStrategy``:

1. **support**: ``cat_l3`` and ``mba`` in ``/proc/cpuinfo`` (decided once, as ``IsSupportResctrl``); resctrl
   mounted (``info/L3/cbm_mask``), else mounted now; the ``LSR``, ``LS`` and ``BE`` groups made;
2. **schemata**: for each group the L3 mask of ``catRangeStartPercent``..``catRangeEndPercent`` of the
   ways of ``cbm_mask`` and the MB value of ``mbaPercent`` by vendor rule, on every L3 cache id of the
   root schemata. The lines that differ from what the kernel shows (compared as numbers: the kernel pads
   masks) are written together in one write, which the kernel applies whole or not at all;
3. **tasks**: the threads of every running or pending pod whose class has ``resctrlQOS.enable`` that are not
   yet in their group's ``tasks`` (LSE/LSR -> LSR, LS -> LS, BE -> BE), sorted, one ``write(2)`` each
   through the shim; a thread that exited meanwhile is skipped and counted;
4. **pods with ``node.koordinator.sh/resctrl``** get their own group ``koordlet-<uid>`` with the schemata of
   the annotation and their threads; the group goes when the pod does (Koordinator's runtime hook does this
   at container start; until that extension point exists, the tick does it).

A failure (a group whose NodeSLO values are wrong, a schemata the kernel refuses) is reported by a decision
naming node, group and field, and the same write is tried again next tick.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from prometheus_client import Counter

from koord_framework.api import qos as qoslib
from koord_framework.cluster.events import BAD_ANNOTATIONS
from koord_framework.cluster.port import EventRecord
from koord_framework.koordlet.cgroups import CgroupError, CgroupVersion
from koord_framework.koordlet.nodeslo import NodeSLO
from koord_framework.koordlet.qos import IntervalArgs, QOSContext, QOSStrategy
from koord_framework.koordlet.states import PodMeta
from koord_framework.koordlet.system import HostReadError, read_resctrl_tasks
from koord_framework.plugin import PluginArgs
from koord_plugin_resctrl.config import (
    ANNOTATION_RESCTRL,
    GROUPS,
    POD_GROUP_PREFIX,
    ConfigError,
    ResctrlConfig,
    ResctrlQOS,
    group_of,
    parse_resctrl_annotation,
    resctrl_qos_of,
)
from koord_plugin_resctrl.host import (
    HostResctrlFS,
    NativeUnavailable,
    ResctrlFS,
    ResctrlNotEnabled,
    SupportReport,
    detect_support,
    ensure_resctrl_enabled,
    l3_cache_count,
    read_cbm_mask,
    root_cache_ids,
)
from koord_plugin_resctrl.schemata import (
    L3_PREFIX,
    MB_PREFIX,
    Schemata,
    SchemataError,
    calculate_cat_l3_mask,
    calculate_mba,
    l3_line,
    mb_line,
    mba_value,
    parse_cbm,
)


class ResctrlArgs(IntervalArgs):
    """Args of ``Resctrl``. The policy comes from the node's NodeSLO (``resourceQOSStrategy.*.resctrlQOS``);
    the interval is Koordinator's ``--reconcile-interval-seconds`` (1 s)."""


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What a tick needs from the host before it writes anything."""

    cbm: int
    l3_num: int
    cache_ids: tuple[int, ...]
    vendor: str


@dataclass(slots=True)
class TickReport:
    """What the last tick did: the schemata it wrote, the threads it moved, what went wrong."""

    schemata_written: dict[str, str] = field(default_factory=dict)
    tasks_written: dict[str, int] = field(default_factory=dict)
    vanished: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    created_groups: list[str] = field(default_factory=list)
    removed_groups: list[str] = field(default_factory=list)


class Resctrl(QOSStrategy[ResctrlArgs]):
    """LLC (CAT) and memory-bandwidth (MBA) isolation by QoS class (Koordinator feature ``RdtResctrl``)."""

    name: ClassVar[str] = "Resctrl"
    Args: ClassVar[type[PluginArgs]] = ResctrlArgs
    feature: ClassVar[str] = "RdtResctrl"

    def __init__(self, args: ResctrlArgs, context: QOSContext, *, fs: ResctrlFS | None = None) -> None:
        super().__init__(args, context)
        self._fs: ResctrlFS | None = fs
        self._fs_problem = ""
        if fs is None:
            try:
                self._fs = HostResctrlFS()
            except NativeUnavailable as err:
                self._fs_problem = str(err)
        self.support: SupportReport | None = None
        """The support decision, made once (like ``IsSupportResctrl``) and then kept."""
        self.last: TickReport = TickReport()
        self._schemata_writes = Counter(
            "koordlet_resctrl_schemata_writes",
            "Schemata writes of resctrl groups by result (written, refused).",
            ["group", "result"],
            registry=context.registry,
        )
        self._tasks = Counter(
            "koordlet_resctrl_tasks",
            "Thread ids written to resctrl groups, by result (written, vanished, failed).",
            ["group", "result"],
            registry=context.registry,
        )

    # --- gating --------------------------------------------------------------------------------------------
    def enabled(self, node_slo: NodeSLO | None) -> bool:
        """The ``RdtResctrl`` feature gate is on by default and not a NodeSLO switch: the tick itself does
        nothing without a NodeSLO, and each class's ``resctrlQOS.enable`` decides whose tasks move."""
        return True

    @property
    def unsupported_reason(self) -> str:
        """Why the strategy does nothing on this node ("" when it works)."""
        if self._fs is None:
            return self._fs_problem
        if self.support is not None and not self.support.supported:
            return "cpu does not support CAT/MBA (cat_l3 and mba not both in /proc/cpuinfo)"
        return ""

    # --- the tick ----------------------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        self.last = report = TickReport()
        ctx = self.context
        slo = ctx.node_slo
        strategy = slo.merged.get("resourceQOSStrategy") if slo is not None else None
        if slo is None or not isinstance(strategy, Mapping):
            self.decide("skipped: no NodeSLO or no resourceQOSStrategy")
            return
        fs = self._fs
        if fs is None:
            self.decide("unsupported: " + self._fs_problem)
            return
        if self.support is None:
            try:
                self.support = detect_support(ctx.host, fs)
            except HostReadError as err:
                self.decide("skipped: cannot check resctrl support", error=str(err))
                return
            self.decide(
                "resctrl supported" if self.support.supported else "resctrl unsupported",
                **self.support.as_dict(),
            )
        if not self.support.supported:
            return
        try:
            if ensure_resctrl_enabled(ctx.host, fs):
                self.decide("mounted resctrl", path=str(ctx.host.resctrl))
        except ResctrlNotEnabled as err:
            self._error(report, f"node {ctx.node_name}: {err}")
            return
        for group in GROUPS:
            self._ensure_group(fs, group, report)
        node = slo.name or ctx.node_name
        configs: dict[str, ResctrlQOS | None] = {}
        for group in GROUPS:
            try:
                configs[group] = resctrl_qos_of(strategy, group, node)
            except ConfigError as err:
                configs[group] = None
                self._error(report, str(err))
        facts = self._host_facts(report)
        if facts is not None:
            for group in GROUPS:
                cfg = configs[group]
                if cfg is not None:
                    self._apply_group_schemata(fs, group, cfg, facts, node, report)
        self._reconcile_tasks(fs, configs, report)
        self._reconcile_pod_groups(fs, facts, report)
        self.decide(
            "resctrl reconciled",
            schemata=dict(report.schemata_written),
            tasks=dict(report.tasks_written),
            vanished=dict(report.vanished),
            errors=list(report.errors),
        )

    def _error(self, report: TickReport, message: str) -> None:
        report.errors.append(message)
        self.decide("error: " + message)

    def _pod_event(self, meta: PodMeta, message: str) -> None:
        """Koordinator's resctrl hook records its pod-level group changes on the pod (reason and message
        as its ``RecorderEvent``)."""
        cluster = self.context.cluster
        if cluster is None:
            return
        cluster.record_event(
            EventRecord(
                kind="Pod",
                namespace=meta.pod.namespace,
                name=meta.pod.name,
                reason="Pod Level Resctrl",
                message=message,
                component="koordlet",
                time=self.context.clock.now(),
                extra={"uid": meta.uid},
            )
        )

    def _ensure_group(self, fs: ResctrlFS, group: str, report: TickReport) -> bool:
        path = self.context.host.resctrl_file(group)
        if path.is_dir():
            return True
        try:
            fs.make_group(path)
        except FileExistsError:
            return True
        except OSError as err:
            self._error(
                report,
                f"node {self.context.node_name}: group {group}: cannot create {path}: {err.strerror or err}",
            )
            return False
        report.created_groups.append(group)
        return True

    # --- host facts --------------------------------------------------------------------------------------
    def _host_facts(self, report: TickReport) -> HostFacts | None:
        """cbm, the number of L3 caches and their ids; an error names the file."""
        host = self.context.host
        node = self.context.node_name
        try:
            cbm_text = read_cbm_mask(host)
            cbm = parse_cbm(cbm_text)
        except (HostReadError, SchemataError) as err:
            self._error(report, f"node {node}: info/L3/cbm_mask: {err}")
            return None
        if cbm == 0:
            self._error(report, f"node {node}: info/L3/cbm_mask: the mask is empty (0)")
            return None
        if (cbm + 1) & cbm:
            self._error(
                report,
                f"node {node}: info/L3/cbm_mask: {cbm_text!r} is not a contiguous mask from bit 0 "
                "(illegal cbm); no group's L3 or MB line is written",
            )
            return None
        try:
            ids = tuple(root_cache_ids(host))
        except HostReadError as err:
            self._error(report, f"node {node}: schemata: {err}")
            return None
        l3_num = l3_cache_count(host) or len(ids)
        if l3_num <= 0:
            self._error(report, f"node {node}: the number of l3 caches is unknown (sysfs and schemata)")
            return None
        vendor = self.support.vendor if self.support is not None else ""
        return HostFacts(cbm, l3_num, ids, vendor)

    # --- schemata ----------------------------------------------------------------------------------------
    def desired_lines(
        self, cfg: ResctrlQOS, facts: HostFacts
    ) -> tuple[dict[int, int] | None, dict[int, int] | None]:
        """(L3 masks, MB values) per cache id for a group; None where the config leaves that line alone."""
        l3: dict[int, int] | None = None
        if cfg.cat_range_start_percent is not None and cfg.cat_range_end_percent is not None:
            mask = int(
                calculate_cat_l3_mask(facts.cbm, cfg.cat_range_start_percent, cfg.cat_range_end_percent), 16
            )
            l3 = dict.fromkeys(facts.cache_ids, mask)
        mb: dict[int, int] | None = None
        value = calculate_mba(cfg.mba_percent, facts.vendor)
        if value:
            mb = dict.fromkeys(facts.cache_ids, int(value))
        return l3, mb

    def _apply_group_schemata(
        self, fs: ResctrlFS, group: str, cfg: ResctrlQOS, facts: HostFacts, node: str, report: TickReport
    ) -> None:
        try:
            l3, mb = self.desired_lines(cfg, facts)
        except SchemataError as err:
            self._error(report, f"NodeSLO {node}: group {group}: resctrlQOS: {err}")
            return
        self._write_schemata(
            fs, group, l3, mb, facts.l3_num, report, who=f"node {self.context.node_name}: group {group}"
        )

    def _write_schemata(
        self,
        fs: ResctrlFS,
        group: str,
        l3: Mapping[int, int] | None,
        mb: Mapping[int, int] | None,
        l3_num: int,
        report: TickReport,
        *,
        who: str,
    ) -> None:
        """Write the lines that differ from the group's current schemata, together, in one write."""
        path = self.context.host.resctrl_file(group, "schemata")
        try:
            current = Schemata.parse(path.read_text(), l3_num)
        except OSError as err:
            self._error(report, f"{who}: schemata: cannot read {path}: {err.strerror or err}")
            return
        except SchemataError as err:
            self._error(
                report, f"{who}: schemata: failed to read current resctrl schemata, path {path}, err: {err}"
            )
            return
        lines: dict[str, str] = {}
        if l3 is not None and any(current.l3.get(i) != v for i, v in l3.items()):
            lines[L3_PREFIX] = l3_line(l3)
        if mb is not None and any(current.mb.get(i) != v for i, v in mb.items()):
            lines[MB_PREFIX] = mb_line(mb)
        if not lines:
            return
        text = "".join(lines.values())
        try:
            fs.write_schemata(path, text)
        except OSError as err:
            self._schemata_writes.labels(group, "refused").inc()
            fields = " and ".join(lines)
            self._error(
                report,
                f"{who}: schemata {fields}: the kernel refused {text.strip()!r}: "
                f"{err.strerror or err}; nothing applied, retried next tick",
            )
            return
        self._schemata_writes.labels(group, "written").inc()
        report.schemata_written[group] = text

    # --- tasks -------------------------------------------------------------------------------------------
    def _reconcile_tasks(
        self, fs: ResctrlFS, configs: Mapping[str, ResctrlQOS | None], report: TickReport
    ) -> None:
        """``reconcileResctrlGroups``: each enabled pod's threads not yet in its group."""
        host = self.context.host
        current: dict[str, set[int] | None] = {}
        for group in GROUPS:
            try:
                current[group] = read_resctrl_tasks(host, group)
            except HostReadError as err:
                current[group] = None
                self.decide(f"cannot read tasks of group {group}", error=str(err))
        new_ids: dict[str, list[int]] = {g: [] for g in GROUPS}
        for meta in self.context.state.pods:
            annotations = (meta.manifest.get("metadata") or {}).get("annotations") or {}
            if ANNOTATION_RESCTRL in annotations or not meta.is_active:
                continue
            pod_group = group_of(qoslib.qos_class_with_default(meta.manifest))
            if pod_group is None:
                continue
            cfg = configs.get(pod_group)
            # a class without config counts as disabled (GetPodResourceQoSByQoSClass gives nil Enable)
            if cfg is None or not cfg.enable:
                continue
            new_ids[pod_group].extend(self.pod_new_task_ids(meta, current[pod_group]))
        for group in GROUPS:
            self._write_tasks(fs, group, new_ids[group], report)

    def _write_tasks(self, fs: ResctrlFS, group: str, ids: Sequence[int], report: TickReport) -> None:
        if not ids:
            return
        path = self.context.host.resctrl_file(group, "tasks")
        ordered = sorted(ids)
        try:
            answers = fs.write_tasks(path, ordered)
        except OSError as err:
            who = f"node {self.context.node_name}: group {group}"
            self._error(report, f"{who}: tasks: cannot open {path}: {err.strerror or err}")
            return
        written = sum(1 for a in answers if a == 0)
        vanished = sum(1 for a in answers if a == errno.ESRCH)
        failed = {i: a for i, a in zip(ordered, answers, strict=True) if a not in (0, errno.ESRCH)}
        report.tasks_written[group] = written
        if vanished:
            report.vanished[group] = vanished
        self._tasks.labels(group, "written").inc(written)
        self._tasks.labels(group, "vanished").inc(vanished)
        self._tasks.labels(group, "failed").inc(len(failed))
        if failed:
            shown = ", ".join(f"{i} ({errno.errorcode.get(e, e)})" for i, e in sorted(failed.items())[:10])
            self._error(report, f"node {self.context.node_name}: group {group}: tasks: refused {shown}")

    def pod_new_task_ids(self, meta: PodMeta, in_group: set[int] | None) -> list[int]:
        """Thread ids of the pod's containers (those in both spec and status) and of its sandbox that are
        not in ``in_group`` (``getPodCgroupNewTaskIds``); a container whose cgroup is gone is skipped."""
        ids: list[int] = []
        spec_names = {
            str(c.get("name") or "") for c in ((meta.manifest.get("spec") or {}).get("containers") or ())
        }
        statuses = (meta.manifest.get("status") or {}).get("containerStatuses") or ()
        for cs in statuses:
            name = str(cs.get("name") or "")
            if name not in spec_names:
                continue
            c = next((c for c in meta.containers if c.name == name and c.container_id), None)
            if c is None or not c.cgroup_dir:
                continue
            ids.extend(self._cgroup_new_ids(c.cgroup_dir, in_group))
        sandbox = self._sandbox_dir(meta)
        if sandbox:
            ids.extend(self._cgroup_new_ids(sandbox, in_group))
        return ids

    def _cgroup_new_ids(self, parent_dir: str, in_group: set[int] | None) -> list[int]:
        try:
            ids = self.context.reader.read_tasks(parent_dir)
        except CgroupError:
            return []
        if in_group is None:
            return ids
        return [i for i in ids if i not in in_group]

    def _sandbox_dir(self, meta: PodMeta) -> str:
        """``GetPodSandboxContainerID``: the one dir under the pod's cgroup that is no known container's
        (CRI-O's ``crio-*.scope`` dirs excepted); "" when there is not exactly one."""
        layout = self.context.layout
        if not meta.containers:
            return ""
        subsystem = "cpuset" if layout.version is CgroupVersion.V1 else "cpu"
        root = layout.dir_path(subsystem, meta.cgroup_dir)
        known = {Path(c.cgroup_dir).name for c in meta.containers if c.cgroup_dir}
        try:
            entries = [e.name for e in os.scandir(root) if e.is_dir()]
        except OSError:
            return ""
        candidates = [
            n for n in entries if n not in known and not (n.startswith("crio-") and n.endswith(".scope"))
        ]
        if len(candidates) != 1:
            return ""
        return f"{meta.cgroup_dir.rstrip('/')}/{candidates[0]}"

    # --- pod-level groups ----------------------------------------------------------------------------------
    def pod_schemata(self, config: ResctrlConfig, facts: HostFacts) -> Schemata:
        """``RDTEngine.ParseSchemata``: zeros on every cache id, then the MB percent and the LLC range for
        all ids, then the per-cache overrides; an LLC range that gives no mask leaves the L3 part zero."""
        raw = Schemata.for_ids(facts.cache_ids)
        if config.mb_percent != 0:
            value = mba_value(config.mb_percent, facts.vendor)
            for k in raw.mb:
                raw.mb[k] = value
        for pc in config.mb_per_cache:
            raw.mb[pc.cache_id] = mba_value(pc.percent, facts.vendor)
        if len(config.llc_range) == 2:
            mask = int(calculate_cat_l3_mask(facts.cbm, config.llc_range[0], config.llc_range[1]), 16)
            for k in raw.l3:
                raw.l3[k] = mask
        for pc in config.llc_per_cache:
            if len(pc.range) == 2:
                raw.l3[pc.cache_id] = int(calculate_cat_l3_mask(facts.cbm, pc.range[0], pc.range[1]), 16)
        return raw

    def _reconcile_pod_groups(self, fs: ResctrlFS, facts: HostFacts | None, report: TickReport) -> None:
        host = self.context.host
        wanted: dict[str, PodMeta] = {}
        for meta in self.context.state.pods:
            annotations = (meta.manifest.get("metadata") or {}).get("annotations") or {}
            if ANNOTATION_RESCTRL in annotations:
                wanted[POD_GROUP_PREFIX + meta.uid] = meta
        try:
            existing = sorted(
                e.name for e in os.scandir(host.resctrl) if e.is_dir() and e.name.startswith(POD_GROUP_PREFIX)
            )
        except OSError:
            existing = []
        for name in existing:
            if name not in wanted:
                try:
                    fs.remove_group(host.resctrl_file(name))
                    report.removed_groups.append(name)
                except OSError as err:
                    self._error(
                        report,
                        f"node {self.context.node_name}: group {name}: cannot remove: {err.strerror or err}",
                    )
        for name, meta in sorted(wanted.items()):
            if not meta.is_active:
                continue
            annotations = (meta.manifest.get("metadata") or {}).get("annotations") or {}
            try:
                config = parse_resctrl_annotation(str(annotations[ANNOTATION_RESCTRL]), meta.key)
            except ConfigError as err:
                self._error(report, str(err))
                # Every tick reads it again: the log says it once per pod and value.
                BAD_ANNOTATIONS.once(
                    meta.uid, ANNOTATION_RESCTRL, str(annotations[ANNOTATION_RESCTRL]), str(err)
                )
                continue
            if facts is None:
                continue
            try:
                raw = self.pod_schemata(config, facts)
            except SchemataError as err:
                self._error(report, f"pod {meta.key}: annotation {ANNOTATION_RESCTRL}: llc: {err}")
                continue
            created = len(report.created_groups)
            if not self._ensure_group(fs, name, report):
                continue
            if len(report.created_groups) > created:
                self._pod_event(meta, "Create Resctrl Group")
            l3 = raw.l3 if raw.validate_l3() is None else None
            mb = raw.mb if raw.validate_mb() is None else None
            self._write_schemata(fs, name, l3, mb, facts.l3_num, report, who=f"pod {meta.key}: group {name}")
            try:
                in_group: set[int] | None = read_resctrl_tasks(host, name)
            except HostReadError:
                in_group = None
            self._write_tasks(fs, name, self.pod_new_task_ids(meta, in_group), report)
