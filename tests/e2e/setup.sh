#!/bin/bash
# Runtime prerequisites of the end-to-end tests, installed from Debian's packages when missing:
# etcd (the API server's store), openssl (service-account keys) and curl (readiness probe in scripts).
# Idempotent and quiet when everything is there already; .ci/run calls it before `pytest -m e2e`.
set -euo pipefail
need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/e2e/setup.sh: need root to install ${need[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
  # Debian's etcd-server package ships a service unit; nothing starts it in a container, and the tests
  # start their own etcd on loopback, so there is nothing to stop here.
fi
etcd --version | sed -n 1p  # sed reads it all: head could SIGPIPE etcd under pipefail
# containerd, runc and busybox-static for the runtime-proxy e2e (tests/e2e/test_runtime_proxy.py).
bash "$(dirname "$0")/setup_containerd.sh"
# chromium and chromedriver for the HTML report of `koord compare` (tests/e2e/test_compare_report.py).
bash "$(dirname "$0")/setup_chromium.sh"
