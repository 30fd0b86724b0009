"""Min scaling (``core/scale_minquota_when_over_root_res.go``): when a parent's runtime is below the sum of
its children's mins, each child's min shrinks in proportion so that the mins fit again.

The manager keeps, per parent, the sum of the original mins of the children that take part in scaling and of
those that do not; a child's scaled min is ``(total - disabled sum) * min / enabled sum`` in float64 truncated
toward zero, as upstream (so a few units can be left over: the runtime split hands them out later).
"""

from __future__ import annotations

from koord_framework.api.resources import add, subtract_non_negative

__all__ = ["ScaleMinQuotaManager"]


class ScaleMinQuotaManager:
    def __init__(self) -> None:
        self.enabled_sum: dict[str, dict[str, int]] = {}
        self.disabled_sum: dict[str, dict[str, int]] = {}
        self.original_min: dict[str, dict[str, int]] = {}
        self.enabled: dict[str, bool] = {}

    def update(self, parent: str, child: str, min_: dict[str, int], enable: bool) -> None:
        self.enabled_sum.setdefault(parent, {})
        self.disabled_sum.setdefault(parent, {})
        if child in self.enabled:
            old = self.original_min.get(child, {})
            if self.enabled[child]:
                self.enabled_sum[parent] = subtract_non_negative(self.enabled_sum[parent], old)
            else:
                self.disabled_sum[parent] = subtract_non_negative(self.disabled_sum[parent], old)
        if enable:
            self.enabled_sum[parent] = add(self.enabled_sum[parent], min_)
        else:
            self.disabled_sum[parent] = add(self.disabled_sum[parent], min_)
        self.original_min[child] = dict(min_)
        self.enabled[child] = enable

    def remove(self, parent: str, child: str) -> None:
        old = self.original_min.get(child, {})
        if not self.enabled.get(child, False):
            if parent in self.disabled_sum:
                self.disabled_sum[parent] = subtract_non_negative(self.disabled_sum[parent], old)
        elif parent in self.enabled_sum:
            self.enabled_sum[parent] = subtract_non_negative(self.enabled_sum[parent], old)
        self.original_min.pop(child, None)
        self.enabled.pop(child, None)

    def scaled_min(self, total: dict[str, int] | None, parent: str, child: str) -> dict[str, int] | None:
        """The child's min under a parent total of ``total``; ``None`` when the child does not scale."""
        original = self.original_min.get(child)
        if total is None or original is None:
            return None
        if parent not in self.disabled_sum or parent not in self.enabled_sum:
            return None
        if not self.enabled.get(child, False):
            return None
        disabled, enabled = self.disabled_sum[parent], self.enabled_sum[parent]
        both = add(disabled, enabled)
        dims = [key for key, value in total.items() if value < both.get(key, 0)]
        scaled = dict(original)
        for key in dims:
            available = total.get(key, 0) - disabled.get(key, 0)
            if available <= 0:
                scaled[key] = 0
                continue
            enabled_total = enabled.get(key, 0)
            value = 0
            if enabled_total > 0:
                value = int(float(available) * float(original.get(key, 0)) / float(enabled_total))
            scaled[key] = value
        return scaled
