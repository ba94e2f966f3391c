#!/usr/bin/env bash
# Builds upstream's node conformance suite from Go modules, once, into a cache
# outside the work tree (scripts/conformance.sh runs it):
#
#   e2e.test   k8s.io/kubernetes/test/e2e compiled as a test binary (`go test -c`)
#   ginkgo     the ginkgo CLI at the version k8s.io/kubernetes requires (runs
#              e2e.test in parallel processes)
#   agnhost    k8s.io/kubernetes/test/images/agnhost, the suite's all-purpose test
#              server, for the offline images (scripts/conformance/images.sh)
#
#   scripts/conformance/build.sh             build what is stale; prints the bin directory
#   scripts/conformance/build.sh --bin-dir   print the bin directory, build nothing
#
# Same release as the control plane: the module graph is scripts/controlplane/gomod's
# go.mod and go.sum, copied into a scratch module under the cache and resolved
# there with -mod=mod (the test-only modules of test/e2e, and the three staging
# modules only test/e2e imports, are added to the copy, never to the committed
# files, so this build cannot change the control plane's key).
#
# Cache (BUNLET_CACHE, default /var/cache/bunlet):
#   controlplane/go/mod, controlplane/go/build   GOMODCACHE, GOCACHE (shared with the control plane)
#   conformance/<k8s version>/bin/               e2e.test, ginkgo, agnhost, each with a .NAME.stamp
# A binary whose stamp matches is not built again (scripts/lib/go-cache.sh); concurrent
# runs wait on one lock. About 5 minutes cold on 2 cores with the control plane's
# module cache warm.
#
# Progress goes to stderr; the bin directory is the last line on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gomod="$here/../controlplane/gomod"
log() { echo "conformance/build: $*" >&2; }
die() { log "$*"; exit 1; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
# shellcheck source=../lib/go-cache.sh
source "$here/../lib/go-cache.sh"
t0=$(date +%s%N)

k8s_version="$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$gomod/go.mod")"
[[ -n "$k8s_version" ]] || die "cannot read the k8s.io/kubernetes version from $gomod/go.mod"

root="${BUNLET_CACHE:-/var/cache/bunlet}"
cache="$root/conformance"
bin="$cache/$k8s_version/bin"
[[ "${1:-}" == "--bin-dir" ]] && { echo "$bin"; exit 0; }

GO="$(bash "$here/../go.sh" | tail -n 1)" || die "no Go toolchain (scripts/go.sh)"
go_cache_env "$root/controlplane"
# -mod=mod: the scratch module's go.mod gains test/e2e's test-only requirements.
export GOFLAGS="-mod=mod -trimpath -buildvcs=false -modcacherw"
export CGO_ENABLED=0

# RECIPE: bump when the build commands or flags below change.
RECIPE=1
go_version="$("$GO" env GOVERSION 2>/dev/null)" || die "$GO does not run"
key="$(go_build_key "$gomod" "$go_version recipe=$RECIPE $GOFLAGS CGO_ENABLED=$CGO_ENABLED")"
names=(e2e.test ginkgo agnhost)
if [[ -z "$(go_stale "$bin" "$key" "${names[@]}")" ]]; then
  log "up to date: ${names[*]} ($k8s_version) in $(ms "$t0") ms"; echo "$bin"; exit 0
fi

mkdir -p "$bin" "$GOMODCACHE" "$GOCACHE"
go_lock 9 "$cache/.build.lock"
if [[ -z "$(go_stale "$bin" "$key" "${names[@]}")" ]]; then log "up to date after waiting"; echo "$bin"; exit 0; fi

# The scratch module: the control plane's go.mod/go.sum plus a tools file
# naming the three main packages, so -mod=mod records what they need.
mod="$cache/$k8s_version/gomod"
rm -rf "$mod"; mkdir -p "$mod"
cp "$gomod/go.mod" "$gomod/go.sum" "$mod/"
sed -i 's#^module .*#module bunlet.local/conformance#' "$mod/go.mod"
# The staging modules only test/e2e imports, at their published twins as the others.
staging="v0.${k8s_version#v1.}"
for m in sample-apiserver sample-cli-plugin sample-controller; do
  "$GO" -C "$mod" mod edit -replace "k8s.io/$m=k8s.io/$m@$staging"
done
cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
GO

"$GO" -C "$mod" mod download "k8s.io/kubernetes@$k8s_version" >&2 || die "go mod download failed"
# The version e2e.test reports, as the control plane's binaries.
ldflags="$(go_k8s_ldflags "$k8s_version")"

tmp="$(mktemp -d "$cache/$k8s_version/.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
p="${BUNLET_GO_PARALLEL:-2}"
t=$(date +%s%N)
"$GO" -C "$mod" build -p "$p" -ldflags "-s -w" -o "$tmp/ginkgo" github.com/onsi/ginkgo/v2/ginkgo >&2 || die "go build of ginkgo failed"
"$GO" -C "$mod" build -p "$p" -ldflags "-s -w" -o "$tmp/agnhost" k8s.io/kubernetes/test/images/agnhost >&2 || die "go build of agnhost failed"
log "ginkgo and agnhost built in $(ms "$t") ms; building e2e.test ($k8s_version): minutes"
t=$(date +%s%N)
"$GO" -C "$mod" test -c -p "$p" -ldflags "$ldflags" -o "$tmp/e2e.test" k8s.io/kubernetes/test/e2e >&2 \
  || die "go test -c of k8s.io/kubernetes/test/e2e failed"
log "e2e.test built in $(ms "$t") ms"
go_install_built "$tmp" "$bin" "$key" "${names[@]}"
log "built ${names[*]} in $(ms "$t0") ms"
echo "$bin"
