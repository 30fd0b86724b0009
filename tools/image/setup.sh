#!/bin/bash
# Tools of `make image` and tests/e2e/test_image.py, installed from Debian's packages when missing:
# mmdebstrap (the bookworm base root filesystems), buildah (the build), podman (running the image), and
# runc: crun, podman's default runtime on bookworm, refuses hosts with a hybrid cgroup layout (v1
# controllers plus a cgroup2 mount that has controllers enabled), which some sandboxes and CI VMs have.
# Idempotent and quiet when everything is there already.
set -euo pipefail
need=()
command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "tools/image/setup.sh: need root to install ${need[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
