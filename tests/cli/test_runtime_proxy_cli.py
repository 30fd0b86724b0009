"""``koord runtime-proxy``: flags, probes and the exit status (against a fake CRI runtime)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from koord_framework.cli import runtimeproxy
from koord_framework.cli.main import build_parser, main
from koord_framework.runtimeproxy.proto import api_pb2 as cri
from koord_framework.testing.probes import free_port, get, wait_for
from tests.runtimeproxy.fakes import FakeRuntime, Kubelet


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="kpc-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["runtime-proxy", *argv])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--backend-runtime-mode", "Podman"], "unknown runtime engine backend"),
        (["--backend-runtime-mode", "Docker"], "not supported here"),
        (["--runtime-hook-timeout", "soon"], "--runtime-hook-timeout"),
        (["--runtime-hook-timeout", "0s"], "must be positive"),
        (["--health-address", "nowhere"], "--health-address"),
        (
            ["--koord-runtimeproxy-endpoint", "/x.sock", "--remote-runtime-service-endpoint", "/x.sock"],
            "a loop",
        ),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runtime-proxy", *argv]) == 2
    assert message in capsys.readouterr().err


def test_serves_until_stopped_ready_once_the_runtime_answers(workdir: Path) -> None:
    port = free_port()
    args = _args(
        "--koord-runtimeproxy-endpoint", str(workdir / "proxy.sock"),
        "--remote-runtime-service-endpoint", str(workdir / "runtime.sock"),
        "--hook-config-dir", str(workdir / "hooks.d"),
        "--health-address", f"127.0.0.1:{port}",
    )  # fmt: skip
    stop = threading.Event()
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(runtimeproxy.run(args, stop)), daemon=True)
    worker.start()
    runtime = None
    try:
        wait_for(lambda: get(port, "/healthz")[0] == 200, 10, "/healthz")
        assert get(port, "/readyz")[0] == 503  # no runtime yet: waiting for Version
        runtime = FakeRuntime(str(workdir / "runtime.sock")).start()
        wait_for(lambda: get(port, "/readyz")[0] == 200, 20, "/readyz once the runtime answers")
        kubelet = Kubelet(str(workdir / "proxy.sock"))
        assert kubelet.call("Version", cri.VersionRequest(), cri.VersionResponse).runtime_name == "fake"
        kubelet.close()
    finally:
        stop.set()
        worker.join(15)
        if runtime is not None:
            runtime.stop()
    assert result == [0]
    assert not (workdir / "proxy.sock").exists()  # the socket is removed on the way out


def test_a_socket_it_cannot_listen_on_ends_it_with_exit_1(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = FakeRuntime(str(workdir / "runtime.sock")).start()
    (workdir / "file").write_text("")
    try:
        code = main(
            [
                "runtime-proxy",
                "--koord-runtimeproxy-endpoint", str(workdir / "file" / "proxy.sock"),
                "--remote-runtime-service-endpoint", runtime.socket,
                "--hook-config-dir", str(workdir),
                "--health-address", "127.0.0.1:0",
                "--duration", "20",
            ]
        )  # fmt: skip
    finally:
        runtime.stop()
    assert code == 1
    assert "koord runtime-proxy: fatal:" in capsys.readouterr().err
