"""Fake plugins for the framework's contract tests: each extension point's behaviour is a function.

``fake_plugin("A", log, filter=lambda p, state, pod, node: Status())`` builds a plugin class called ``A``
that implements exactly the points given, appends ``"A.Filter:<node>"`` (etc.) to ``log`` on every call
and returns what the function returns. A behaviour may be a constant instead of a function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koord_framework.scheduler.interface import (
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    SchedulerPlugin,
    ScoreExtensions,
    ScorePlugin,
)
from koord_framework.scheduler.status import Status

FakeFactory = Callable[..., type[SchedulerPlugin]]


def _call(behaviour: Any, *args: Any) -> Any:  # the fakes' results are what the test says they are
    return behaviour(*args) if callable(behaviour) else behaviour


def build_fake(name: str, log: list[str], **b: Any) -> type[SchedulerPlugin]:
    bases: list[type] = [SchedulerPlugin]
    ns: dict[str, Any] = {"name": name}
    if "pre_enqueue" in b:
        bases.append(PreEnqueuePlugin)

        def pre_enqueue(self: Any, pod: Any) -> Status:
            log.append(f"{name}.PreEnqueue:{pod.name}")
            out: Status = _call(b["pre_enqueue"], self, pod)
            return out

        ns["pre_enqueue"] = pre_enqueue
    if "pre_filter" in b:
        bases.append(PreFilterPlugin)

        def pre_filter(self: Any, state: Any, pod: Any, nodes: Any) -> Any:
            log.append(f"{name}.PreFilter")
            out = _call(b["pre_filter"], self, state, pod)
            return out if isinstance(out, tuple) else (None, out)

        ns["pre_filter"] = pre_filter
    if "filter" in b:
        bases.append(FilterPlugin)

        def filter_(self: Any, state: Any, pod: Any, node: Any) -> Status:
            log.append(f"{name}.Filter:{node.name}")
            out: Status = _call(b["filter"], self, state, pod, node)
            return out

        ns["filter"] = filter_
    if "post_filter" in b:
        bases.append(PostFilterPlugin)

        def post_filter(self: Any, state: Any, pod: Any, filtered: Any) -> Any:
            log.append(f"{name}.PostFilter")
            out = _call(b["post_filter"], self, state, pod, filtered)
            return out if isinstance(out, tuple) else (None, out)

        ns["post_filter"] = post_filter
    if "pre_score" in b:
        bases.append(PreScorePlugin)

        def pre_score(self: Any, state: Any, pod: Any, nodes: Any) -> Status:
            log.append(f"{name}.PreScore")
            out: Status = _call(b["pre_score"], self, state, pod, nodes)
            return out

        ns["pre_score"] = pre_score
    if "score" in b:
        bases.append(ScorePlugin)

        def score(self: Any, state: Any, pod: Any, node: Any) -> tuple[int, Status]:
            log.append(f"{name}.Score:{node.name}")
            out = _call(b["score"], self, state, pod, node)
            return out if isinstance(out, tuple) else (out, Status())

        ns["score"] = score
        if "normalize" in b:
            bases.append(ScoreExtensions)

            def normalize_score(self: Any, state: Any, pod: Any, scores: Any) -> Status:
                log.append(f"{name}.NormalizeScore")
                out = _call(b["normalize"], self, state, pod, scores)
                return out if isinstance(out, Status) else Status()

            ns["normalize_score"] = normalize_score
            ns["score_extensions"] = lambda self: self
    if "reserve" in b:
        bases.append(ReservePlugin)

        def reserve(self: Any, state: Any, pod: Any, node_name: str) -> Status:
            log.append(f"{name}.Reserve:{node_name}")
            out: Status = _call(b["reserve"], self, state, pod, node_name)
            return out

        def unreserve(self: Any, state: Any, pod: Any, node_name: str) -> None:
            log.append(f"{name}.Unreserve:{node_name}")

        ns["reserve"] = reserve
        ns["unreserve"] = unreserve
    if "permit" in b:
        bases.append(PermitPlugin)

        def permit(self: Any, state: Any, pod: Any, node_name: str) -> tuple[Status, float]:
            log.append(f"{name}.Permit:{pod.name}")
            out = _call(b["permit"], self, state, pod, node_name)
            return out if isinstance(out, tuple) else (out, 0.0)

        ns["permit"] = permit
    if "pre_bind" in b:
        bases.append(PreBindPlugin)

        def pre_bind(self: Any, state: Any, pod: Any, node_name: str) -> Status:
            log.append(f"{name}.PreBind:{node_name}")
            out: Status = _call(b["pre_bind"], self, state, pod, node_name)
            return out

        ns["pre_bind"] = pre_bind
    if "bind" in b:
        bases.append(BindPlugin)

        def bind(self: Any, state: Any, pod: Any, node_name: str) -> Status:
            log.append(f"{name}.Bind:{node_name}")
            out: Status = _call(b["bind"], self, state, pod, node_name)
            return out

        ns["bind"] = bind
    if "post_bind" in b:
        bases.append(PostBindPlugin)

        def post_bind(self: Any, state: Any, pod: Any, node_name: str) -> None:
            log.append(f"{name}.PostBind:{node_name}")

        ns["post_bind"] = post_bind
    if "events" in b:
        bases.append(EnqueueExtensions)
        ns["events_to_register"] = lambda self: list(b["events"])
    return type(name, tuple(bases), ns)


@pytest.fixture
def fake_plugin() -> FakeFactory:
    return build_fake


# The fixture the ``koord`` pytest plugin ships (imported here too until the plugin module lists it).
from koord_framework.testing.fixtures.scheduler import koord_scheduler_harness  # noqa: E402, F401
