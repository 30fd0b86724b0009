#!/bin/bash
# Prerequisites of the real-runtime e2e (tests/e2e/test_runtime_proxy.py), from Debian's packages when
# missing: containerd (1.6, with its CRI plugin), runc, and busybox-static (the one binary the test image
# is built from). Idempotent and quiet when they are there; tests/e2e/setup.sh calls it.
set -euo pipefail
need=()
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" \
  || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/e2e/setup_containerd.sh: need root to install ${need[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # --no-install-recommends: containerd's recommends pull in nothing the test needs. Debian's containerd
  # ships a service unit; nothing starts it in a container, and the test starts its own daemon.
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
containerd --version | sed -n 1p
