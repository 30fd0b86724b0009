"""The controller loop's ``RequeueAfter``: a reconcile that returns seconds comes back after them, an event
meanwhile reconciles the key at once, ``None`` forgets it, and a failure still backs off."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter

from koord_framework.manager.controller import Controller, ControllerLoop


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.answer: float | None = 10.0
        self.fail = False

    def all_keys(self) -> Iterable[str]:
        return ["a"]

    def reconcile(self, key: str) -> float | None:
        self.seen.append(key)
        if self.fail:
            raise ValueError("boom")
        return self.answer


def errors() -> Counter:
    return Counter("e", "e", ["controller"], registry=CollectorRegistry())


def test_requeue_after_event_and_forget() -> None:
    r = Recorder()
    c = Controller(r)
    errs = errors()
    c.enqueue("a")
    assert c.process(errs, now=lambda: 100.0) == 1
    assert c.next_retry() == 110.0
    assert c.process(errs, now=lambda: 105.0) == 0  # not due yet
    c.enqueue("a")  # an event: at once, despite the pending requeue
    assert c.process(errs, now=lambda: 105.0) == 1
    assert c.next_retry() == 115.0
    r.answer = None
    assert c.process(errs, now=lambda: 115.0) == 1
    assert c.next_retry() is None  # forgotten
    assert c.process(errs, now=lambda: 1000.0) == 0
    assert r.seen == ["a", "a", "a"]


def test_failure_backs_off_as_before() -> None:
    r = Recorder()
    r.fail = True
    c = Controller(r)
    c.enqueue("a")
    c.process(errors(), now=lambda: 0.0)
    retry = c.next_retry()
    assert retry is not None and 0 < retry < 1
    assert c.pending()


def test_a_stop_ends_the_loop_without_waiting_for_the_next_resync() -> None:
    """SIGTERM sets the stop event; the loop used to notice it only at its next resync (a minute by
    default), past the 30 s drain grace."""
    r = Recorder()
    r.answer = None
    loop = ControllerLoop([Controller(r)], CollectorRegistry(), resync=3600.0)
    stop = threading.Event()
    rounds = threading.Event()
    runner = threading.Thread(target=loop.run, args=(stop,), kwargs={"on_round": rounds.set}, daemon=True)
    runner.start()
    assert rounds.wait(30), "the loop ran its first round"
    stop.set()
    runner.join(30)  # an hour's resync otherwise
    assert not runner.is_alive()
