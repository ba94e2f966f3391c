#!/usr/bin/env bash
# Regenerates src/sources/upstream-uid/testdata/uids.json: upstream's static pod
# UID (k8s.io/kubernetes v1.34.12) of every manifest in that directory, for node
# "node-1" at /etc/kubernetes/manifests/<file> and at http://config.example/<file>
# (a PodList: its items' UIDs, comma-separated).
# The Go tool (this directory) is built once into $BUNLET_CACHE/staticuid; run
# under the shared heavy-job lock.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
bin="${STATICUID_BIN:-$("$here/build.sh")}"
cd "$repo/src/sources/upstream-uid/testdata"
{
  echo "{"
  first=1
  for f in *.yaml *.json; do
    [[ "$f" == uids.json ]] && continue
    file_uid="$("$bin" uid -node node-1 -file "/etc/kubernetes/manifests/$f" "$f" | sed -n 's/.*"uid":"\([0-9a-f]*\)".*/\1/p' | paste -sd,)"
    url_uid="$("$bin" uid -url "http://config.example/$f" "$f" | sed -n 's/.*"uid":"\([0-9a-f]*\)".*/\1/p' | paste -sd,)"
    [[ $first == 1 ]] || echo ","
    first=0
    printf '  "%s": {"file": "%s", "url": "%s"}' "$f" "$file_uid" "$url_uid"
  done
  echo
  echo "}"
} > uids.json
echo "wrote $(pwd)/uids.json" >&2
