#!/usr/bin/env bash
# Sets up a fresh Debian machine (as root) and runs every check:
# typecheck, lint, unit tests, the compiled binary, and the integration tests
# against a real containerd and a real control plane (Kubernetes built from
# Go modules), run against dist/kubelet, the shipped artifact.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"
export PATH="$repo/node_modules/.bin:$PATH"

bash scripts/setup.sh
echo "== control plane binaries and the upstream kubelet (cold: 8-11 minutes on 2 cores, then cached in \${BUNLET_CACHE:-/var/cache/bunlet})"
# The upstream kubelet: test/integration/takeover.test.ts switches a node between it and this agent.
bash scripts/controlplane/build.sh --with-kubelet >/dev/null
echo "== containerd 2.x and runc binaries (cold: about 10 minutes, then cached in the same place)"
bash scripts/containerd2/build.sh >/dev/null
results="$(mktemp)"
trap 'rm -f "$results"' EXIT

echo "== typecheck"
tsc --noEmit

echo "== format and lint (biome.json: the recommended rules but those the code breaks on purpose; \`biome format --write src test scripts\` fixes the format)"
biome check --error-on-warnings src test scripts

# bun prints a failing test's error above its "(fail)" line, far from the end of a long run;
# on failure this repeats each failed test's block at the very end, where a log's tail shows it.
failures() {
  # (bun's closing list of failures repeats the "(fail)" lines without their output: skipped.)
  # The last 50 lines of each block: the error and what the test printed just before it.
  awk '/^bun test v/ { summary = 0 } / tests? failed:$/ { summary = 1 } summary { next }
       /^\(pass\)|^\(fail\)|^\(skip\)|^[^ ]*\.test\.ts:$/ { if ($0 ~ /^\(fail\)/) { print "---"; for (i = (n > keep ? n - keep : 0); i < n; i++) print buf[i % keep]; print } n = 0; next }
       { buf[n++ % keep] = $0 }' keep=50 "$results"
}
run_tests() {
  local status=0
  "$@" 2>&1 | tee -a "$results" || status=$?
  if [[ $status -ne 0 ]]; then
    echo "== failed tests, with what they printed"
    failures
    exit "$status"
  fi
}

echo "== unit tests"
run_tests bun test src test/harness scripts/bench scripts/conformance

echo "== build"
bun scripts/build.ts
(cd / && "$repo/dist/kubelet" --version)

echo "== integration tests (real containerd)"
export BUNLET_BINARY="$repo/dist/kubelet"
run_tests bun test --timeout 120000 test/integration

# containerd 2.x (scripts/containerd2/build.sh): the integration files that start a containerd, again on
# containerd 2.4 + runc 1.5, each measured passing there (README, "Integration tests on containerd 2.x",
# lists them with their times and what is left out and why: the VM files and conformance.test.ts choose
# their own runtime, the files that start no containerd would run the same twice, and four files whose
# subject is the agent's own talk with the API server or its own pull limiter would prove nothing about
# the runtime there: certificates, serving-certificate and api-protobuf (client and serving certificates,
# protobuf to the API server; their pods are bystanders), pull-qps (the agent's token bucket; pulls
# from a local registry through 2.x's image service and ErrImagePull retries are pod-semantics' and
# static-pods' on 2.x). About 15 min.
containerd2_files=(
  cri pleg static-pods prober streaming images-logs stats takeover eviction runonce
  faults preload volumes persistent-volumes device-plugins cluster
  server-authz prometheus metrics-server parity debug-resize pod-semantics
  cgroups shutdown-logind harness takeover-cluster csi cpu-manager swap qos-reserved
  selinux user-namespaces memory-manager system-cgroups
)
echo "== integration tests (containerd 2.x): ${#containerd2_files[@]} files"
BUNLET_RUNTIME=containerd2 run_tests bun test --timeout 120000 $(printf "test/integration/%s.test.ts " "${containerd2_files[@]}")

passed=$(awk '$2=="pass"{s+=$1} END{print s+0}' "$results")
failed=$(awk '$2=="fail"{s+=$1} END{print s+0}' "$results")
echo "$passed passed, $failed failed"
[[ "$failed" -eq 0 ]]
