#!/usr/bin/env bash
# Re-pin the Kubernetes wrapper module to another release:
#   hack/controlplane/pin.sh v1.36.3
# Rewrites hack/controlplane/kubernetes/go.mod: requires k8s.io/kubernetes at that version and
# replaces each staging module (read from the release's own go.mod, the `=> ./staging/...`
# lines) with its published tag v0.MINOR.PATCH, then runs `go mod tidy` to pin go.sum.
# etcd and kwok are re-pinned by editing their go.mod and running `go mod tidy` there.
set -euo pipefail
version="${1:?usage: pin.sh vX.Y.Z}"
staging_tag="v0.${version#v1.}"
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/kubernetes" && pwd)"
gomod="$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
{
  sed -n '1,/^require/p' "$dir/go.mod" | sed '$d'
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " '"$staging_tag"'"}' "$gomod"
  echo ")"
} >"$dir/go.mod.new"
mv "$dir/go.mod.new" "$dir/go.mod"
(cd "$dir" && go mod tidy)
echo "pinned k8s.io/kubernetes $version (staging $staging_tag) in $dir/go.mod" >&2
