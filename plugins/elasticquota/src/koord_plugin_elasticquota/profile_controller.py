"""koord-manager's ``quotaprofile`` controller (Koordinator's ``pkg/quota-controller/profile``): each
ElasticQuotaProfile keeps a root ElasticQuota of its own quota tree sized by the nodes it selects.

A reconcile of a profile (key ``namespace/name``):

1. gives the profile a ``quota.scheduling.koordinator.sh/tree-id`` label when it has none (FNV-1a 64 of
   ``namespace/name``);
2. sums the selected nodes' allocatable (and the part on unschedulable or not-Ready nodes), scaled by
   ``spec.resourceRatio``, and creates or updates the quota ``spec.quotaName`` in the profile's namespace:
   labels (profile name, ``spec.quotaLabels``, tree id, ``is-root: "true"``) and the total / unschedulable
   annotations merged over the quota's own, ``spec.min`` the total of the resource keys, ``spec.max``
   ``MaxInt64/2000`` each;
3. comes back after 10 s (2 s after a failed create or update, which is recorded as a Warning Event on the
   profile: ``CreateQuotaFailed`` / ``UpdateQuotaFailed``), so node changes reach the quota within 10 s
   as in Koordinator, which does not watch nodes either.

A deleted profile is forgotten; its quota stays (Koordinator sets no owner reference). A profile that leaves
no quota to build (no ``spec.quotaName``, a node selector that does not parse) or a selected node whose
allocatable does not parse is reported (a Warning Event ``InvalidQuotaProfile`` on the profile naming the
object and the field, and the log) before anything is written, and retried with the controller's backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final

from koord_framework.api.quantity import Quantity
from koord_framework.cluster.port import EventRecord
from koord_framework.errors import ClusterError, KoordError
from koord_framework.manager.controllerplugin import ManagerController
from koord_framework.plugin import NoArgs
from koord_plugin_elasticquota.quota_object import LABEL_QUOTA_TREE_ID
from koord_plugin_elasticquota.quota_profile import ProfileError, QuotaPlan, QuotaProfile, plan_root_quota

__all__ = [
    "FAILED_REQUEUE",
    "REASON_CREATE_QUOTA_FAILED",
    "REASON_INVALID_PROFILE",
    "REASON_UPDATE_QUOTA_FAILED",
    "RESYNC",
    "QuotaProfileController",
]

log = logging.getLogger("koord.manager.quotaprofile")

REASON_CREATE_QUOTA_FAILED: Final = "CreateQuotaFailed"
REASON_UPDATE_QUOTA_FAILED: Final = "UpdateQuotaFailed"
REASON_INVALID_PROFILE: Final = "InvalidQuotaProfile"
RESYNC: Final = 10.0
"""Seconds after which a profile is reconciled again (Koordinator's ``RequeueAfter: 10 * time.Second``)."""
FAILED_REQUEUE: Final = 2.0
"""Seconds after a failed quota create or update (``RequeueAfter: 2 * time.Second``)."""
PROFILE: Final = "ElasticQuotaProfile"
QUOTA: Final = "ElasticQuota"
QUOTA_API_VERSION: Final = "scheduling.sigs.k8s.io/v1alpha1"
COMPONENT: Final = "quotaprofile-controller"


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def _generation_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """controller-runtime's ``GenerationChangedPredicate`` on an update."""
    return (old.get("metadata") or {}).get("generation") != (new.get("metadata") or {}).get("generation")


def _same_quantities(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Two resource lists with the same names and values (``5`` equals ``5000m``)."""
    a, b = a or {}, b or {}
    if set(a) != set(b):
        return False
    try:
        return all(Quantity.parse(a[k]) == Quantity.parse(b[k]) for k in a)
    except ValueError:
        return False


class QuotaProfileController(ManagerController[NoArgs]):
    """Root quotas from ElasticQuotaProfiles (Koordinator's ``QuotaProfileReconciler``)."""

    name: ClassVar[str] = "quotaprofile"
    watches: ClassVar[tuple[str, ...]] = (PROFILE, "Node")

    def all_keys(self) -> Iterable[str]:
        return [_key(p) for p in self.context.list(PROFILE)]

    def keys_for(
        self, kind: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> Iterable[str]:
        # Koordinator watches profiles only, behind GenerationChangedPredicate (create and delete pass);
        # node changes arrive by the 10 s requeue.
        if kind != PROFILE:
            return ()
        if old is not None and new is not None and not _generation_changed(old, new):
            return ()
        return (_key(new if new is not None else old or {}),)

    # --- reconcile --------------------------------------------------------------------------------------
    def reconcile(self, key: str) -> float | None:
        namespace, _, name = key.partition("/")
        obj = self.context.get(PROFILE, name, namespace)
        if obj is None:
            return None  # deleted: nothing to do, the quota is left as it is
        try:
            profile = QuotaProfile.parse(obj)
            plan = plan_root_quota(profile, self.context.list("Node"))
        except ProfileError as exc:
            self._warn(obj, REASON_INVALID_PROFILE, str(exc))
            raise KoordError(str(exc)) from None
        for warning in profile.warnings:
            self._warn(obj, REASON_INVALID_PROFILE, warning)
        if not ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_QUOTA_TREE_ID):
            # Raises on failure: retried with backoff before the quota is written, as Koordinator does.
            self.context.cluster.patch(
                PROFILE, name, namespace, {"metadata": {"labels": {LABEL_QUOTA_TREE_ID: profile.tree_id}}}
            )
        return self._ensure_quota(obj, profile, plan)

    def _ensure_quota(self, obj: Mapping[str, Any], profile: QuotaProfile, plan: QuotaPlan) -> float:
        cluster = self.context.cluster
        current = cluster.try_get(QUOTA, profile.quota_name, profile.namespace)
        if current is None:
            quota = plan.apply(
                {
                    "apiVersion": QUOTA_API_VERSION,
                    "kind": QUOTA,
                    "metadata": {"name": profile.quota_name, "namespace": profile.namespace},
                    "spec": {},
                }
            )
            try:
                cluster.create(quota)
            except ClusterError as exc:
                self._warn(obj, REASON_CREATE_QUOTA_FAILED, f"failed to create quota, err: {exc}")
                return FAILED_REQUEUE
            return RESYNC
        wanted = plan.apply(current)
        if self._unchanged(current, wanted):
            return RESYNC
        try:
            cluster.update(wanted)
        except ClusterError as exc:
            self._warn(obj, REASON_UPDATE_QUOTA_FAILED, f"failed to update quota, err: {exc}")
            return FAILED_REQUEUE
        return RESYNC

    @staticmethod
    def _unchanged(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
        cur_meta, new_meta = current.get("metadata") or {}, wanted.get("metadata") or {}
        cur_spec, new_spec = current.get("spec") or {}, wanted.get("spec") or {}
        return (
            (cur_meta.get("labels") or {}) == new_meta["labels"]
            and (cur_meta.get("annotations") or {}) == new_meta["annotations"]
            and _same_quantities(cur_spec.get("min"), new_spec["min"])
            and _same_quantities(cur_spec.get("max"), new_spec["max"])
        )

    def _warn(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        log.warning("quotaprofile %s: %s: %s", _key(obj), reason, message)
        cluster = self.context.cluster
        cluster.record_event(
            EventRecord(
                kind=PROFILE,
                namespace=str(meta.get("namespace") or ""),
                name=str(meta.get("name") or ""),
                reason=reason,
                message=message,
                type="Warning",
                component=COMPONENT,
                time=cluster.clock.now(),
            )
        )
