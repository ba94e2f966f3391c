#!/usr/bin/env bash
# Builds containerd 2.x and runc from Go modules, once, into a cache outside
# the work tree, for running the integration tests against containerd 2.x
# (scripts/containerd.sh with BUNLET_RUNTIME=containerd2 uses it):
#
#   scripts/containerd2/build.sh            containerd containerd-shim-runc-v2 ctr runc
#   scripts/containerd2/build.sh --bin-dir  print the bin directory, build nothing
#
# Prints the bin directory on stdout (last line); progress goes to stderr.
#
# The versions come from gomod/go.mod (github.com/containerd/containerd/v2
# and github.com/opencontainers/runc). runc needs cgo and libseccomp
# (Debian's libseccomp-dev, installed by scripts/setup.sh); containerd and its
# shim are built without cgo, as upstream's Makefile builds the shim.
#
# Cache (BUNLET_CACHE, default /var/cache/bunlet):
#   containerd2/go/mod      GOMODCACHE  } shared by every version
#   containerd2/go/build    GOCACHE     }
#   containerd2/<containerd version>-runc<runc version>/bin/
#                           the binaries, each with a .NAME.stamp holding the
#                           hash of what built it
# A binary whose stamp matches is not built again: a warm run does no Go work
# and returns in well under a second. Concurrent runs wait on one lock.
#
# Environment: BUNLET_CACHE, GO (default: scripts/go.sh's choice),
# GOPROXY as usual, BUNLET_GO_PARALLEL (go build -p, default 2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gomod="$here/gomod"
log() { echo "containerd2/build: $*" >&2; }
die() { log "$*"; exit 1; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t0=$(date +%s%N)

print_only=0
for a in "$@"; do
  case "$a" in
    --bin-dir) print_only=1 ;;
    *) die "usage: $0 [--bin-dir]" ;;
  esac
done

ctd_version="$(awk '$1=="github.com/containerd/containerd/v2" && $2 ~ /^v/ {print $2; exit}' "$gomod/go.mod")"
runc_version="$(awk '$1=="github.com/opencontainers/runc" && $2 ~ /^v/ {print $2; exit}' "$gomod/go.mod")"
[[ -n "$ctd_version" && -n "$runc_version" ]] || die "cannot read the versions from $gomod/go.mod"

cache="${BUNLET_CACHE:-/var/cache/bunlet}/containerd2"
bin="$cache/$ctd_version-runc$runc_version/bin"
if ((print_only)); then echo "$bin"; exit 0; fi

names=(containerd containerd-shim-runc-v2 ctr runc)

# Go: $GO, `go` on PATH, /usr/local/go, or the pinned release scripts/go.sh
# installs into the cache (gomod/go.mod's go line must be met: containerd 2.4
# needs Go 1.26).
GO="$(bash "$here/../go.sh" | tail -n 1)" || die "no Go toolchain (scripts/go.sh)"

source "$here/../lib/go-cache.sh"
go_cache_env "$cache"

# RECIPE: bump it when the build commands, tags or ldflags below change.
RECIPE=1
go_version="$("$GO" env GOVERSION 2>/dev/null)" || die "$GO does not run"
seccomp_version="$(pkg-config --modversion libseccomp 2>/dev/null || true)"
key="$(go_build_key "$gomod" "$go_version recipe=$RECIPE $GOFLAGS libseccomp=$seccomp_version")"

stale() { go_stale "$bin" "$key" "${names[@]}"; }

if [[ -z "$(stale)" ]]; then
  log "up to date: ${names[*]} (containerd $ctd_version, runc $runc_version) in $(ms "$t0") ms"
  echo "$bin"; exit 0
fi
[[ -n "$seccomp_version" ]] || die "libseccomp-dev (and pkg-config) missing: runc needs them (run scripts/setup.sh)"

mkdir -p "$bin" "$GOMODCACHE" "$GOCACHE"
go_lock 9 "$cache/.build.lock"
todo="$(stale)"
if [[ -z "$todo" ]]; then
  log "up to date after waiting: ${names[*]}"; flock -u 9; echo "$bin"; exit 0
fi
read -r -a todo <<<"$todo"
log "building ${todo[*]} (containerd $ctd_version, runc $runc_version) with $go_version into $bin"

cd "$gomod"
t=$(date +%s%N)
"$GO" mod download "github.com/containerd/containerd/v2@$ctd_version" "github.com/opencontainers/runc@$runc_version" >&2 \
  || die "go mod download failed (is the Go module proxy reachable? GOPROXY=$("$GO" env GOPROXY))"
log "release modules ready in $(ms "$t") ms"

ctd_commit="$(go_origin github.com/containerd/containerd/v2 "$ctd_version" Hash)"
runc_commit="$(go_origin github.com/opencontainers/runc "$runc_version" Hash)"
ctd_pkg=github.com/containerd/containerd/v2
ctd_ldflags="-s -w -X $ctd_pkg/version.Version=$ctd_version -X $ctd_pkg/version.Package=github.com/containerd/containerd/v2"
[[ -n "$ctd_commit" ]] && ctd_ldflags+=" -X $ctd_pkg/version.Revision=$ctd_commit"
runc_ldflags="-s -w"
[[ -n "$runc_commit" ]] && runc_ldflags+=" -X main.gitCommit=$runc_commit"

tmp="$(mktemp -d "$cache/.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
p="${BUNLET_GO_PARALLEL:-2}"
want() { [[ " ${todo[*]} " == *" $1 "* ]]; }
t=$(date +%s%N)
# containerd and ctr: no cgo (as upstream's static release; the btrfs
# snapshotter needs cgo and is left out, as its no_btrfs tag would).
# The shim: no cgo and no_grpc, as upstream's Makefile builds it.
ctd_pkgs=()
want containerd && ctd_pkgs+=("$ctd_pkg/cmd/containerd")
want ctr && ctd_pkgs+=("$ctd_pkg/cmd/ctr")
if ((${#ctd_pkgs[@]})); then
  CGO_ENABLED=0 "$GO" build -p "$p" -tags "urfave_cli_no_docs no_btrfs" -ldflags "$ctd_ldflags" -o "$tmp/" "${ctd_pkgs[@]}" >&2 \
    || die "go build of containerd/ctr failed"
fi
if want containerd-shim-runc-v2; then
  CGO_ENABLED=0 "$GO" build -p "$p" -tags "urfave_cli_no_docs no_btrfs no_grpc" -ldflags "$ctd_ldflags" \
    -o "$tmp/containerd-shim-runc-v2" "$ctd_pkg/cmd/containerd-shim-runc-v2" >&2 || die "go build of the shim failed"
fi
# runc: cgo for libseccomp and its nsexec C code (tags as upstream's Makefile,
# without libpathrs, a Rust library Debian does not ship).
if want runc; then
  CGO_ENABLED=1 "$GO" build -p "$p" -tags "seccomp urfave_cli_no_docs" -ldflags "$runc_ldflags" \
    -o "$tmp/runc" github.com/opencontainers/runc >&2 || die "go build of runc failed"
fi
log "go build done in $(ms "$t") ms"
go_install_built "$tmp" "$bin" "$key" "${todo[@]}"
log "built ${todo[*]} in $(ms "$t0") ms"
flock -u 9
echo "$bin"
