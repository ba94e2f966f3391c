#!/usr/bin/env bash
# Builds, OFFLINE, the images the selected conformance tests use, under the
# exact names `e2e.test --list-images` prints (no registry is reachable here),
# as OCI image-layout tarballs for `ctr -n k8s.io images import`:
#
#   scripts/conformance/images.sh E2E_TEST AGNHOST OUTDIR
#
# What each image is made of:
#   .../agnhost:*    the project's busybox root + /agnhost built from Go modules at the
#                    control plane's version (scripts/conformance/build.sh); entrypoint
#                    /agnhost, cmd `pause`, the files and users of upstream's Dockerfile,
#                    and a `curl` shim on busybox wget (the suite's curl calls are plain GETs)
#   .../busybox:*    the project's busybox image (scripts/images.sh) under that name
#   .../nonroot:*    the same, with USER 1234 as upstream's
#   .../pause:*      the project's pause image under that name
#   .../nginx:*, .../httpd:*
#                    busybox httpd serving a static page on port 80 (what the node tests
#                    use them for: a long-running server; not nginx or Apache themselves)
# Any other listed image is not built: OUTDIR/missing.txt names them, and tests that use
# them fail on the pull (the run's summary says so).
#
# Cached: OUTDIR/stamp holds a hash of the inputs (this script, the two binaries, the
# project's image tarballs); when it matches nothing is rebuilt.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
log() { echo "conformance/images: $*" >&2; }
die() { log "$*"; exit 1; }
[[ $# -eq 3 ]] || die "usage: $0 E2E_TEST AGNHOST OUTDIR"
e2e="$1" agnhost="$2"
mkdir -p "$3"
out="$(cd "$3" && pwd)"
base="$repo/.cache/images"
# k8s.io/kubernetes' source at the control plane's version, in the Go module cache
# (scripts/conformance/build.sh downloaded it): agnhost's image files.
k8s_version="$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$repo/scripts/controlplane/gomod/go.mod")"
k8s_src="${BUNLET_CACHE:-/var/cache/bunlet}/controlplane/go/mod/k8s.io/kubernetes@$k8s_version"
[[ -d "$k8s_src/test/images/agnhost" ]] || die "no $k8s_src (run scripts/conformance/build.sh)"

bash "$repo/scripts/images.sh" "$base" >&2
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
stamp="$(sha256sum "${BASH_SOURCE[0]}" "$e2e" "$agnhost" "$base/busybox.tar" "$base/pause.tar" | cut -d' ' -f1 | sha256sum | cut -d' ' -f1)"
if [[ -f "$out/stamp" && "$(cat "$out/stamp")" == "$stamp" ]]; then log "up to date in $out"; exit 0; fi
rm -f "$out"/*.tar "$out/missing.txt" "$out/built.txt"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The root file system of a one-layer OCI layout tarball (scripts/images.sh makes one layer).
rootfs_of() { # TARBALL DIR
  local lay="$work/lay-$(basename "$1" .tar)" digest
  mkdir -p "$lay" "$2"
  tar -xf "$1" -C "$lay"
  digest="$(sed -n 's/.*"layers":\[{[^}]*"digest":"sha256:\([0-9a-f]*\)".*/\1/p' "$lay/blobs/sha256/$(sed -n 's/.*"digest":"sha256:\([0-9a-f]*\)".*/\1/p' "$lay/index.json")")"
  [[ -n "$digest" ]] || die "cannot find the layer of $1"
  tar -xf "$lay/blobs/sha256/$digest" -C "$2"
}
rootfs_of "$base/busybox.tar" "$work/busybox"
# Upstream's busybox-based images (the Docker library's busybox) have every applet in /bin, and
# the suite runs some by that path (/bin/sysctl in the sysctl tests); Debian's busybox lists a few
# under sbin/ or usr/: link those into /bin too.
for f in "$work/busybox"/sbin/* "$work/busybox"/usr/bin/* "$work/busybox"/usr/sbin/*; do
  name="$(basename "$f")"
  if [[ -L "$f" && ! -L "$work/busybox/bin/$name" && ! -e "$work/busybox/bin/$name" ]]; then ln -s /bin/busybox "$work/busybox/bin/$name"; fi
done
rootfs_of "$base/pause.tar" "$work/pause"
path_env='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'

mapfile -t images < <("$e2e" --list-images 2>/dev/null | sort -u)
((${#images[@]} > 0)) || die "$e2e --list-images printed nothing"
n=0
for image in "${images[@]}"; do
  file="$out/$(echo "$image" | tr '/:@' '___').tar"
  root="$work/root-$n"; n=$((n + 1))
  # Only the suite's own repositories: other registries' names (private-registry and invalid-image
  # tests) must stay unpullable.
  case "${image%:*}" in
    registry.k8s.io/e2e-test-images/agnhost)
      # As upstream's test/images/agnhost/Dockerfile: the porter's certificate, /uploads, agnhost-2,
      # and the user and group defined in the image.
      cp -a "$work/busybox" "$root"
      install -m 0755 "$agnhost" "$root/agnhost"
      ln -s agnhost "$root/agnhost-2"
      install -m 0644 "$k8s_src/test/images/agnhost/porter/localhost.crt" "$k8s_src/test/images/agnhost/porter/localhost.key" "$root/"
      mkdir -m 0755 "$root/uploads"
      # Upstream's image has curl (Alpine's); the suite runs `curl [-g -q -s -k -m N] URL` in agnhost
      # containers (networking checks, lifecycle hooks). busybox has no curl: a shim on its wget
      # for those forms, refusing any other option by name.
      cat >"$root/usr/bin/curl" <<'SH'
#!/bin/sh
# curl for the offline agnhost image (scripts/conformance/images.sh): GET URL to stdout with
# busybox wget. Understands -g -q -s -S -f -L -k/--insecure -m/--max-time N --connect-timeout N.
max=""; insecure=""; url=""
while [ $# -gt 0 ]; do
  case "$1" in
    -g|-q|-s|-S|-f|-L|-sS|-fsS|-fs|-gs|--silent|--fail|--globoff|--location) ;;
    -k|--insecure) insecure=--no-check-certificate ;;
    -m|--max-time|--connect-timeout) max="$2"; shift ;;
    -*) echo "curl (busybox shim): option $1 is not supported" >&2; exit 2 ;;
    *) url="$1" ;;
  esac
  shift
done
[ -n "$url" ] || { echo "curl (busybox shim): no URL" >&2; exit 2; }
if [ -n "$max" ]; then exec timeout "${max%%.*}" wget -q -O - $insecure "$url"; fi
exec wget -q -O - $insecure "$url"
SH
      chmod 0755 "$root/usr/bin/curl"
      echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$root/etc/passwd"
      printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$root/etc/group"
      cfg="$path_env,\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"pause\"]" ;;
    registry.k8s.io/e2e-test-images/busybox)
      cp -a "$work/busybox" "$root"
      cfg="$path_env,\"Cmd\":[\"sh\"]" ;;
    registry.k8s.io/e2e-test-images/nonroot)
      cp -a "$work/busybox" "$root"
      cfg="$path_env,\"User\":\"1234\"" ;;
    registry.k8s.io/pause)
      cp -a "$work/pause" "$root"
      cfg='"Env":["PATH=/"],"Entrypoint":["/pause"]' ;;
    registry.k8s.io/e2e-test-images/nginx | registry.k8s.io/e2e-test-images/httpd)
      cp -a "$work/busybox" "$root"
      mkdir -p "$root/usr/share/nginx/html" "$root/usr/local/apache2/htdocs"
      printf '<html><body>It works!</body></html>\n' | tee "$root/usr/share/nginx/html/index.html" >"$root/usr/local/apache2/htdocs/index.html"
      cfg="$path_env,\"Cmd\":[\"httpd\",\"-f\",\"-p\",\"80\",\"-h\",\"/usr/share/nginx/html\"]" ;;
    *)
      echo "$image" >>"$out/missing.txt"; continue ;;
  esac
  bash "$repo/scripts/images.sh" --oci "$image" "$root" "$cfg" "$file"
  echo "$image" >>"$out/built.txt"
done
log "built $(wc -l <"$out/built.txt") images; not built (no offline source): $(cat "$out/missing.txt" 2>/dev/null | wc -l)"
echo "$stamp" >"$out/stamp"
