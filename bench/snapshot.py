"""``python -m bench.snapshot``: peak RSS and rate of ``koord snapshot`` on a large served cluster.

The cluster is generated on the fly by index (``koord_framework.testing.apiserver.FakeApiServer`` over lazy
sequences): neither the server nor ``koord snapshot`` (a child process, whose own peak RSS is read with
``wait4``) ever holds it whole. Streaming shows as an RSS that stays flat as the cluster grows.

    python -m bench.snapshot --sizes 1000x10000,5000x50000 [--anonymize]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, overload

from bench.workloads import node, pod
from koord_framework.cluster.kinds import KindRegistry
from koord_framework.testing.apiserver import FakeApiServer

Obj = dict[str, Any]


class Generated(Sequence[Obj]):
    """``count`` objects made by ``make(i)`` when asked for, in the order the server lists them."""

    def __init__(self, count: int, make: Callable[[int], Obj]) -> None:
        self.count, self.make = count, make

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, index: int) -> Obj: ...
    @overload
    def __getitem__(self, index: slice) -> list[Obj]: ...
    def __getitem__(self, index: int | slice) -> Obj | list[Obj]:
        if isinstance(index, slice):
            return [self.make(i) for i in range(*index.indices(self.count))]
        return self.make(index)


def cluster(nodes: int, pods: int) -> Callable[[str], Sequence[Obj]]:
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110"}

    def make_pod(i: int) -> Obj:
        obj = pod(
            f"pod-{i:07d}",
            {"cpu": "500m", "memory": "1Gi"},
            namespace="team",
            labels={"app": f"app-{i % 500}", "koordinator.sh/qosClass": "LS"},
            node_name=f"node-{i % nodes:05d}",
        )
        obj["metadata"]["uid"] = f"00000000-0000-0000-0000-{i:012d}"
        obj["metadata"]["managedFields"] = [{"manager": "kubelet", "operation": "Update"}]
        return obj

    def make_metric(i: int) -> Obj:
        return {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": f"node-{i:05d}"},
            "status": {
                "updateTime": "2024-01-01T00:00:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "8", "memory": "32Gi"}}},
            },
        }

    table: dict[str, Sequence[Obj]] = {
        "Node": Generated(nodes, lambda i: node(f"node-{i:05d}", i, resources)),
        "Pod": Generated(pods, make_pod),
        "NodeMetric": Generated(nodes, make_metric),
    }
    return lambda kind: table.get(kind, [])


def measure(nodes: int, pods: int, anonymize: bool) -> dict[str, Any]:
    with (
        FakeApiServer(KindRegistry.discover(), cluster(nodes, pods)) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        kubeconfig = server.write_kubeconfig(Path(tmp) / "kubeconfig")
        out = Path(tmp) / "snap"
        argv = [
            sys.executable,
            "-m",
            "koord_framework",
            "snapshot",
            "--kubeconfig",
            str(kubeconfig),
            "-o",
            str(out),
            "-q",
        ]
        if anonymize:
            argv.append("--anonymize")
        started = time.perf_counter()
        child = subprocess.Popen(argv, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(child.pid, 0)
        took = time.perf_counter() - started
        assert child.stderr is not None
        err = child.stderr.read().decode()
        child.stderr.close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"koord snapshot failed: {err}")
        size = sum(p.stat().st_size for p in out.iterdir())
    return {
        "nodes": nodes,
        "pods": pods,
        "anonymize": anonymize,
        "seconds": round(took, 1),
        "objects_per_second": round((2 * nodes + pods) / took),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "written_mib": round(size / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot", description=__doc__)
    parser.add_argument("--sizes", default="1000x10000,5000x50000", help="NODESxPODS,...")
    parser.add_argument("--anonymize", action="store_true")
    args = parser.parse_args(argv)
    for size in args.sizes.split(","):
        nodes, pods = (int(x) for x in size.split("x"))
        print(json.dumps(measure(nodes, pods, args.anonymize)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
