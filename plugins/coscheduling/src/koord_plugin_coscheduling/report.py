"""Per-gang reports: what ``koord simulate`` prints for each gang (members bound, waiting, rejected, why)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from koord_framework.cluster.clock import format_time

if TYPE_CHECKING:
    from koord_plugin_coscheduling.manager import GangManager

__all__ = ["GangReport", "gang_reports"]


@dataclass
class GangReport:
    """One gang's state as ``koord simulate`` and ``koord explain`` report it."""

    gang: str
    gang_group: str
    mode: str
    match_policy: str
    min_member: int
    total: int
    members: int
    bound: int
    waiting: int
    pending: int
    satisfied: bool
    initialized: bool
    wait_seconds: float
    verdict: str
    """``Satisfied``, ``Waiting``, ``Rejected`` or ``Pending`` (never tried as a block)."""
    why: str = ""
    problems: list[str] = field(default_factory=list)
    permit: list[dict[str, Any]] = field(default_factory=list)
    """The Permit decisions of its members, oldest first (``--explain``)."""

    def to_dict(self, explain: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gang": self.gang,
            "gangGroup": self.gang_group,
            "mode": self.mode,
            "matchPolicy": self.match_policy,
            "minMember": self.min_member,
            "totalNumber": self.total,
            "members": self.members,
            "bound": self.bound,
            "waiting": self.waiting,
            "pending": self.pending,
            "onceSatisfied": self.satisfied,
            "verdict": self.verdict,
            "why": self.why,
        }
        if self.problems:
            out["problems"] = list(self.problems)
        if explain:
            out["permit"] = list(self.permit)
        return out


def gang_reports(manager: GangManager) -> list[GangReport]:
    out: list[GangReport] = []
    with manager.cache.lock:
        for gid in sorted(manager.cache.gangs):
            gang = manager.cache.gangs[gid]
            bound = len(gang.bound_children)
            waiting = len(gang.waiting_for_bind_children)
            pending = len(gang.pending_children)
            rejection = manager.rejections.get(gang.gang_group_id, "")
            decisions = list(manager.decisions.get(gid, ()))
            if not gang.has_gang_init:
                verdict = "Pending"
                why = (
                    "; ".join(gang.problems)
                    or "the gang is not initialised (no PodGroup or gang annotations yet)"
                )
            elif gang.once_resource_satisfied and bound >= min(gang.min_required, len(gang.children)):
                verdict, why = "Satisfied", ""
            elif waiting:
                verdict, why = "Waiting", f"{waiting} member(s) wait at Permit for the rest of the gang group"
            elif rejection:
                verdict, why = "Rejected", rejection
            elif len(gang.children) < gang.min_required:
                verdict = "Pending"
                why = f"only {len(gang.children)} of {gang.min_required} member pods exist"
            elif gang.once_resource_satisfied:
                verdict, why = "Satisfied", ""
            else:
                verdict = "Pending"
                why = decisions[-1].message if decisions else "not scheduled as a block yet"
            out.append(
                GangReport(
                    gid,
                    gang.gang_group_id,
                    gang.mode,
                    gang.match_policy,
                    gang.min_required,
                    gang.total_children,
                    len(gang.children),
                    bound,
                    waiting,
                    pending,
                    gang.once_resource_satisfied,
                    gang.has_gang_init,
                    gang.wait_time,
                    verdict,
                    why,
                    list(gang.problems),
                    [
                        {"pod": d.pod, "decision": d.outcome, "message": d.message, "at": format_time(d.at)}
                        for d in decisions
                    ],
                )
            )
    return out
