"""Status codes and ``Status``, as kube-scheduler's framework defines them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    """An internal error: the pod is retried with backoff, never counted as 'does not fit'."""
    UNSCHEDULABLE = 2
    """The pod does not fit now; preemption (PostFilter) may help."""
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    """The pod does not fit and preemption on this node cannot help."""
    WAIT = 4
    """Permit only: hold the pod until allowed, rejected, or timed out."""
    SKIP = 5
    """PreFilter/PreScore: skip this plugin's Filter/Score for this pod. Bind: let the next binder bind."""
    PENDING = 6
    """PreEnqueue/PreFilter: the pod waits for something outside the scheduler (a gang, a quota)."""

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of a plugin at an extension point: a code, reasons and the plugin that said so."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    """The plugin that returned a non-success status (filled by the framework)."""
    error: BaseException | None = field(default=None, compare=False)

    # --- constructors -------------------------------------------------------------------------------
    @staticmethod
    def success() -> Status:
        return SUCCESS

    @staticmethod
    def unschedulable(*reasons: str) -> Status:
        return Status(Code.UNSCHEDULABLE, reasons)

    @staticmethod
    def unresolvable(*reasons: str) -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @staticmethod
    def as_error(exc: BaseException | str) -> Status:
        if isinstance(exc, BaseException):
            return Status(Code.ERROR, (f"{type(exc).__name__}: {exc}",), error=exc)
        return Status(Code.ERROR, (exc,))

    @staticmethod
    def skip() -> Status:
        return SKIP

    @staticmethod
    def wait(*reasons: str) -> Status:
        return Status(Code.WAIT, reasons)

    # --- predicates ---------------------------------------------------------------------------------
    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code is Code.SKIP

    @property
    def is_wait(self) -> bool:
        return self.code is Code.WAIT

    @property
    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending: the pod does not go on this cycle."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    @property
    def is_error(self) -> bool:
        return self.code is Code.ERROR

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        # Not ``dataclasses.replace``: this runs once per rejected node, and replace is several times slower.
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin, self.error)

    def __str__(self) -> str:
        head = self.code.label if not self.plugin else f"{self.code.label} ({self.plugin})"
        return f"{head}: {self.message}" if self.reasons else head


SUCCESS = Status()
SKIP = Status(Code.SKIP)
