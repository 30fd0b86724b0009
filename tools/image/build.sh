#!/bin/bash
# `make image`: the koord image, built with buildah on Debian bookworm root filesystems made by mmdebstrap,
# with no registry. The Dockerfile is the recipe either way; here its two bases are local images:
#   localhost/koord-base-runtime:<key>   minbase + tools/image/packages.sh's runtime list (Python 3.11)
#   localhost/koord-base-build:<key>     minbase + the build list (compiler, headers, venv)
# The image is tagged localhost/koord:<version> (the chart's default image, koord:<version>) and
# localhost/koord:<input hash>.
#
# Caches, so that a repeated run takes seconds:
#   $KOORD_IMAGE_CACHE (/var/cache/koord-image)/base-<flavour>-<key>.tar   the mmdebstrap root filesystems,
#       keyed by the package list, the mirrors and this script; debs/ the downloaded packages
#   the image itself, keyed by a hash of every file of the build context (git's view of the checkout) and
#       of the bases and index settings: when localhost/koord:<hash> exists nothing is built
# Environment: KOORD_IMAGE (another name to tag, e.g. a registry's), KOORD_DEBIAN_MIRROR,
# KOORD_DEBIAN_SECURITY_MIRROR, KOORD_IMAGE_CACHE. Prints the image's name and size last.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
ROOT=$PWD
CACHE=${KOORD_IMAGE_CACHE:-/var/cache/koord-image}
MIRROR=${KOORD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${KOORD_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
SUITE=bookworm
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
started=$(date +%s)

bash tools/image/setup.sh
mkdir -p "$CACHE/debs"
# shellcheck source=tools/image/engine.sh
. tools/image/engine.sh

sources=(
  "deb $MIRROR $SUITE main"
  "deb $MIRROR $SUITE-updates main"
  "deb $SECURITY $SUITE-security main"
)

# How the bases are made; part of their cache key. Documentation, manuals and translations are left out (as
# in debian:bookworm-slim), copyrights kept. merged-/usr is set up by mmdebstrap's hook, as debootstrap does:
# otherwise apt satisfies usr-is-merged with the usrmerge package, which drags perl (50 MB) in.
mmdebstrap_options=(
  --variant=minbase --format=tar
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*'
)

# The base of one flavour (runtime or build): an mmdebstrap tarball, cached, imported once.
base_image() {
  local flavour=$1 packages key tar name
  packages=$(sh tools/image/packages.sh list "$flavour")
  key=$(printf '%s\n' "$SUITE" "$packages" "${sources[@]}" "${mmdebstrap_options[@]}" | sha256sum | cut -c1-16)
  tar="$CACHE/base-$flavour-$key.tar"
  name="localhost/koord-base-$flavour:$key"
  if podman image exists "$name"; then
    echo "$name"
    return
  fi
  if [ ! -s "$tar" ]; then
    echo "mmdebstrap: $SUITE minbase + ${packages// /,} -> $tar" >&2
    # Downloaded packages are kept in $CACHE/debs for the next base (mmdebstrap's own caching recipe).
    mmdebstrap "${mmdebstrap_options[@]}" --include="${packages// /,}" \
      --skip=download/empty --skip=essential/unlink \
      --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
      --setup-hook="sync-in $CACHE/debs /var/cache/apt/archives/" \
      --customize-hook="sync-out /var/cache/apt/archives $CACHE/debs" \
      --customize-hook='rm -f "$1"/var/cache/apt/archives/*.deb' \
      "$SUITE" "$tar.part" "${sources[@]}" </dev/null >&2
    mv "$tar.part" "$tar"
  fi
  podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' "$tar" "$name" >/dev/null
  echo "$name"
}

runtime_base=$(base_image runtime)
build_base=$(base_image build)

# The machine's package index settings (`pip config list`: /etc/pip.conf, /etc/xdg/pip, PIP_* variables)
# become the builder's, and every local directory or file they name is mounted read-only at its own path.
pip_args=()
mounts=()
pip_config=$( (python3 -m pip config list 2>/dev/null || pip config list 2>/dev/null || true) | sort -u)
for key in index-url extra-index-url find-links cert trusted-host default-timeout; do
  # The last setting of a key wins, as in pip (environment over files).
  value=$(printf '%s\n' "$pip_config" | sed -n "s/^[^.]*\.$key='\(.*\)'$/\1/p" | tail -1)
  [ -n "$value" ] || continue
  var="PIP_$(echo "$key" | tr 'a-z-' 'A-Z_')"
  pip_args+=(--build-arg "$var=$value")
  for item in $value; do
    path=${item#file://}
    # A local index's pages link to files beside it (/opt/pypi/simple -> ../files): mount its parent.
    [ "$key" != index-url ] && [ "$key" != extra-index-url ] || path=$(dirname "${path%/}")
    case "$path" in
      /*) [ -e "$path" ] && mounts+=(--volume "$path:$path:ro") ;;
    esac
  done
done

# The image is keyed by what goes into it: the build context as git sees it (tracked and untracked files not
# ignored), less the top-level directories .dockerignore leaves out (tests, docs, ...), the bases and the
# index settings.
left_out=$(grep -E '^[A-Za-z0-9._-]+/?$' .dockerignore | sed 's|/$||' | paste -sd'|' -)
context_hash=$(
  {
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
      git -C "$ROOT" ls-files -z -co --exclude-standard
    else
      find . -path ./.git -prune -o -path ./.venv -prune -o -type f -print0 | sed -z 's|^\./||'
    fi | grep -zvE "^($left_out)/" | sort -z | xargs -0 -r sha256sum 2>/dev/null || true
    printf '%s\n' "$runtime_base" "$build_base" "${pip_args[@]}"
  } | sha256sum | cut -c1-16
)
image="localhost/koord:$context_hash"

if podman image exists "$image"; then
  echo "image up to date: $image (cached: nothing in the build context changed)"
else
  # --isolation chroot: the RUN steps need no OCI runtime, cgroups or network namespace (they use the
  # host's network, for the package indexes only). --layers: an unchanged step is taken from the cache.
  buildah bud --layers --isolation chroot --network host "${ENGINE_ULIMITS[@]}" \
    --build-arg "BASE=$runtime_base" --build-arg "BUILD_BASE=$build_base" \
    "${pip_args[@]}" "${mounts[@]}" \
    -f Dockerfile -t "$image" "$ROOT"
fi
podman tag "$image" "localhost/koord:$VERSION"
[ -z "${KOORD_IMAGE:-}" ] || podman tag "$image" "$KOORD_IMAGE"

size=$(podman image inspect --format '{{.Size}}' "$image")
echo "image: localhost/koord:$VERSION ($image)"
echo "size: $size bytes ($((size / 1024 / 1024)) MiB); built in $(($(date +%s) - started)) s"
