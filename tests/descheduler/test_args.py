"""The argument pieces descheduler plugins share, and the problems they report for ``fail``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from koord_framework.descheduler.args import PriorityThreshold, fail, priority_threshold_problems

BOTH = "priority threshold misconfigured, only one of priorityThreshold fields can be set"


@pytest.mark.parametrize(
    "threshold",
    [
        None,
        PriorityThreshold(),
        PriorityThreshold(value=10),
        PriorityThreshold(name="high"),
        PriorityThreshold(value=0),
    ],
)
def test_one_of_value_and_name_is_fine(threshold: PriorityThreshold | None) -> None:
    assert priority_threshold_problems(threshold) == []


def test_value_and_name_together_are_refused_where_they_stand() -> None:
    both = PriorityThreshold(value=0, name="high")
    assert priority_threshold_problems(both) == [(("priorityThreshold",), BOTH, None)]
    nested = ("nodePools", 1, "priorityThreshold")
    with pytest.raises(ValidationError) as err:
        fail("SomeArgs", priority_threshold_problems(both, nested))
    ((loc, msg),) = [(e["loc"], e["msg"]) for e in err.value.errors()]
    assert (loc, msg) == (nested, BOTH)
