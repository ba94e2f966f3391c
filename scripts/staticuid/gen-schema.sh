#!/usr/bin/env bash
# Regenerates src/sources/upstream-uid/core-pod-schema.json from the internal
# core.Pod types of the k8s.io/kubernetes version in go.mod (see main.go).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${STATICUID_BIN:-$("$here/build.sh")}"
"$bin" schema > "$here/../../src/sources/upstream-uid/core-pod-schema.json"
