"""Probing a long-running component from a test: a free loopback port, an HTTP GET of its health endpoints,
and waiting for a condition with a deadline.

For tests of a command on ``koord_framework.component.ComponentRunner`` (its ``/healthz``, ``/readyz`` and
``/metrics``), the framework's own and a component author's alike.
"""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def free_port() -> int:
    """A loopback TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> tuple[int, str]:
    """``GET http://127.0.0.1:<port><path>``: the status and body, error statuses included."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll ``check`` until it is true; a connection error counts as "not yet" (the server may not listen
    yet). Fails the test naming ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if check():
                return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")
