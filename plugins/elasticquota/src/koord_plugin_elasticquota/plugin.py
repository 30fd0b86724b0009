"""``ElasticQuota``: admission by hierarchical elastic quotas, quota-local preemption (``elasticquota``).

PreFilter admits a pod only while its quota's used plus the pod's request stays within the quota's runtime
(the share of the cluster the quota may use now, lent capacity included), or within max when runtime quota is
off; a non-preemptible pod must also fit the quota's min; optionally every ancestor is checked too. PostFilter
preempts, but only pods of the same quota with a lower priority. Reserve/Unreserve charge and release the
pod's request on its quota (and every ancestor). The quota state lives in ``QuotaSet``/``GroupQuotaManager``,
fed by ElasticQuota, Node and Pod events; the status writer and the over-use revoke controller
(``controllers``) read it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from koord_framework.api.objects import PodInfo
from koord_framework.api.resources import (
    add,
    format_resource,
    format_resource_list,
    less_than_or_equal,
    mask,
    subtract_non_negative,
)
from koord_framework.cluster.port import EventRecord
from koord_framework.errors import ClusterError, ConflictError
from koord_framework.explain.hooks import ExplainSection, QuotaExplainer
from koord_framework.plugin import PluginArgs
from koord_framework.scheduler.cycle_state import CycleState
from koord_framework.scheduler.interface import (
    BackgroundController,
    ClusterEvent,
    ControllerProvider,
    EnqueueExtensions,
    Handle,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    ReportingPlugin,
    ReservePlugin,
    SchedulerPlugin,
)
from koord_framework.scheduler.nodeinfo import NodeInfo
from koord_framework.scheduler.status import Status
from koord_plugin_elasticquota.args import ElasticQuotaArgs
from koord_plugin_elasticquota.manager import GroupQuotaManager, quota_pod_requests
from koord_plugin_elasticquota.metrics import register_quota_metrics
from koord_plugin_elasticquota.preempt import QuotaPreemption
from koord_plugin_elasticquota.quota_info import QuotaInfo
from koord_plugin_elasticquota.quota_object import (
    DEFAULT_QUOTA_NAME,
    LABEL_ALLOW_LENT_RESOURCE,
    LABEL_QUOTA_IS_PARENT,
    LABEL_QUOTA_PARENT,
    ROOT_QUOTA_NAME,
    SYSTEM_QUOTA_NAME,
    is_pod_non_preemptible,
)
from koord_plugin_elasticquota.quota_set import QuotaSet

__all__ = ["NAME", "ElasticQuota", "PostFilterState", "print_resource_list"]

log = logging.getLogger(__name__)

NAME: Final = "ElasticQuota"
STATE_KEY: Final = "PostFilter" + NAME
COMPONENT: Final = "koord-scheduler"


def print_resource_list(resources: Mapping[str, int]) -> str:
    """Upstream's ``printResourceList``: sorted ``name:quantity`` joined by commas, ``<empty>`` if none."""
    if not resources:
        return "<empty>"
    return ",".join(sorted(f"{name}:{format_resource(name, value)}" for name, value in resources.items()))


def go_list(items: Sequence[str]) -> str:
    """A Go ``%v`` of a string slice: ``[a b]``."""
    return "[" + " ".join(items) + "]"


@dataclass(slots=True)
class PostFilterState:
    """PreFilter's snapshot of the pod's quota, adjusted by preemption's AddPod/RemovePod what-ifs."""

    skip: bool
    quota_info: QuotaInfo | None = None
    used: dict[str, int] = field(default_factory=dict)
    non_preemptible_used: dict[str, int] = field(default_factory=dict)
    used_limit: dict[str, int] = field(default_factory=dict)

    def clone(self) -> PostFilterState:
        return PostFilterState(
            self.skip,
            self.quota_info,
            dict(self.used),
            dict(self.non_preemptible_used),
            dict(self.used_limit),
        )


class ElasticQuota(
    SchedulerPlugin[ElasticQuotaArgs],
    PreFilterPlugin,
    PreFilterExtensions,
    PostFilterPlugin,
    ReservePlugin,
    EnqueueExtensions,
    ControllerProvider,
    ReportingPlugin,
    QuotaExplainer,
):
    """Koordinator's ElasticQuota: quota admission in PreFilter, same-quota preemption in PostFilter."""

    name: ClassVar[str] = NAME
    Args: ClassVar[type[PluginArgs]] = ElasticQuotaArgs

    def __init__(self, args: ElasticQuotaArgs, handle: Handle) -> None:
        super().__init__(args, handle)
        parsed = self.args
        self.eq_args: ElasticQuotaArgs = parsed
        self.quotas = QuotaSet(
            scale_min_enabled=parsed.enable_min_quota_scale,
            system_max=parsed.system_max(),
            default_max=parsed.default_max(),
            ignore_pod_overhead=handle.feature_enabled("ElasticQuotaIgnorePodOverhead"),
            disable_default_quota=handle.feature_enabled("DisableDefaultQuota"),
        )
        self.quotas.parsed_pod = handle.parsed_pod
        self.quotas.parsed_node = handle.parsed_node
        self.preemption = QuotaPreemption(self)
        register_quota_metrics(handle.metrics, self.quotas, handle.profile_name)
        self._create_builtin_quotas()
        informer = handle.informer
        # Start from the whole list at once (upstream's ReplaceQuotas): a child listed before its parent
        # must still be charged to it. The adds the informer replays next change nothing.
        try:
            self.quotas.replace_quotas(informer.list("ElasticQuota"))
            informer.add_handler(
                "ElasticQuota",
                self.quotas.on_quota_add,
                self.quotas.on_quota_update,
                self.quotas.on_quota_delete,
            )
        except ClusterError as err:
            # No ElasticQuota CRD: every pod is charged to the default quota (visible in the log).
            log.warning("ElasticQuota objects cannot be read (%s): every pod uses the default quota", err)
        informer.add_handler(
            "Node", self.quotas.on_node_add, self.quotas.on_node_update, self.quotas.on_node_delete
        )
        with self.quotas.pods_in_bulk():  # the pods listed so far are replayed as adds: charged per quota
            informer.add_handler(
                "Pod", self.quotas.on_pod_add, self.quotas.on_pod_update, self.quotas.on_pod_delete
            )
        from koord_plugin_elasticquota.controllers import QuotaControllers

        self.controllers = QuotaControllers(self)

    # --- built-in quota objects ------------------------------------------------------------------------
    def _create_builtin_quotas(self) -> None:
        """The root, system and default quota objects, so their status can be seen (createXIfNotPresent);
        a cluster that refuses (no namespace, no CRD) only costs the visibility."""
        ns = self.eq_args.quota_group_namespace
        wanted: list[dict[str, Any]] = [
            {
                "metadata": {
                    "name": ROOT_QUOTA_NAME,
                    "labels": {
                        LABEL_QUOTA_IS_PARENT: "true",
                        LABEL_ALLOW_LENT_RESOURCE: "false",
                        LABEL_QUOTA_PARENT: "",
                    },
                },
                "spec": {},
            },
            {
                "metadata": {"name": SYSTEM_QUOTA_NAME},
                "spec": {"max": dict(self.eq_args.system_quota_group_max)},
            },
            {
                "metadata": {"name": DEFAULT_QUOTA_NAME},
                "spec": {"max": dict(self.eq_args.default_quota_group_max)},
            },
        ]
        cluster = self.handle.cluster
        for obj in wanted:
            name = obj["metadata"]["name"]
            try:
                if cluster.try_get("ElasticQuota", name, ns) is not None:
                    continue
                obj["metadata"]["namespace"] = ns
                obj["metadata"].setdefault("annotations", {})
                cluster.create(
                    {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota", **obj}
                )
            except ConflictError:
                continue
            except ClusterError as err:
                log.warning("could not create ElasticQuota %s/%s: %s", ns, name, err)

    def new_controllers(self) -> list[BackgroundController]:
        return [self.controllers]

    # --- helpers -------------------------------------------------------------------------------------
    def _used_limit(self, info: QuotaInfo) -> dict[str, int]:
        return dict(info.calc.runtime) if self.eq_args.enable_runtime_quota else dict(info.calc.max)

    def quota_of(self, pod: PodInfo) -> tuple[str, str]:
        with self.quotas.lock:
            return self.quotas.quota_and_tree(pod)

    # --- EnqueueExtensions ---------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("ElasticQuota", "*")]

    # --- PreFilter -----------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status]:
        with self.quotas.lock:
            quota_name, tree = self.quotas.quota_and_tree(pod)
            if not quota_name:
                state.write(STATE_KEY, PostFilterState(skip=True))
                return None, Status.skip()
            mgr = self.quotas.manager_for_tree(tree)
            if mgr is None:
                return None, Status.as_error(
                    f"Could not find the specified ElasticQuotaManager for quota: {quota_name}, tree: {tree}"
                )
            if not mgr.attached(quota_name):
                # Upstream admits without limit here (an empty runtime bounds nothing); refuse instead.
                return None, Status.unresolvable(self.detached_message(mgr, quota_name))
            if self.eq_args.enable_runtime_quota:
                mgr.refresh_runtime(quota_name)
            info = mgr.get_quota_info(quota_name)
            if info is None:
                return None, Status.as_error("Could not find the specified ElasticQuota")
            return None, self.admit(state, mgr, info, pod)

    @staticmethod
    def detached_message(mgr: GroupQuotaManager, quota_name: str) -> str:
        path = mgr.path_to_root(quota_name)
        last = path[-1] if path else None
        if last is not None and mgr.get_quota_info(last.parent) is not None:
            problem = f"its parents form a cycle through {last.parent!r}"
        else:
            problem = f"parent quota {last.parent if last else '?'!r} does not exist"
        return (
            f"ElasticQuota {quota_name} is not attached to the quota tree: {problem} "
            "(metadata.labels[quota.scheduling.koordinator.sh/parent])"
        )

    def admit(self, state: CycleState, mgr: GroupQuotaManager, info: QuotaInfo, pod: PodInfo) -> Status:
        """The PreFilter checks on a quota whose runtime is current (also what the vectors drive)."""
        snap = PostFilterState(
            skip=False,
            quota_info=info,
            used=dict(info.calc.used),
            non_preemptible_used=dict(info.calc.non_preemptible_used),
            used_limit=self._used_limit(info),
        )
        state.write(STATE_KEY, snap)
        request = mask(self._requests(pod), info.calc.max)
        fits, exceed = less_than_or_equal(add(request, snap.used), snap.used_limit)
        if not fits:
            return Status.unschedulable(
                f"Insufficient quotas, quotaName: {info.name}, "
                f"runtime: {print_resource_list(snap.used_limit)}, "
                f"used: {print_resource_list(snap.used)}, pod's request: {print_resource_list(request)}, "
                f"exceedDimensions: {go_list(exceed)}"
            )
        if is_pod_non_preemptible(pod):
            fits, exceed = less_than_or_equal(add(request, snap.non_preemptible_used), info.calc.min)
            if not fits:
                return Status.unschedulable(
                    f"Insufficient non-preemptible quotas, quotaName: {info.name}, "
                    f"min: {print_resource_list(info.calc.min)}, "
                    f"nonPreemptibleUsed: {print_resource_list(snap.non_preemptible_used)}, "
                    f"pod's request: {print_resource_list(request)}, exceedDimensions: {go_list(exceed)}"
                )
        if self.eq_args.enable_check_parent_quota:
            return self.check_quota_recursive(mgr, info.parent, [info.parent, info.name], request)
        return Status.success()

    def check_quota_recursive(
        self, mgr: GroupQuotaManager, current: str, topo: list[str], request: dict[str, int]
    ) -> Status:
        """Every ancestor up to (not including) the root must have room for the pod too."""
        seen: set[str] = set()
        while current != ROOT_QUOTA_NAME:
            info = mgr.get_quota_info(current)
            if info is None or current in seen:
                return Status.as_error(
                    f"Could not find the elasticQuota {current}, quotaNameTopo: {go_list(topo)}"
                )
            seen.add(current)
            used = dict(info.calc.used)
            limit = self._used_limit(info)
            fits, exceed = less_than_or_equal(mask(add(request, used), request), limit)
            if not fits:
                return Status.unschedulable(
                    f"Insufficient quotas, quotaNameTopo: {go_list(topo)}, "
                    f"runtime: {print_resource_list(limit)}, "
                    f"used: {print_resource_list(used)}, pod's request: {print_resource_list(request)}, "
                    f"exceedDimensions: {go_list(exceed)}"
                )
            topo = [info.parent, *topo]
            current = info.parent
        return Status.success()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    # --- PreFilterExtensions (preemption what-ifs) ---------------------------------------------------
    def _requests(self, pod: PodInfo) -> dict[str, int]:
        """What ``pod`` charges its quota (``core.PodRequests``; gate ``ElasticQuotaIgnorePodOverhead``)."""
        return quota_pod_requests(pod, self.quotas.ignore_pod_overhead)

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        snap = state.get(STATE_KEY)
        if not isinstance(snap, PostFilterState):
            return Status.as_error(f"error reading {STATE_KEY!r} from cycleState")
        if snap.skip or snap.quota_info is None:
            return Status.success()
        if to_add.key in snap.quota_info.pods:
            snap.used = add(snap.used, mask(self._requests(to_add), snap.quota_info.calc.max))
        return Status.success()

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        snap = state.get(STATE_KEY)
        if not isinstance(snap, PostFilterState):
            return Status.as_error(f"error reading {STATE_KEY!r} from cycleState")
        if snap.skip or snap.quota_info is None:
            return Status.success()
        if to_remove.key in snap.quota_info.pods:
            snap.used = subtract_non_negative(
                snap.used, mask(self._requests(to_remove), snap.quota_info.calc.max)
            )
        return Status.success()

    # --- PostFilter ----------------------------------------------------------------------------------
    def can_preempt(self, pod: PodInfo, victim: PodInfo) -> bool:
        """A victim must be preemptible, of lower priority and of the same quota (never of the default
        quota while ``disableDefaultQuotaPreemption``)."""
        if is_pod_non_preemptible(victim) or pod.priority_value <= victim.priority_value:
            return False
        pod_quota, _ = self.quota_of(pod)
        victim_quota, _ = self.quota_of(victim)
        if self.eq_args.disable_default_quota_preemption and victim_quota == DEFAULT_QUOTA_NAME:
            return False
        return pod_quota == victim_quota

    def post_filter(
        self, state: CycleState, pod: PodInfo, filtered: Mapping[str, Status]
    ) -> tuple[PostFilterResult | None, Status]:
        result, status = self.preemption.preempt(state, pod, filtered)
        if status.message and not status.is_success:
            return result, Status(status.code, (f"preemption: {status.message}",), error=status.error)
        return result, status

    # --- Reserve -------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        with self.quotas.lock:
            quota_name, tree = self.quotas.quota_and_tree(pod)
            if not quota_name:
                return Status.success()
            mgr = self.quotas.manager_for_tree(tree)
            if mgr is None:
                return Status.as_error(f"quota manager not found, quota: {quota_name}, tree: {tree}")
            mgr.reserve_pod(quota_name, pod)
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        with self.quotas.lock:
            quota_name, tree = self.quotas.quota_and_tree(pod)
            mgr = self.quotas.manager_for_tree(tree) if quota_name else None
            if mgr is not None:
                mgr.unreserve_pod(quota_name, pod)

    report_columns = ("name", "parent", "min", "max", "runtime", "used")

    def report(self, explain: bool) -> list[dict[str, Any]]:
        """Every quota after the run: tree, parent, min, max, runtime, request and used."""
        quotas = []
        for name, summary in sorted(self.quotas.summaries().items()):
            quotas.append(
                {
                    "name": name,
                    "tree": summary["tree"],
                    "parent": summary["parent"],
                    "isParent": summary["isParent"],
                    **{
                        key: format_resource_list(summary[key])
                        for key in ("min", "max", "runtime", "request", "used")
                    },
                }
            )
        return quotas

    def explain_quota(self, quota_name: str) -> ExplainSection | None:
        """``koord explain quota``: the quota's tree and the water-filling rounds of its runtime."""
        from koord_plugin_elasticquota.explain import explain_quota

        return explain_quota(self, quota_name)

    # --- reporting -----------------------------------------------------------------------------------
    def record_event(self, pod: PodInfo, reason: str, message: str) -> None:
        self.handle.cluster.record_event(
            EventRecord(
                kind="Pod",
                namespace=pod.namespace,
                name=pod.name,
                reason=reason,
                message=message,
                component=COMPONENT,
                time=self.handle.clock.now(),
            )
        )
