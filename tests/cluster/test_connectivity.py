"""An API server outage is told in a few lines: unreachable, summaries while down, reachable again."""

from __future__ import annotations

import logging

import pytest

from koord_framework.cluster.kube.connectivity import Connectivity, install_filter


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_is_one_line_down_summaries_and_one_line_up(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    tracker = Connectivity("https://127.0.0.1:6443", summary_every=10.0, clock=clock)
    caplog.set_level(logging.INFO, logger="koord_framework.cluster.kube.connectivity")
    tracker.ok()
    assert caplog.records == []
    for i in range(2500):  # 100 requests/s for 25 s, each failing
        clock.now = i / 100
        tracker.failed("Caused by NewConnectionError('Connection refused'))")
    clock.now = 25.0
    tracker.ok()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4
    assert (
        lines[0]
        == "API server https://127.0.0.1:6443 is unreachable: NewConnectionError('Connection refused'"
    )
    assert lines[1].startswith(
        "API server https://127.0.0.1:6443 still unreachable after 10 s: 1001 requests"
    )
    assert lines[2].startswith(
        "API server https://127.0.0.1:6443 still unreachable after 20 s: 2001 requests"
    )
    assert lines[3].startswith("API server https://127.0.0.1:6443 is reachable again after 25.0 s")
    assert "2500 requests failed" in lines[3]
    assert tracker.outages == 1 and not tracker.down


def test_connection_warnings_are_held_back_only_while_down(caplog: pytest.LogCaptureFixture) -> None:
    install_filter()
    tracker = Connectivity("https://127.0.0.1:1", clock=_Clock())
    watch_log = logging.getLogger("koord_framework.cluster.kube.watch")
    caplog.set_level(logging.INFO)
    urllib3_log = logging.getLogger("urllib3.connectionpool")
    urllib3_log.warning("Retrying (Retry(total=2)) after connection broken by 'NewConnectionError'")
    watch_log.warning("watch pods: GET /api/v1/pods: Max retries exceeded; retrying in 1.0 s")
    tracker.failed("Connection refused")
    watch_log.warning("watch pods: GET /api/v1/pods: Max retries exceeded; retrying in 2.0 s")
    watch_log.warning("watch pods: something else")
    watch_log.error("watch pods: Connection refused, and this is an error")
    tracker.ok()
    watch_log.warning("watch pods: GET /api/v1/pods: Max retries exceeded; retrying in 1.0 s")
    lines = [r.getMessage() for r in caplog.records]
    assert not any(line.startswith("Retrying (") for line in lines)
    assert lines.count("watch pods: GET /api/v1/pods: Max retries exceeded; retrying in 1.0 s") == 2
    assert "watch pods: GET /api/v1/pods: Max retries exceeded; retrying in 2.0 s" not in lines
    assert "watch pods: something else" in lines
    assert "watch pods: Connection refused, and this is an error" in lines
    assert "1 log lines held back" in lines[-2]
