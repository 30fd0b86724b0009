#!/bin/sh
# The Debian packages of the koord image, one list for both ways of building it:
#   packages.sh list runtime|build     the names (tools/image/build.sh passes them to mmdebstrap --include)
#   packages.sh install runtime|build  apt-get installs the missing ones (the Dockerfile's RUN, on a base
#                                      pulled from a registry); does nothing when all are there, so on the
#                                      mmdebstrap bases the build needs no apt index at all.
# runtime: Python 3.11 (bookworm's python3) and nothing else: koord's wheels bring their own compiled parts
# (cffi's backend bundles libffi; koord-native ships its extension compiled).
# build:   what `pip wheel` needs to compile koord-native's cffi extension; never in the final image.
set -eu
runtime="python3"
build="python3 python3-venv python3-dev gcc libc6-dev libffi-dev"
case "${2:-}" in
  runtime) wanted=$runtime ;;
  build) wanted=$build ;;
  *) echo "usage: $0 list|install runtime|build" >&2; exit 2 ;;
esac
case "$1" in
  list) echo "$wanted" ;;
  install)
    missing=""
    for p in $wanted; do
      dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -q
      # shellcheck disable=SC2086
      apt-get install -y -q --no-install-recommends $missing
      apt-get clean
      rm -rf /var/lib/apt/lists/*
    fi
    python3 -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' ;;
  *) echo "usage: $0 list|install runtime|build" >&2; exit 2 ;;
esac
