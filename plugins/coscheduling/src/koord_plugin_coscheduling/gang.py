"""The gang model: a gang, the group of gangs it must be scheduled with, and the member pods it tracks.

A *gang* (id ``<namespace>/<name>``) comes from a PodGroup (``scheduling.sigs.k8s.io/v1alpha1``) or, without
one, from the annotations of the first of its pods that carries valid ones (the "lightweight" form). It
tracks its member pods in four sets, as Koordinator's ``core.Gang`` does:

* ``children`` - every member pod seen;
* ``pending_children`` - members without a node that are not waiting at Permit;
* ``waiting_for_bind_children`` - members held at Permit (assumed on a node);
* ``bound_children`` - members with a node.

A *gang group* is the list of gangs (``gang.scheduling.koordinator.sh/groups``) that must all be satisfied
before any of them binds; its id is the sorted list joined by ``,``. The gangs of a group share one
``GangGroupInfo``: whether the group was ever satisfied, which gangs have pods waiting, the representative pod
PreEnqueue admitted, and the members that were waiting when the group was allowed (written into the binding
annotations).

Bad input follows Koordinator's fallbacks (an unreadable total-number means min, an unknown mode means
Strict, an unreadable waiting time means the default timeout, an unreadable groups list means the gang alone);
each fallback is also recorded in ``Gang.problems`` naming the object and field, for reports and logs. A
min-available that is not a number leaves the gang uninitialised (Koordinator's "gang has not init").

Not thread-safe by itself: ``GangCache`` serialises every access with one lock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koord_framework.api.strconv import parse_int
from koord_framework.cluster.clock import parse_time
from koord_framework.config.common import DurationError, parse_duration
from koord_plugin_coscheduling.args import CoschedulingArgs
from koord_plugin_coscheduling.constants import (
    ANNOTATION_ALIAS_GANG_MATCH_POLICY,
    ANNOTATION_GANG_GROUPS,
    ANNOTATION_GANG_MATCH_POLICY,
    ANNOTATION_GANG_MIN_NUM,
    ANNOTATION_GANG_MODE,
    ANNOTATION_GANG_NAME,
    ANNOTATION_GANG_TOTAL_NUM,
    ANNOTATION_GANG_WAIT_TIME,
    GANG_FROM_POD_ANNOTATION,
    GANG_FROM_POD_GROUP_CRD,
    GANG_MODE_NON_STRICT,
    GANG_MODE_STRICT,
    LEGACY_POD_GROUP_MIN_AVAILABLE_LABEL,
    LEGACY_POD_GROUP_NAME_LABEL,
    MATCH_POLICIES,
    MATCH_POLICY_ONCE_SATISFIED,
    MATCH_POLICY_ONLY_WAITING,
    MATCH_POLICY_WAITING_AND_RUNNING,
    POD_GROUP_LABEL,
)

log = logging.getLogger(__name__)

__all__ = [
    "Gang",
    "GangGroupInfo",
    "MemberPod",
    "gang_group_id",
    "gang_id",
    "gang_name_of",
    "parse_gang_groups",
]


def gang_id(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def gang_name_of(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """The gang a pod names: PodGroup label, else the legacy label, else the gang-name annotation."""
    return (
        labels.get(POD_GROUP_LABEL)
        or labels.get(LEGACY_POD_GROUP_NAME_LABEL)
        or annotations.get(ANNOTATION_GANG_NAME)
        or ""
    )


def gang_group_id(gangs: list[str]) -> str:
    """Koordinator's ``GetGangGroupId``: sorts ``gangs`` in place (the gang keeps the sorted list too)."""
    gangs.sort()
    return ",".join(gangs)


def parse_gang_groups(text: str) -> tuple[list[str], str]:
    """The groups annotation as Go's ``json.Unmarshal`` into ``[]string`` reads it, and an error message.

    Invalid JSON or a non-list decodes to nothing; a list keeps its strings and, like Go, turns any other
    element into the empty string while reporting the type error.
    """
    if text == "":
        return [], ""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], f"is not JSON ({exc.msg})"
    if value is None:
        return [], ""
    if not isinstance(value, list):
        return [], f"is a JSON {type(value).__name__}, not a list of gang ids"
    out: list[str] = []
    bad = False
    for item in value:
        if isinstance(item, str):
            out.append(item)
        else:
            out.append("")
            bad = True
    return out, ("has a non-string element" if bad else "")


@dataclass(slots=True)
class MemberPod:
    """What a gang keeps of a member pod (slim: 150,000 pods must fit in memory)."""

    namespace: str
    name: str
    uid: str
    node_name: str = ""
    phase: str = "Pending"
    owner_names: tuple[str, ...] = ()
    creation_time: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class GangGroupInfo:
    """State shared by the gangs of one gang group (Koordinator's ``GangGroupInfo``)."""

    gang_group_id: str = ""
    gang_group: list[str] = field(default_factory=list)
    initialized: bool = False
    once_resource_satisfied: bool = False
    """The group once reached its minimum (a member bound); never goes back."""
    waiting_gang_ids: set[str] = field(default_factory=set)
    """Gangs of the group with pods waiting at Permit (set when Permit says Wait)."""
    representative_pod_key: str = ""
    """The one pending pod PreEnqueue admits for the group while no scheduling context is active."""
    binding_member_pods: set[str] | None = None
    """UIDs of the group's waiting pods when Permit allowed the group (PreBind's member count)."""

    def set_resource_satisfied(self) -> None:
        if not self.once_resource_satisfied:
            self.once_resource_satisfied = True
            log.info("gang group %s is resource satisfied", self.gang_group_id)

    def add_waiting_gang(self) -> None:
        self.waiting_gang_ids.update(self.gang_group)

    def remove_waiting_gang(self, gang: str) -> None:
        self.waiting_gang_ids.discard(gang)
        if not self.waiting_gang_ids:
            self.binding_member_pods = None

    def clear_waiting_gang(self) -> None:
        self.waiting_gang_ids.clear()
        self.binding_member_pods = None

    def record_if_no_representative(self, pod_key: str) -> str:
        """The group's representative after this call (``pod_key`` if there was none)."""
        if not self.representative_pod_key:
            self.representative_pod_key = pod_key
        return self.representative_pod_key

    def delete_if_representative(self, pod_key: str) -> None:
        if self.representative_pod_key == pod_key:
            self.representative_pod_key = ""


class Gang:
    """One gang and its member pods (Koordinator's ``core.Gang``)."""

    __slots__ = (
        "bound_children",
        "children",
        "create_time",
        "gang_from",
        "gang_group",
        "gang_group_id",
        "group_info",
        "has_gang_init",
        "match_policy",
        "min_required",
        "mode",
        "name",
        "pending_children",
        "problems",
        "total_children",
        "wait_time",
        "waiting_for_bind_children",
    )

    def __init__(self, name: str, now: float | None = None) -> None:
        self.name = name
        self.wait_time = 0.0
        self.create_time = now
        self.mode = GANG_MODE_STRICT
        self.min_required = 0
        self.total_children = 0
        self.gang_group_id = name
        self.gang_group = [name]
        self.group_info = GangGroupInfo()
        self.children: dict[str, MemberPod] = {}
        self.pending_children: dict[str, MemberPod] = {}
        self.waiting_for_bind_children: dict[str, MemberPod] = {}
        self.bound_children: dict[str, MemberPod] = {}
        self.match_policy = MATCH_POLICY_ONCE_SATISFIED
        self.gang_from = GANG_FROM_POD_ANNOTATION
        self.has_gang_init = False
        self.problems: list[str] = []
        """Bad input met while initialising, each naming the object and field (and the fallback taken)."""

    # --- initialisation ---------------------------------------------------------------------------
    def try_init_by_pod_config(
        self,
        pod_key: str,
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        args: CoschedulingArgs,
        creation_time: float | None,
    ) -> bool:
        """Initialise from the first member pod with a readable minimum; later pods change nothing."""
        if self.has_gang_init:
            return False
        obj = f"pod {pod_key}"
        min_required, problem = _min_from_pod(labels, annotations)
        if min_required is None:
            # Koordinator logs and leaves the gang uninitialised; the next member may initialise it.
            self.problems = [f"{obj}: {problem}; the gang stays uninitialised"]
            log.error("gang %s: %s", self.name, self.problems[0])
            return False
        problems: list[str] = []
        self.min_required = min_required
        self.total_children = _total(annotations, min_required, obj, problems)
        self.mode = _mode(annotations, obj, problems)
        self.match_policy = _match_policy(annotations, args, obj, problems)
        self.create_time = creation_time
        self.wait_time = _pod_wait_time(annotations, args, obj, problems)
        self._set_groups(annotations, obj, problems)
        self.gang_from = GANG_FROM_POD_ANNOTATION
        self.has_gang_init = True
        self.problems = problems
        for p in problems:
            log.error("gang %s: %s", self.name, p)
        return True

    def try_init_by_pod_group(self, pg: Mapping[str, Any], args: CoschedulingArgs) -> None:
        """(Re)initialise from a PodGroup; unlike the pod form, every update applies."""
        meta = pg.get("metadata") or {}
        spec = pg.get("spec") or {}
        annotations = meta.get("annotations") or {}
        obj = f"PodGroup {meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        problems: list[str] = []
        min_member = spec.get("minMember", 0)
        if isinstance(min_member, bool) or not isinstance(min_member, int):
            problems.append(f"{obj}: spec.minMember {min_member!r} is not an integer; using 0")
            min_member = 0
        elif min_member < 0:
            problems.append(f"{obj}: spec.minMember {min_member} is negative; using 0")
            min_member = 0
        if min_member == 0:
            problems.append(f"{obj}: spec.minMember is 0, so the gang never holds its pods back")
        self.min_required = min_member
        self.total_children = _total(annotations, min_member, obj, problems)
        self.mode = _mode(annotations, obj, problems)
        self.match_policy = _match_policy(annotations, args, obj, problems)
        self.create_time = _creation_time(meta)
        self.wait_time = _pod_group_wait_time(spec, args, obj, problems)
        self._set_groups(annotations, obj, problems)
        self.gang_from = GANG_FROM_POD_GROUP_CRD
        self.has_gang_init = True
        self.problems = problems
        for p in problems:
            log.warning("gang %s: %s", self.name, p)

    def _set_groups(self, annotations: Mapping[str, str], obj: str, problems: list[str]) -> None:
        raw = annotations.get(ANNOTATION_GANG_GROUPS, "")
        groups, error = parse_gang_groups(raw)
        if error:
            problems.append(f"{obj}: annotation {ANNOTATION_GANG_GROUPS} {raw!r} {error}")
        if not groups:
            groups = [self.name]
        self.gang_group_id = gang_group_id(groups)
        self.gang_group = groups

    def set_group_info(self, info: GangGroupInfo) -> None:
        if not self.group_info.initialized:
            self.group_info = info

    # --- members -----------------------------------------------------------------------------------
    def set_child(self, pod: MemberPod) -> None:
        key = pod.key
        self.children[key] = pod
        if not pod.node_name and key not in self.waiting_for_bind_children:
            self.pending_children[key] = pod

    def delete_pod(self, pod_key: str) -> bool:
        """Forget a deleted member; True when an annotation-made gang has no member left (drop it)."""
        self.children.pop(pod_key, None)
        self.pending_children.pop(pod_key, None)
        self.group_info.delete_if_representative(pod_key)
        self.waiting_for_bind_children.pop(pod_key, None)
        if not self.waiting_for_bind_children:
            self.group_info.remove_waiting_gang(self.name)
        self.bound_children.pop(pod_key, None)
        return self.gang_from == GANG_FROM_POD_ANNOTATION and not self.children

    def add_assumed_pod(self, pod: MemberPod) -> None:
        key = pod.key
        if key not in self.waiting_for_bind_children:
            self.waiting_for_bind_children[key] = pod
        self.pending_children.pop(key, None)

    def del_assumed_pod(self, pod_key: str) -> None:
        if self.waiting_for_bind_children.pop(pod_key, None) is not None:
            child = self.children.get(pod_key)
            if child is not None:
                self.pending_children[pod_key] = child
            if not self.waiting_for_bind_children:
                self.group_info.remove_waiting_gang(self.name)

    def add_bound_pod(self, pod: MemberPod) -> None:
        key = pod.key
        self.waiting_for_bind_children.pop(key, None)
        if not self.waiting_for_bind_children:
            self.group_info.remove_waiting_gang(self.name)
        self.pending_children.pop(key, None)
        self.group_info.delete_if_representative(key)
        self.bound_children[key] = pod
        self.group_info.set_resource_satisfied()

    # --- questions ---------------------------------------------------------------------------------
    @property
    def once_resource_satisfied(self) -> bool:
        return self.group_info.once_resource_satisfied

    def is_worth_requeue(self) -> bool:
        return self.has_gang_init and len(self.children) >= self.min_required

    def is_valid_for_permit(self) -> bool:
        """Does this gang have enough members for the group to go on (per its match policy)?"""
        if not self.has_gang_init:
            return False
        waiting = len(self.waiting_for_bind_children)
        if self.match_policy == MATCH_POLICY_ONLY_WAITING:
            return waiting >= self.min_required
        if self.match_policy == MATCH_POLICY_WAITING_AND_RUNNING:
            return waiting + len(self.bound_children) >= self.min_required
        return waiting >= self.min_required or self.group_info.once_resource_satisfied

    def pick_some_child(self) -> MemberPod | None:
        return next(iter(self.pending_children.values()), None)


# --- field readers with Koordinator's fallbacks --------------------------------------------------------
def _min_from_pod(labels: Mapping[str, str], annotations: Mapping[str, str]) -> tuple[int | None, str]:
    legacy = labels.get(LEGACY_POD_GROUP_MIN_AVAILABLE_LABEL, "")
    if legacy:
        value = parse_int(legacy, 32)
        if value is None:
            return None, f"label {LEGACY_POD_GROUP_MIN_AVAILABLE_LABEL} {legacy!r} is not a 32-bit integer"
        return value, ""
    if ANNOTATION_GANG_MIN_NUM in annotations:
        raw = annotations[ANNOTATION_GANG_MIN_NUM]
        value = parse_int(raw, 32)
        if value is None:
            return None, f"annotation {ANNOTATION_GANG_MIN_NUM} {raw!r} is not a 32-bit integer"
        return value, ""
    return None, f"annotation {ANNOTATION_GANG_MIN_NUM} is missing"


def _total(annotations: Mapping[str, str], min_required: int, obj: str, problems: list[str]) -> int:
    raw = annotations.get(ANNOTATION_GANG_TOTAL_NUM, "")
    if raw == "":
        return min_required
    total = parse_int(raw, 32)
    if total is None:
        problems.append(
            f"{obj}: annotation {ANNOTATION_GANG_TOTAL_NUM} {raw!r} is not a 32-bit integer; "
            f"using min {min_required}"
        )
        return min_required
    if total == 0:
        return min_required
    if total < min_required:
        problems.append(
            f"{obj}: annotation {ANNOTATION_GANG_TOTAL_NUM} {total} is below the minimum {min_required}; "
            "using the minimum"
        )
        return min_required
    return total


def _mode(annotations: Mapping[str, str], obj: str, problems: list[str]) -> str:
    mode = annotations.get(ANNOTATION_GANG_MODE, "") or GANG_MODE_STRICT
    if mode not in (GANG_MODE_STRICT, GANG_MODE_NON_STRICT):
        problems.append(
            f"{obj}: annotation {ANNOTATION_GANG_MODE} {mode!r} is neither Strict nor NonStrict; using Strict"
        )
        return GANG_MODE_STRICT
    return mode


def _match_policy(
    annotations: Mapping[str, str], args: CoschedulingArgs, obj: str, problems: list[str]
) -> str:
    policy = annotations.get(ANNOTATION_GANG_MATCH_POLICY, "") or annotations.get(
        ANNOTATION_ALIAS_GANG_MATCH_POLICY, ""
    )
    if policy == "":
        return args.default_match_policy
    if policy not in MATCH_POLICIES:
        problems.append(
            f"{obj}: annotation {ANNOTATION_GANG_MATCH_POLICY} {policy!r} is not one of "
            f"{', '.join(MATCH_POLICIES)}; using {args.default_match_policy}"
        )
        return args.default_match_policy
    return policy


def _pod_wait_time(
    annotations: Mapping[str, str], args: CoschedulingArgs, obj: str, problems: list[str]
) -> float:
    raw = annotations.get(ANNOTATION_GANG_WAIT_TIME, "")
    default = float(args.default_timeout)
    if raw == "":
        return default
    try:
        seconds = parse_duration(raw)
    except DurationError:
        problems.append(
            f"{obj}: annotation {ANNOTATION_GANG_WAIT_TIME} {raw!r} is not a Go duration; "
            f"using the default timeout {default:g}s"
        )
        return default
    if seconds == 0:
        return default
    if seconds < 0:
        problems.append(
            f"{obj}: annotation {ANNOTATION_GANG_WAIT_TIME} {raw!r} is negative; "
            f"using the default timeout {default:g}s"
        )
        return default
    return seconds


def _pod_group_wait_time(
    spec: Mapping[str, Any], args: CoschedulingArgs, obj: str, problems: list[str]
) -> float:
    timeout = spec.get("scheduleTimeoutSeconds")
    default = float(args.default_timeout)
    if timeout is None:
        return default
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        problems.append(
            f"{obj}: spec.scheduleTimeoutSeconds {timeout!r} is not an integer; "
            f"using the default timeout {default:g}s"
        )
        return default
    if timeout > 0:
        return float(timeout)
    problems.append(
        f"{obj}: spec.scheduleTimeoutSeconds {timeout} is not positive; using the default timeout"
    )
    return default


def _creation_time(meta: Mapping[str, Any]) -> float | None:
    raw = meta.get("creationTimestamp")
    if not raw:
        return None
    try:
        return parse_time(str(raw))
    except ValueError:
        return None
