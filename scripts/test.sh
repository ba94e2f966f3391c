#!/usr/bin/env bash
# Sets up a fresh Debian machine (as root) and runs every check:
# typecheck, unit tests, the compiled binary, and the integration tests
# against a real containerd and a real control plane (Kubernetes built from
# Go modules), run against dist/kubelet, the shipped artifact.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"
export PATH="$repo/node_modules/.bin:$PATH"

bash scripts/setup.sh
echo "== control plane binaries (cold: 4-6 minutes, then cached in \${BUNLET_CACHE:-/var/cache/bunlet})"
bash scripts/controlplane/build.sh >/dev/null
results="$(mktemp)"
trap 'rm -f "$results"' EXIT

echo "== typecheck"
tsc --noEmit

echo "== unit tests"
bun test src 2>&1 | tee -a "$results"

echo "== build"
bun scripts/build.ts
(cd / && "$repo/dist/kubelet" --version)

echo "== integration tests (real containerd)"
BUNLET_BINARY="$repo/dist/kubelet" bun test --timeout 120000 test/integration 2>&1 | tee -a "$results"

passed=$(awk '$2=="pass"{s+=$1} END{print s+0}' "$results")
failed=$(awk '$2=="fail"{s+=$1} END{print s+0}' "$results")
echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
