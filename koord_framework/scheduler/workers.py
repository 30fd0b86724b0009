"""A fixed pool of worker threads fed by one ``queue.SimpleQueue``: the scheduler's binding workers.

``concurrent.futures.ThreadPoolExecutor.submit`` builds a ``Future`` (with its own ``Condition``), takes a
semaphore and checks the pool size on every call: about a tenth of the scheduling thread's CPU on a real
cluster, for results nobody reads (a binding cycle reports through the cache, the queue and metrics).
Here a submit is one put on a C-implemented queue, which wakes one idle worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

__all__ = ["Workers"]

log = logging.getLogger(__name__)

_Task = tuple[Callable[..., Any], tuple[Any, ...]] | None


class Workers:
    """``submit(fn, *args)`` runs ``fn(*args)`` in one of ``count`` threads; ``shutdown`` runs what was
    submitted, then stops them. Exceptions of ``fn`` are logged (callers handle their own)."""

    def __init__(self, count: int, name: str) -> None:
        if count < 1:
            raise ValueError(f"a worker pool needs at least one thread, got {count}")
        self.count = count
        self.name = name
        self._tasks: SimpleQueue[_Task] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        # Under the lock, so that a task is never queued behind the stop marks of a racing shutdown.
        with self._lock:
            if self._shutdown:
                raise RuntimeError(f"{self.name}: cannot take work after shutdown")
            if not self._threads:
                for i in range(self.count):
                    thread = threading.Thread(target=self._run, name=f"{self.name}_{i}", daemon=True)
                    thread.start()
                    self._threads.append(thread)
            self._tasks.put((fn, args))

    def _run(self) -> None:
        tasks = self._tasks
        while True:
            task = tasks.get()
            if task is None:
                return
            fn, args = task
            try:
                fn(*args)
            except Exception:
                log.exception("%s: task %s failed", self.name, getattr(fn, "__qualname__", fn))

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(None)  # after every task already queued
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
