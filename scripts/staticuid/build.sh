#!/usr/bin/env bash
# Builds the staticuid dev tool (see main.go) into $BUNLET_CACHE/staticuid/<key>/
# with the control plane's Go module and build caches, once per source change,
# and prints its path. Heavy: run under /tmp/bunlet-heavy.lock.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${BUNLET_CACHE:-/var/cache/bunlet}"
go="$(bash "$here/../go.sh" | tail -1)"
key="$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)"
out="$cache/staticuid/$key/staticuid"
if [[ ! -x "$out" ]]; then
  mkdir -p "$(dirname "$out")"
  (cd "$here" && GOMODCACHE="$cache/controlplane/go/mod" GOCACHE="$cache/controlplane/go/build" GOFLAGS=-mod=mod "$go" build -o "$out.tmp" . && mv "$out.tmp" "$out")
fi
echo "$out"
