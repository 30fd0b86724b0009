"""The binding worker pool: runs every task submitted before shutdown, in its threads, and then stops."""

from __future__ import annotations

import threading

import pytest

from koord_framework.scheduler.workers import Workers


def test_runs_tasks_in_named_threads_and_drains_on_shutdown() -> None:
    pool = Workers(4, "binder")
    done: list[int] = []
    names: set[str] = set()
    lock = threading.Lock()
    gate = threading.Event()

    def task(i: int) -> None:
        gate.wait(5)
        with lock:
            done.append(i)
            names.add(threading.current_thread().name)

    for i in range(50):
        pool.submit(task, i)
    gate.set()
    pool.shutdown(wait=True)
    assert sorted(done) == list(range(50))
    assert names <= {f"binder_{i}" for i in range(4)}
    with pytest.raises(RuntimeError):
        pool.submit(task, 99)


def test_a_failing_task_does_not_stop_its_worker(caplog: pytest.LogCaptureFixture) -> None:
    pool = Workers(1, "w")
    out: list[str] = []

    def boom() -> None:
        raise ValueError("boom")

    pool.submit(boom)
    pool.submit(out.append, "after")
    pool.shutdown()
    assert out == ["after"]
    assert "boom" in caplog.text


def test_needs_a_thread() -> None:
    with pytest.raises(ValueError):
        Workers(0, "none")
