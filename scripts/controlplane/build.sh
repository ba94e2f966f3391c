#!/usr/bin/env bash
# Builds a real Kubernetes control plane from Go modules, once, into a cache
# outside the work tree, for the integration tests and for trying the agent
# out (scripts/controlplane/up.sh uses it):
#
#   scripts/controlplane/build.sh                  etcd kube-apiserver kube-controller-manager
#                                                  kube-scheduler kubectl
#   scripts/controlplane/build.sh --with-kubelet   ... and the upstream kubelet (side-by-side
#                                                  measurements; not needed by the tests)
#   scripts/controlplane/build.sh --with-metrics-server
#                                                  ... and metrics-server (sigs.k8s.io/metrics-server,
#                                                  from gomod-metrics-server/, a module of its own);
#                                                  built on first use by the `kubectl top` test only
#   scripts/controlplane/build.sh --with-sample-device-plugin
#                                                  ... and k8s.io/kubernetes' sample device plugin
#                                                  (test/images/sample-device-plugin; the device
#                                                  plugin integration test builds it on first use)
#   scripts/controlplane/build.sh --with-local-path-provisioner
#                                                  ... and github.com/rancher/local-path-provisioner
#                                                  (from gomod-local-path-provisioner/, a module of its
#                                                  own); built on first use by the PVC test only
#   scripts/controlplane/build.sh --with-csi-mock
#                                                  ... and csi-mock (gomod-csi-mock/: k8s.io/kubernetes'
#                                                  CSI mock driver with node-driver-registrar's
#                                                  registration side); built on first use by the CSI test
#   scripts/controlplane/build.sh --with-kubemark
#                                                  ... and kubemark (gomod-kubemark/: k8s.io/kubernetes'
#                                                  hollow node, same release); built on first use by
#                                                  scripts/bench/scale.ts only
#   scripts/controlplane/build.sh --bin-dir        print the bin directory, build nothing
#
# Prints the bin directory on stdout (last line); progress goes to stderr.
#
# The versions come from gomod/go.mod: k8s.io/kubernetes at one release, each
# k8s.io/* staging module replaced with its published v0.X.Y twin, and etcd
# (go.etcd.io/etcd/server/v3, whose module root is etcd's main package) at the
# version kube-apiserver's own go.mod names.
#
# Cache (BUNLET_CACHE, default /var/cache/bunlet):
#   controlplane/go/mod      GOMODCACHE  } shared by every version, so a CI
#   controlplane/go/build    GOCACHE     } cache of this directory keeps reruns warm
#   controlplane/<k8s version>/bin/      the binaries, each with a .NAME.stamp
#                                        holding the hash of what built it
# A binary whose stamp matches is not built again: a warm run does no Go work
# and returns in well under a second. Concurrent runs wait on one lock.
#
# Environment: BUNLET_CACHE, GO (the go command; default: scripts/go.sh's
# choice, which installs Go into the cache when there is none), GOPROXY as usual.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gomod="$here/gomod"
log() { echo "controlplane/build: $*" >&2; }
die() { log "$*"; exit 1; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t0=$(date +%s%N)

with_kubelet=0
with_metrics_server=0
with_sample_device_plugin=0
with_local_path_provisioner=0
with_csi_mock=0
with_kubemark=0
print_only=0
for a in "$@"; do
  case "$a" in
    --with-kubelet) with_kubelet=1 ;;
    --with-metrics-server) with_metrics_server=1 ;;
    --with-sample-device-plugin) with_sample_device_plugin=1 ;;
    --with-local-path-provisioner) with_local_path_provisioner=1 ;;
    --with-csi-mock) with_csi_mock=1 ;;
    --with-kubemark) with_kubemark=1 ;;
    --bin-dir) print_only=1 ;;
    *) die "usage: $0 [--with-kubelet] [--with-metrics-server] [--with-sample-device-plugin] [--with-local-path-provisioner] [--with-csi-mock] [--with-kubemark] [--bin-dir]" ;;
  esac
done

# One source of truth for the versions: gomod/go.mod.
k8s_version="$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$gomod/go.mod")"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' "$gomod/go.mod")"
[[ -n "$k8s_version" && -n "$etcd_version" ]] || die "cannot read the versions from $gomod/go.mod"

cache="${BUNLET_CACHE:-/var/cache/bunlet}/controlplane"
bin="$cache/$k8s_version/bin"
if ((print_only)); then echo "$bin"; exit 0; fi

# name -> main package. etcd's module root is its main package.
declare -A pkg=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [sample-device-plugin]=k8s.io/kubernetes/test/images/sample-device-plugin
)
names=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
((with_kubelet)) && names+=(kubelet)
((with_sample_device_plugin)) && names+=(sample-device-plugin)

# A Go recent enough for gomod/go.mod: $GO, `go` on PATH, /usr/local/go, or
# the pinned release that scripts/go.sh installs into the cache.
GO="$(bash "$here/../go.sh" | tail -n 1)" || die "no Go toolchain (scripts/go.sh)"

source "$here/../lib/go-cache.sh"
go_cache_env "$cache"
export CGO_ENABLED=0

# What makes a binary: the module graph, the toolchain, and how this script
# builds (RECIPE: bump it when the go build command, flags or ldflags below
# change, so cached binaries are rebuilt; comments and logging do not count).
RECIPE=1
go_version="$("$GO" env GOVERSION 2>/dev/null)" || die "$GO does not run"
recipe="$go_version recipe=$RECIPE $GOFLAGS CGO_ENABLED=$CGO_ENABLED"
key="$(go_build_key "$gomod" "$recipe")"

# metrics-server and local-path-provisioner, each from a module of its own
# (gomod-metrics-server/, gomod-local-path-provisioner/) with its own stamp key,
# so adding or bumping one never rebuilds the control plane.
build_metrics_server() {
  ((with_metrics_server)) || return 0
  local dir="$here/gomod-metrics-server" version
  version="$(awk '$1=="require" && $2=="sigs.k8s.io/metrics-server" {print $3; exit}' "$dir/go.mod")"
  go_module_binary metrics-server "$dir" sigs.k8s.io/metrics-server/cmd/metrics-server \
    "-s -w -X sigs.k8s.io/metrics-server/pkg/version.gitVersion=$version" "$bin" "$cache/.build.lock" "$recipe"
}
build_local_path_provisioner() {
  ((with_local_path_provisioner)) || return 0
  local dir="$here/gomod-local-path-provisioner" version
  version="$(awk '$1=="require" && $2=="github.com/rancher/local-path-provisioner" {print $3; exit}' "$dir/go.mod")"
  go_module_binary local-path-provisioner "$dir" github.com/rancher/local-path-provisioner \
    "-s -w -X main.VERSION=$version" "$bin" "$cache/.build.lock" "$recipe"
}

build_csi_mock() {
  ((with_csi_mock)) || return 0
  # Its main package is this project's source: the key covers it as well as go.mod/go.sum.
  go_module_binary csi-mock "$here/gomod-csi-mock" bunlet.local/csi-mock "-s -w" "$bin" "$cache/.build.lock" "$recipe main.go=$(sha256sum <"$here/gomod-csi-mock/main.go" | cut -c1-32)"
}

build_kubemark() {
  ((with_kubemark)) || return 0
  go_module_binary kubemark "$here/gomod-kubemark" k8s.io/kubernetes/cmd/kubemark \
    "$(go_k8s_ldflags "$k8s_version")" "$bin" "$cache/.build.lock" "$recipe"
}

stale() { go_stale "$bin" "$key" "${names[@]}"; }

todo="$(stale)"
if [[ -z "$todo" ]]; then
  log "up to date: ${names[*]} ($k8s_version, etcd $etcd_version) in $(ms "$t0") ms"
  build_metrics_server
  build_local_path_provisioner
  build_csi_mock
  build_kubemark
  echo "$bin"; exit 0
fi

mkdir -p "$bin" "$GOMODCACHE" "$GOCACHE"
go_lock 9 "$cache/.build.lock"
todo="$(stale)"   # the other build may have done it
if [[ -z "$todo" ]]; then
  log "up to date after waiting: ${names[*]}"; flock -u 9; build_metrics_server; build_local_path_provisioner; build_csi_mock; build_kubemark; echo "$bin"; exit 0
fi
read -r -a todo <<<"$todo"
log "building ${todo[*]} at $k8s_version (etcd $etcd_version) with $go_version into $bin"

cd "$gomod"
t=$(date +%s%N)
# The two releases whose commit and date go into the version strings (their
# .info files); `go build` fetches the rest of what it needs itself.
"$GO" mod download "k8s.io/kubernetes@$k8s_version" "go.etcd.io/etcd/server/v3@$etcd_version" >&2 \
  || die "go mod download failed (is the Go module proxy reachable? GOPROXY=$("$GO" env GOPROXY))"
log "release modules ready in $(ms "$t") ms"

etcd_commit="$(go_origin go.etcd.io/etcd/server/v3 "$etcd_version" Hash)"
ldflags="$(go_k8s_ldflags "$k8s_version")"
[[ -n "$etcd_commit" ]] && ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_commit:0:7}"

# One `go build` for every binary: shared packages compile once, and -p 2
# keeps to the two cores of the CI machines. Built into a scratch directory,
# then moved into place with their stamps.
tmp="$(mktemp -d "$cache/$k8s_version/.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
pkgs=()
for n in "${todo[@]}"; do pkgs+=("${pkg[$n]}"); done
t=$(date +%s%N)
"$GO" build -p "${BUNLET_GO_PARALLEL:-2}" -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" >&2
log "go build done in $(ms "$t") ms"
# `go build -o DIR/` names a binary after its package path's last element,
# skipping a /vN suffix: etcd's comes out as "server".
[[ -f "$tmp/server" ]] && mv "$tmp/server" "$tmp/etcd"
go_install_built "$tmp" "$bin" "$key" "${todo[@]}"
log "built ${todo[*]} in $(ms "$t0") ms"
flock -u 9
build_metrics_server
build_local_path_provisioner
build_csi_mock
build_kubemark
echo "$bin"
