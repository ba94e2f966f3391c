#!/usr/bin/env bash
# Regenerates the CRI TypeScript in src/cri/gen from proto/api.proto, and
# the containerd API subset (image import) in src/images/containerd/gen from
# proto/containerd/*.proto.
#
#   scripts/gen-cri.sh                 regenerate (idempotent; same input, same bytes)
#   scripts/gen-cri.sh --check         fail if src/cri/gen is stale
#   scripts/gen-cri.sh --verify v0.33.13
#                                      compare proto/api.proto field by field with
#                                      k8s.io/cri-api at that version, fetched from
#                                      the Go module proxy (needs network)
#   scripts/gen-cri.sh --verify-devices v0.34.12
#                                      the same for proto/deviceplugin and proto/podresources
#                                      against k8s.io/kubelet at that version
#   scripts/gen-cri.sh --verify-csi v0.34.12 v1.9.0
#                                      proto/pluginregistration against k8s.io/kubelet at the
#                                      first version (identical), proto/csi against the CSI spec
#                                      (github.com/container-storage-interface/spec) at the
#                                      second (every declared line is the spec's: a subset)
#
# Options: optimize_speed (generated binary readers/writers; measured about
# 20% faster than optimize_code_size on a 500-container ListContainers reply
# for ~0.5 MiB more RSS), long_type_bigint (int64 nanosecond timestamps do not
# fit a double), client_generic (no dependency on a transport in gen/),
# ts_nocheck (the output indexes arrays, which our noUncheckedIndexedAccess
# rejects; the exported types are still checked where they are used).
set -euo pipefail

cd "$(dirname "$0")/.."

PROTOC="${PROTOC:-protoc}"
PLUGIN="node_modules/.bin/protoc-gen-ts"
BUN="node_modules/.bin/bun"
OUT="src/cri/gen"
TS_OPT="optimize_speed,long_type_bigint,client_generic,ts_nocheck"

die() { echo "gen-cri: $*" >&2; exit 1; }

command -v "$PROTOC" >/dev/null 2>&1 ||
  die "protoc not found (install it: apt-get install -y protobuf-compiler, or set PROTOC=/path/to/protoc)"
[ -x "$PLUGIN" ] || die "$PLUGIN missing: run npm ci first"

CONTAINERD_OUT="src/images/containerd/gen"
# The device plugin API (v1beta1) and the pod resources API (v1), for src/devices.
DEVICES_OUT="src/devices/gen"
DEVICES_PROTOS="deviceplugin podresources"
# The plugin registration API (v1) and the CSI node calls (csi.v1), for src/csi.
CSI_OUT="src/csi/gen"
CSI_PROTOS="pluginregistration:api.proto csi:csi.proto"

# generate <proto dir> <proto file> <out dir>
generate() {
  mkdir -p "$3"
  "$PROTOC" --plugin=protoc-gen-ts="$PLUGIN" --ts_out="$3" --ts_opt="$TS_OPT" -I "$1" "$2"
}

# The containerd subset imports google/protobuf well-known types from protoc's include dir.
generate_containerd() {
  mkdir -p "$1"
  "$PROTOC" --plugin=protoc-gen-ts="$PLUGIN" --ts_out="$1" --ts_opt="$TS_OPT" -I proto/containerd -I /usr/include proto/containerd/*.proto
}

# Each API in a directory of its own: both are named api.proto upstream.
generate_devices() {
  local d
  for d in $DEVICES_PROTOS; do generate "proto/$d" "proto/$d/api.proto" "$1/$d"; done
}

generate_csi() {
  local p
  for p in $CSI_PROTOS; do generate "proto/${p%%:*}" "proto/${p%%:*}/${p#*:}" "$1/${p%%:*}"; done
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

case "${1:-}" in
"")
  generate proto proto/api.proto "$tmp/gen"
  rm -rf "$OUT"
  mkdir -p "$(dirname "$OUT")"
  cp -r "$tmp/gen" "$OUT"
  generate_containerd "$tmp/containerd"
  rm -rf "$CONTAINERD_OUT"
  cp -r "$tmp/containerd" "$CONTAINERD_OUT"
  generate_devices "$tmp/devices"
  rm -rf "$DEVICES_OUT"
  mkdir -p "$(dirname "$DEVICES_OUT")"
  cp -r "$tmp/devices" "$DEVICES_OUT"
  generate_csi "$tmp/csi"
  rm -rf "$CSI_OUT"
  mkdir -p "$(dirname "$CSI_OUT")"
  cp -r "$tmp/csi" "$CSI_OUT"
  echo "gen-cri: wrote $(ls "$OUT" | tr '\n' ' ')$CONTAINERD_OUT, $DEVICES_OUT and $CSI_OUT ($("$PROTOC" --version))"
  ;;
--check)
  generate proto proto/api.proto "$tmp/gen"
  diff -r "$tmp/gen" "$OUT" >/dev/null || die "$OUT is stale: run scripts/gen-cri.sh"
  generate_containerd "$tmp/containerd"
  diff -r "$tmp/containerd" "$CONTAINERD_OUT" >/dev/null || die "$CONTAINERD_OUT is stale: run scripts/gen-cri.sh"
  generate_devices "$tmp/devices"
  diff -r "$tmp/devices" "$DEVICES_OUT" >/dev/null || die "$DEVICES_OUT is stale: run scripts/gen-cri.sh"
  generate_csi "$tmp/csi"
  diff -r "$tmp/csi" "$CSI_OUT" >/dev/null || die "$CSI_OUT is stale: run scripts/gen-cri.sh"
  echo "gen-cri: $OUT, $CONTAINERD_OUT, $DEVICES_OUT and $CSI_OUT are up to date"
  ;;
--verify)
  version="${2:?usage: scripts/gen-cri.sh --verify <cri-api version, e.g. v0.33.13>}"
  proxy="${GOPROXY_URL:-https://proxy.golang.org}"
  curl -fsS -m 120 -o "$tmp/cri-api.zip" "$proxy/k8s.io/cri-api/@v/$version.zip" ||
    die "could not fetch k8s.io/cri-api@$version from $proxy"
  unzip -q -o "$tmp/cri-api.zip" "k8s.io/cri-api@$version/pkg/apis/runtime/v1/api.proto" -d "$tmp/zip"
  mkdir -p "$tmp/upstream"
  # Options that do not reach the wire: gogoproto (older releases import
  # it), debug_redact (newer than Debian's protoc).
  sed -E -e '/^import "github.com\/gogo/d' -e '/^option \(gogoproto/d' \
    -e 's/ *\[ *\(gogoproto[^]]*\]//' -e 's/ *\[ *debug_redact *= *true *\]//' \
    "$tmp/zip/k8s.io/cri-api@$version/pkg/apis/runtime/v1/api.proto" >"$tmp/upstream/api.proto"
  generate "$tmp/upstream" "$tmp/upstream/api.proto" "$tmp/theirs"
  generate proto proto/api.proto "$tmp/ours"
  # The generated modules import @protobuf-ts from this project's node_modules.
  ln -s "$PWD/node_modules" "$tmp/node_modules"
  "$BUN" src/cri/wire-compare.ts "$tmp/ours/api.ts" "$tmp/theirs/api.ts"
  ;;
--verify-devices)
  version="${2:?usage: scripts/gen-cri.sh --verify-devices <k8s.io/kubelet version, e.g. v0.34.12>}"
  proxy="${GOPROXY_URL:-https://proxy.golang.org}"
  curl -fsS -m 120 -o "$tmp/kubelet.zip" "$proxy/k8s.io/kubelet/@v/$version.zip" ||
    die "could not fetch k8s.io/kubelet@$version from $proxy"
  ln -s "$PWD/node_modules" "$tmp/node_modules"
  status=0
  for pair in deviceplugin:deviceplugin/v1beta1 podresources:podresources/v1; do
    d="${pair%%:*}"
    src="k8s.io/kubelet@$version/pkg/apis/${pair#*:}/api.proto"
    unzip -q -o "$tmp/kubelet.zip" "$src" -d "$tmp/zip"
    mkdir -p "$tmp/upstream/$d"
    sed -E -e '/^import "github.com\/gogo/d' -e '/^option \(gogoproto/d' -e '/^option go_package/d' \
      -e 's/ *\[ *\(gogoproto[^]]*\]//g' "$tmp/zip/$src" >"$tmp/upstream/$d/api.proto"
    generate "$tmp/upstream/$d" "$tmp/upstream/$d/api.proto" "$tmp/theirs/$d"
    generate "proto/$d" "proto/$d/api.proto" "$tmp/ours/$d"
    "$BUN" src/cri/wire-compare.ts "$tmp/ours/$d/api.ts" "$tmp/theirs/$d/api.ts" || status=1
  done
  exit "$status"
  ;;
--verify-csi)
  kversion="${2:?usage: scripts/gen-cri.sh --verify-csi <k8s.io/kubelet version> <CSI spec version>}"
  sversion="${3:?usage: scripts/gen-cri.sh --verify-csi <k8s.io/kubelet version> <CSI spec version, e.g. v1.9.0>}"
  proxy="${GOPROXY_URL:-https://proxy.golang.org}"
  curl -fsS -m 120 -o "$tmp/kubelet.zip" "$proxy/k8s.io/kubelet/@v/$kversion.zip" ||
    die "could not fetch k8s.io/kubelet@$kversion from $proxy"
  curl -fsS -m 120 -o "$tmp/spec.zip" "$proxy/github.com/container-storage-interface/spec/@v/$sversion.zip" ||
    die "could not fetch github.com/container-storage-interface/spec@$sversion from $proxy"
  ln -s "$PWD/node_modules" "$tmp/node_modules"
  src="k8s.io/kubelet@$kversion/pkg/apis/pluginregistration/v1/api.proto"
  unzip -q -o "$tmp/kubelet.zip" "$src" -d "$tmp/zip"
  mkdir -p "$tmp/upstream/pluginregistration" "$tmp/upstream/csi"
  sed -E -e '/^import "github.com\/gogo/d' -e '/^option \(gogoproto/d' -e '/^option go_package/d' \
    -e 's/ *\[ *\(gogoproto[^]]*\]//g' "$tmp/zip/$src" >"$tmp/upstream/pluginregistration/api.proto"
  src="github.com/container-storage-interface/spec@$sversion/csi.proto"
  unzip -q -o "$tmp/spec.zip" "$src" -d "$tmp/zip"
  cp "$tmp/zip/$src" "$tmp/upstream/csi/csi.proto"
  generate "$tmp/upstream/pluginregistration" "$tmp/upstream/pluginregistration/api.proto" "$tmp/theirs/pluginregistration"
  mkdir -p "$tmp/theirs/csi"
  "$PROTOC" --plugin=protoc-gen-ts="$PLUGIN" --ts_out="$tmp/theirs/csi" --ts_opt="$TS_OPT" -I "$tmp/upstream/csi" -I /usr/include "$tmp/upstream/csi/csi.proto"
  generate_csi "$tmp/ours"
  status=0
  "$BUN" src/cri/wire-compare.ts "$tmp/ours/pluginregistration/api.ts" "$tmp/theirs/pluginregistration/api.ts" || status=1
  "$BUN" src/cri/wire-compare.ts --subset "$tmp/ours/csi/csi.ts" "$tmp/theirs/csi/csi.ts" || status=1
  exit "$status"
  ;;
*)
  die "unknown argument: $1 (expected nothing, --check, --verify <version>, --verify-devices <version> or --verify-csi <versions>)"
  ;;
esac
