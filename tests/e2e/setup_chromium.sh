#!/bin/bash
# Prerequisites of the HTML-report e2e (tests/e2e/test_compare_report.py), from Debian's packages when
# missing: chromium and chromium-driver (chromedriver, driven over its W3C HTTP API by the test), plus the
# fonts-dejavu-core fonts the report's text renders with. Idempotent and quiet when they are there;
# tests/e2e/setup.sh calls it.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
[ -d /usr/share/fonts/truetype/dejavu ] || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "tests/e2e/setup_chromium.sh: need root to install ${need[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # --no-install-recommends: chromium's recommends (desktop integration, extra fonts) are not needed headless.
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
chromium --version 2>/dev/null | sed -n 1p
