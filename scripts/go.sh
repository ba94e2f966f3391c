#!/usr/bin/env bash
# Prints the path of a Go command recent enough for the Go-built test parts
# (the `go` line of scripts/controlplane/gomod/go.mod, 1.25), and installs Go
# into the cache when this machine has none (Debian 12's golang-go is 1.19):
#
#   1. $GO when set (it must be recent enough);
#   2. `go` on PATH, then /usr/local/go/bin/go, when recent enough;
#   3. Go $GO_VERSION in $BUNLET_CACHE/go/$GO_VERSION (default /var/cache/bunlet),
#      installed there on first use: the module golang.org/toolchain that the go
#      command itself downloads for GOTOOLCHAIN, fetched from the Go module proxy
#      ($GOPROXY, first entry) with curl, its SHA-256 checked against the one
#      pinned below, unpacked. Nothing outside the cache is touched.
#
#   scripts/go.sh            the path (last line of stdout); progress on stderr
#   scripts/go.sh --check    exit 0 when a recent enough Go is there, 1 if not; installs nothing
set -euo pipefail

# The pinned toolchain, the one these machines' caches were built with: its
# bin/go and pkg/tool are byte for byte those of the go1.26.8 release tarball.
GO_VERSION=go1.26.8
declare -A GO_SHA256=(
  [linux-amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log() { echo "go.sh: $*" >&2; }
die() { log "$*"; exit 1; }

min="$(awk '$1=="go" {print $2; exit}' "$here/controlplane/gomod/go.mod")"
[[ -n "$min" ]] || die "no go line in scripts/controlplane/gomod/go.mod"

# recent GO: GO runs and its version is at least $min.
recent() {
  local v
  v="$(GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null)" || return 1
  v="${v#go}"
  [[ "$(printf '%s\n%s\n' "$min" "$v" | sort -V | head -1)" == "$min" ]]
}

cache="${BUNLET_CACHE:-/var/cache/bunlet}/go/$GO_VERSION"
found() {
  if [[ -n "${GO:-}" ]]; then
    recent "$GO" || die "GO=$GO is not Go $min or later"
    echo "$GO"; return 0
  fi
  local c
  for c in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go "$cache/bin/go"; do
    [[ -n "$c" && -x "$c" ]] && recent "$c" && { echo "$c"; return 0; }
  done
  return 1
}

if [[ "${1:-}" == "--check" ]]; then found >/dev/null; exit; fi
[[ $# -eq 0 ]] || die "usage: $0 [--check]"
if found; then exit 0; fi

case "$(uname -m)" in
  x86_64) platform=linux-amd64 ;;
  aarch64) platform=linux-arm64 ;;
  *) platform="linux-$(uname -m)" ;;
esac
want="${GO_SHA256[$platform]:-}"
[[ -n "$want" ]] || die "no Go $min or later, and no pinned toolchain for $platform: install Go $min+ (https://go.dev/doc/install) and set GO=/path/to/bin/go"
command -v curl >/dev/null && command -v unzip >/dev/null || die "no Go $min or later; installing $GO_VERSION needs curl and unzip (scripts/setup.sh installs them)"

proxy="${GOPROXY:-https://proxy.golang.org}"
proxy="${proxy%%[,|]*}"
[[ "$proxy" == http* ]] || proxy=https://proxy.golang.org
module="golang.org/toolchain/@v/v0.0.1-$GO_VERSION.$platform.zip"
log "no Go $min or later here; installing $GO_VERSION from the Go module proxy into $cache"
mkdir -p "$(dirname "$cache")"
tmp="$(mktemp -d "$(dirname "$cache")/.tmp.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
t=$(date +%s)
curl -fsSL --retry 3 -o "$tmp/go.zip" "$proxy/$module" || die "download of $proxy/$module failed"
got="$(sha256sum "$tmp/go.zip" | cut -d' ' -f1)"
[[ "$got" == "$want" ]] || die "$module: SHA-256 $got, expected $want; not installed"
unzip -q "$tmp/go.zip" -d "$tmp/x"
src="$tmp/x/golang.org/toolchain@v0.0.1-$GO_VERSION.$platform"
# Module zips need not keep file modes (the go command sets these bits itself).
chmod -R a+rX "$src"
chmod a+x "$src"/bin/* "$src"/pkg/tool/*/*
rm -rf "$cache"
mv "$src" "$cache"
recent "$cache/bin/go" || die "$cache/bin/go does not run"
log "installed $("$cache/bin/go" version | cut -d' ' -f3) in $(( $(date +%s) - t )) s"
echo "$cache/bin/go"
