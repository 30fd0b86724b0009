"""Build a one-layer OCI image archive from Debian's static busybox, for ``ctr images import``.

No registry is reachable here: the e2e test of koord runtime-proxy builds its image from the host's
``/bin/busybox`` (package ``busybox-static``). The same image serves as the sandbox ("pause") image -- its
default command sleeps -- and as the containers' image. The archive is an OCI image layout in a tar
(``oci-layout``, ``index.json``, ``blobs/sha256/...``) with an uncompressed layer; the index names the image
with containerd's ``io.containerd.image.name`` annotation, so ``ctr -n k8s.io images import`` tags it.

    python tests/e2e/busybox_image.py OUT.tar [--name docker.io/koord-e2e/busybox:1] [--busybox /bin/busybox]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import tarfile
import time
from pathlib import Path

DEFAULT_NAME = "docker.io/koord-e2e/busybox:1"
APPLETS = ("sh", "sleep", "cat", "env", "ls", "echo", "grep", "true", "false", "mkdir", "ps")
PAUSE_CMD = ["/bin/sleep", "2147483647"]
"""The sandbox's process: sleeps until killed (containerd stops a sandbox with SIGKILL)."""


def _add(tar: tarfile.TarFile, info: tarfile.TarInfo, data: bytes | None = None) -> None:
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def layer_tar(busybox: Path) -> bytes:
    """The root filesystem: /bin/busybox, its applets as symlinks, and the usual mount points."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "dev", "etc", "proc", "sys", "tmp", "run", "var"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            _add(tar, info)
        data = busybox.read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size = len(data)
        info.mode = 0o755
        _add(tar, info, data)
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            link.mode = 0o777
            _add(tar, link)
        for name, text in (("etc/passwd", "root:x:0:0:root:/:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            blob = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            info.mode = 0o644
            _add(tar, info, blob)
    return out.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def build(out: Path, name: str = DEFAULT_NAME, busybox: Path = Path("/bin/busybox")) -> str:
    """Write the archive; returns the manifest digest."""
    if subprocess.run(["ldd", str(busybox)], capture_output=True, text=True).returncode == 0:
        raise SystemExit(f"{busybox} is dynamically linked: install Debian's busybox-static")
    layer = layer_tar(busybox)
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(0)),
            "config": {"Env": ["PATH=/bin"], "Cmd": PAUSE_CMD, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
            "history": [{"created_by": "tests/e2e/busybox_image.py"}],
        },
        sort_keys=True,
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": _digest(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": _digest(layer),
                    "size": len(layer),
                }
            ],
        },
        sort_keys=True,
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "digest": _digest(manifest),
                    "size": len(manifest),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": name,
                        "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
                    },
                }
            ],
        },
        sort_keys=True,
    ).encode()
    with tarfile.open(out, mode="w") as tar:
        files = {
            "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
            "index.json": index,
        }
        for blob in (layer, config, manifest):
            files[f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}"] = blob
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            _add(tar, info)
        for path, blob in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(blob)
            info.mode = 0o644
            _add(tar, info, blob)
    return _digest(manifest)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("--name", default=DEFAULT_NAME)
    parser.add_argument("--busybox", type=Path, default=Path("/bin/busybox"))
    args = parser.parse_args()
    print(build(args.out, args.name, args.busybox))


if __name__ == "__main__":
    main()
