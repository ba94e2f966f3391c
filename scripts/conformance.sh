#!/usr/bin/env bash
# Upstream's node conformance suite ([NodeConformance] of k8s.io/kubernetes
# test/e2e, at the control plane's version) against a one-node cluster whose
# node is this agent; `bun run conformance`. See docs/conformance.md.
#
#   scripts/conformance.sh                       this agent as the node
#   scripts/conformance.sh --kubelet=upstream    the upstream kubelet, same setup
#   options: --procs=N (2) --focus=RE --skip=RE --out=DIR --timeout=3h
#            --node-ip=IP (default: the default route's source address; never loopback, which upstream refuses)
#   scripts/conformance.sh --shard=I/N ...       part I of N of the selection (every Nth spec by name),
#                                                so that one run holds a shared machine for minutes
#   scripts/conformance.sh --merge=DIR,DIR,...   one summary of several shards' results
#   scripts/conformance.sh --compare=DIR,DIR     two runs (or merges) side by side: every spec whose result differs
#
# Builds e2e.test, ginkgo and agnhost from Go modules once (scripts/conformance/build.sh,
# 10+ minutes cold), the suite's images offline (scripts/conformance/images.sh), then
# runs scripts/conformance/run.ts, which starts containerd, the control plane and the
# node, runs ginkgo and writes DIR/summary.md (default .cache/conformance/KUBELET-DATE/).
# Needs root, like the integration tests. Exit status 0 when nothing failed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bun="$repo/node_modules/.bin/bun"
[[ -x "$bun" ]] || bun="$(command -v bun)"
exec "$bun" scripts/conformance/run.ts "$@"
