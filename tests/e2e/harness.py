"""A real etcd + kube-apiserver on loopback, for the end-to-end tests and bench/kube_e2e.py.

Binaries: ``$KUBEBUILDER_ASSETS`` (envtest layout: ``kube-apiserver``, ``etcd``) when set; otherwise
kube-apiserver v1.20.2 built once by ``tests/e2e/build_apiserver.sh`` into ``$KOORD_E2E_CACHE``
(default ``/var/cache/koord-e2e``) and Debian's etcd (``tests/e2e/setup.sh`` installs it).

The flags handle what a bare API server without kube-controller-manager lacks (each found the hard way,
see docs/kubernetes.md): no ServiceAccount admission (no controller creates the ``default`` account), no
TaintNodesByCondition admission (nothing would ever remove the not-ready taint from test Nodes), and no
endpoint reconciler (it would try to publish 127.0.0.1, which validation rejects).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
K8S_VERSION = "v1.20.2"
ADMIN_TOKEN = "koord-e2e-admin-token"


class HarnessError(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("KOORD_E2E_CACHE") or "/var/cache/koord-e2e")


def built_bin_dir() -> Path:
    return cache_dir() / f"k8s-{K8S_VERSION}" / "bin"


def ensure_binaries(extra: tuple[str, ...] = (), *, log: Path | None = None) -> dict[str, Path]:
    """Paths of etcd and kube-apiserver (and ``extra`` binaries), installing / building what is missing."""
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    found: dict[str, Path] = {}
    if assets and not extra:
        for name in ("kube-apiserver", "etcd"):
            path = Path(assets) / name
            if not path.is_file():
                raise HarnessError(f"KUBEBUILDER_ASSETS={assets} has no {name}")
            found[name] = path
        return found
    if shutil.which("etcd") is None:
        _run_script(HERE / "setup.sh", {}, log)
    etcd = shutil.which("etcd")
    if etcd is None:
        raise HarnessError("etcd is not installed and tests/e2e/setup.sh could not install it")
    found["etcd"] = Path(etcd)
    wanted = ("kube-apiserver", *extra)
    bins = built_bin_dir()
    if not all((bins / name).is_file() for name in wanted):
        _run_script(HERE / "build_apiserver.sh", {"BINS": " ".join(wanted)}, log)
    for name in wanted:
        if not (bins / name).is_file():
            raise HarnessError(f"{name} missing from {bins} after build_apiserver.sh")
        found[name] = bins / name
    return found


def _run_script(script: Path, env: dict[str, str], log: Path | None) -> None:
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        done = subprocess.run(
            ["bash", str(script)],
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    finally:
        if log is not None:
            out.close()  # type: ignore[union-attr]
    if done.returncode != 0:
        raise HarnessError(f"{script.name} failed (exit {done.returncode}); see {log or 'its output'}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary_minor_version(path: Path) -> int:
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=False).stdout
    # "Kubernetes v1.20.2"
    try:
        return int(out.strip().split("v1.")[1].split(".")[0])
    except (IndexError, ValueError):
        return 30


@dataclass
class ApiServer:
    """A running etcd + kube-apiserver. ``stop`` tears both down."""

    workdir: Path
    url: str
    kubeconfig: Path
    token: str
    etcd_url: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def kubeconfig_for(self, user: str) -> Path:
        """A kubeconfig for another identity (same admin rights; distinct user name in audit/events)."""
        path = self.workdir / f"kubeconfig-{user}"
        if not path.exists():
            write_kubeconfig(path, self.url, f"{user}-token")
        return path

    def request(self, method: str, path: str, body: object | None = None) -> tuple[int, dict[str, object]]:
        """A raw admin request, independent of the adapter under test."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=30) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else {}
        except urllib.error.HTTPError as err:
            raw = err.read()
            return err.code, json.loads(raw) if raw else {}

    def compact_etcd(self) -> int:
        """Compact etcd's history up to now (what the API server does every 5 minutes); returns the revision.

        A watch from a resourceVersion before it then gets 410 Gone (for kinds served from etcd)."""
        revision = int(_etcd_call(self.etcd_url, "/v3/kv/range", {"key": "AA=="})["header"]["revision"])
        _etcd_call(self.etcd_url, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    api_args: list[str] = field(default_factory=list)
    audit_log: Path | None = None

    def kill_apiserver(self, sig: int = signal.SIGKILL, timeout: float = 10.0) -> None:
        """Stop kube-apiserver alone (etcd keeps the state) with ``sig`` (SIGKILL after ``timeout``);
        ``restart_apiserver`` brings it back on the same port."""
        proc = self.processes.pop("kube-apiserver", None)
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def restart_apiserver(self, timeout: float = 90) -> None:
        log = self.workdir / "apiserver.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                self.api_args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes["kube-apiserver"] = proc
        _wait(lambda: _http_ok(f"{self.url}/readyz", self.token), "kube-apiserver", proc, log, timeout)

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events (``start_apiserver(audit=True)``), oldest first."""
        if self.audit_log is None or not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    def stop(self) -> None:
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self.processes.pop(name, None)
            if proc is not None:
                stop_process(proc)
        for proc in self.processes.values():
            stop_process(proc)
        self.processes.clear()


def _etcd_call(base: str, path: str, body: dict[str, object]) -> dict[str, Any]:
    """etcd's v3 JSON gateway (no etcdctl needed)."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        data: dict[str, Any] = json.loads(resp.read())
        return data


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout)


@contextlib.contextmanager
def koord_manager(kubeconfig: Path, log: Path, *flags: str) -> Iterator[subprocess.Popen[bytes]]:
    """``koord manager`` on the API server of ``kubeconfig`` (no leader election, its metrics on a free
    port) with ``flags``, its output in ``log``; stopped with its worker processes afterwards."""
    args = [
        sys.executable,
        "-m",
        "koord_framework.cli.main",
        "manager",
        f"--kubeconfig={kubeconfig}",
        f"--metrics-addr=127.0.0.1:{free_port()}",
        "--enable-leader-election=false",
        *flags,
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        stop_process(proc, 20.0)  # the manager drains its webhook workers and controllers on SIGTERM


def write_kubeconfig(path: Path, url: str, token: str) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": url, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "e2e", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(doc, indent=1))


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    # A process group of its own, so teardown reaches it and nothing else.
    with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(check: object, what: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:]
            raise HarnessError(f"{what} exited with {proc.returncode}:\n{tail}")
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise HarnessError(f"{what} not ready after {timeout:.0f} s; see {log}")


def _http_ok(url: str, token: str | None = None) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        # Bindings and evictions with their request (the target node, the delete options): the judge of
        # the chaos tests. Nothing else is recorded.
        {
            "level": "Request",
            "verbs": ["create"],
            "resources": [{"group": "", "resources": ["pods/binding", "bindings", "pods/eviction"]}],
        },
        {"level": "None"},
    ],
}


def start_apiserver(
    workdir: Path,
    bins: dict[str, Path],
    *,
    extra_users: tuple[str, ...] = ("peer",),
    audit: bool = False,
) -> ApiServer:
    """Start etcd and kube-apiserver on free loopback ports under ``workdir``; wait until ready. With
    ``audit``, every binding and eviction is written to ``workdir/audit.log`` (``ApiServer.audit_events``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    sa_key, sa_pub = workdir / "sa.key", workdir / "sa.pub"
    subprocess.run(["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True)
    subprocess.run(
        ["openssl", "rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub)],
        check=True,
        capture_output=True,
    )
    tokens = [f"{ADMIN_TOKEN},admin,admin,system:masters"]
    tokens += [f"{u}-token,{u},{u},system:masters" for u in extra_users]
    (workdir / "tokens.csv").write_text("\n".join(tokens) + "\n")
    url = f"https://127.0.0.1:{api_port}"
    server = ApiServer(workdir=workdir, url=url, kubeconfig=workdir / "kubeconfig", token=ADMIN_TOKEN)
    write_kubeconfig(server.kubeconfig, url, ADMIN_TOKEN)
    for user in extra_users:
        write_kubeconfig(workdir / f"kubeconfig-{user}", url, f"{user}-token")
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    server.etcd_url = etcd_url
    etcd_log = workdir / "etcd.log"
    try:
        etcd_args = [
            str(bins["etcd"]),
            "--name=e2e",
            f"--data-dir={workdir / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=e2e=http://127.0.0.1:{peer_port}",
        ]
        if _etcd_has_no_fsync(bins["etcd"]):
            etcd_args.append("--unsafe-no-fsync")
        server.processes["etcd"] = etcd = _spawn(etcd_args, etcd_log)
        _wait(lambda: _http_ok(f"{etcd_url}/health"), "etcd", etcd, etcd_log, 30)
        args = [
            str(bins["kube-apiserver"]),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={workdir / 'certs'}",
            f"--token-auth-file={workdir / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={sa_pub}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--endpoint-reconciler-type=none",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--profiling=false",
            # ConfigMap watches are served from etcd, so that compacting etcd (``compact_etcd``) makes an old
            # resourceVersion answer 410 Gone at once; the watch cache would keep serving it.
            "--watch-cache-sizes=configmaps#0",
        ]
        if binary_minor_version(bins["kube-apiserver"]) < 24:
            args.append("--insecure-port=0")
        if audit:
            policy = workdir / "audit-policy.json"  # YAML is a superset of JSON
            policy.write_text(json.dumps(AUDIT_POLICY))
            server.audit_log = workdir / "audit.log"
            args += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={server.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
            ]
        server.api_args = args
        api_log = workdir / "apiserver.log"
        server.processes["kube-apiserver"] = api = _spawn(args, api_log)
        _wait(lambda: _http_ok(f"{url}/readyz", ADMIN_TOKEN), "kube-apiserver", api, api_log, 90)
    except BaseException:
        server.stop()
        raise
    return server


def _etcd_has_no_fsync(etcd: Path) -> bool:
    """etcd >= 3.5 can skip fsync, which tests do not need; 3.4 (Debian's) has no such flag."""
    out = subprocess.run([str(etcd), "--help"], capture_output=True, text=True, check=False)
    return "--unsafe-no-fsync" in (out.stdout + out.stderr)
