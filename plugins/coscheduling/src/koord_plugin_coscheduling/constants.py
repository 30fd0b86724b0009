"""Names Koordinator's Coscheduling reads and writes: labels, annotations, modes, match policies, messages.

Spelled exactly as ``apis/extension/coscheduling.go`` and the scheduler-plugins PodGroup API spell them, so a
workload written for Koordinator means the same thing here.
"""

from __future__ import annotations

from typing import Final

NAME: Final = "Coscheduling"

POD_GROUP_LABEL: Final = "pod-group.scheduling.sigs.k8s.io"
"""The PodGroup (CRD) a pod belongs to."""
LEGACY_POD_GROUP_NAME_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/name"
"""Deprecated lightweight-coscheduling label naming the gang."""
LEGACY_POD_GROUP_MIN_AVAILABLE_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/min-available"
"""Deprecated lightweight-coscheduling label with the gang's minimum."""

GANG_PREFIX: Final = "gang.scheduling.koordinator.sh"
ANNOTATION_GANG_NAME: Final = f"{GANG_PREFIX}/name"
ANNOTATION_GANG_MIN_NUM: Final = f"{GANG_PREFIX}/min-available"
ANNOTATION_GANG_WAIT_TIME: Final = f"{GANG_PREFIX}/waiting-time"
ANNOTATION_GANG_TOTAL_NUM: Final = f"{GANG_PREFIX}/total-number"
ANNOTATION_GANG_MODE: Final = f"{GANG_PREFIX}/mode"
ANNOTATION_GANG_GROUPS: Final = f"{GANG_PREFIX}/groups"
ANNOTATION_GANG_MATCH_POLICY: Final = f"{GANG_PREFIX}/match-policy"
ANNOTATION_ALIAS_GANG_MATCH_POLICY: Final = "pod-group.scheduling.sigs.k8s.io/match-policy"

GANG_MODE_STRICT: Final = "Strict"
GANG_MODE_NON_STRICT: Final = "NonStrict"

MATCH_POLICY_ONLY_WAITING: Final = "only-waiting"
MATCH_POLICY_WAITING_AND_RUNNING: Final = "waiting-and-running"
MATCH_POLICY_ONCE_SATISFIED: Final = "once-satisfied"
MATCH_POLICIES: Final = (
    MATCH_POLICY_ONLY_WAITING,
    MATCH_POLICY_WAITING_AND_RUNNING,
    MATCH_POLICY_ONCE_SATISFIED,
)

ANNOTATION_BIND_GANG_GROUP_ID: Final = "internal.scheduling.koordinator.sh/bind-gang-group-id"
ANNOTATION_BIND_GANG_MEMBER_COUNT: Final = "internal.scheduling.koordinator.sh/bind-gang-member-count"
DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID: Final = "scheduling.koordinator.sh/bind-gang-group-id"
DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT: Final = "scheduling.koordinator.sh/bind-gang-member-count"

GANG_FROM_POD_GROUP_CRD: Final = "GangFromPodGroupCrd"
GANG_FROM_POD_ANNOTATION: Final = "GangFromPodAnnotation"

# Permit outcomes of the gang manager (Koordinator's core.Status values).
PERMIT_POD_GROUP_NOT_SPECIFIED: Final = "PodGroup not specified"
PERMIT_POD_GROUP_NOT_FOUND: Final = "PodGroup not found"
PERMIT_SUCCESS: Final = "Success"
PERMIT_WAIT: Final = "Wait"

# Messages (Koordinator's, word for word).
ERR_POD_HAS_NOT_BEEN_ATTEMPTED: Final = "gangGroup {} is scheduling and this pod has not been attempted"
ERR_REPRESENTATIVE_POD_ALREADY_EXISTS: Final = "representative pod {} of gangGroupID {} already exists"
ERR_POD_IS_NOT_EXISTS_IN_GANG_CACHE: Final = "pod {} is not exists in gangCache"
MSG_GANG_NOT_FOUND: Final = "Gang not found"

# Why a gang scheduling context ended (Koordinator's reasons, for logs and the report).
REASON_GANG_IS_NIL: Final = "gang is nil, may be already deleted"
REASON_ALL_PENDING_PODS_ALREADY_ATTEMPTED: Final = "all pending pods is already been attempted"
REASON_GANG_IS_SUCCEED: Final = "gang is already succeed"
REASON_MEMBERS_HELD_BACK: Final = "some pending pods are held back by other plugins"

# PodGroup status phases (scheduler-plugins v1alpha1).
PHASE_PENDING: Final = "Pending"
PHASE_PRE_SCHEDULING: Final = "PreScheduling"
PHASE_SCHEDULING: Final = "Scheduling"
PHASE_SCHEDULED: Final = "Scheduled"
PHASE_RUNNING: Final = "Running"
PHASE_FINISHED: Final = "Finished"
PHASE_FAILED: Final = "Failed"
