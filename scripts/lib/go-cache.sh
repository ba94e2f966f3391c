# Sourced by the scripts that build test parts from Go modules into a cache
# outside the work tree (scripts/controlplane/build.sh, scripts/containerd2/build.sh):
# one way to set the Go environment, key a build, find stale binaries, take the
# build lock and move finished binaries into place with their stamps.
#
# A binary is fresh when it is executable and its .NAME.stamp holds the key of
# what built it (go.mod, go.sum, toolchain and recipe), so a warm run does no Go
# work. The callers define log() and die() before sourcing this file.

# go_cache_env DIR: the Go environment for builds cached under DIR.
go_cache_env() {
  export GOMODCACHE="$1/go/mod"
  export GOCACHE="$1/go/build"
  # -modcacherw: the module cache can be removed with rm -rf (CI cache resets).
  export GOFLAGS="-trimpath -buildvcs=false -mod=readonly -modcacherw"
  export GOTOOLCHAIN=local
  # go.sum (committed) holds every checksum the build needs and -mod=readonly
  # forbids adding any, so the checksum database is never needed; it is not
  # reachable from these machines (the proxy answers 404 for /sumdb/).
  export GOSUMDB=off
  export GOWORK=off
}

# go_origin MODULE VERSION Hash|Time: the commit or date of a release, from the
# proxy's .info file that `go mod download` keeps in the module cache (empty if
# it is not there).
go_origin() {
  local f="$GOMODCACHE/cache/download/$1/@v/$2.info"
  [[ -f "$f" ]] || return 0
  if [[ "$3" == Hash ]]; then sed -n 's/.*"Hash":"\([0-9a-f]*\)".*/\1/p' "$f"
  else sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$f"; fi
}

# go_build_key GOMOD_DIR WHAT...: the key of a build from that module directory
# (its go.mod and go.sum) and WHAT (toolchain, recipe, flags).
go_build_key() {
  local dir=$1; shift
  cat "$dir/go.mod" "$dir/go.sum" <(echo "$*") | sha256sum | cut -c1-32
}

# go_stale BIN KEY NAME...: the names whose binary in BIN is missing or was built with another key.
go_stale() {
  local bin=$1 key=$2 n out=(); shift 2
  for n in "$@"; do
    [[ -x "$bin/$n" && "$(cat "$bin/.$n.stamp" 2>/dev/null)" == "$key" ]] || out+=("$n")
  done
  echo "${out[*]}"
}

# go_lock FD LOCKFILE: holds LOCKFILE on file descriptor FD, saying so when it has to wait.
go_lock() {
  eval "exec $1>\"\$2\""
  if ! flock -n "$1"; then
    log "another build holds $2; waiting"
    flock "$1"
  fi
}

# go_install_built TMP BIN KEY NAME...: moves each built NAME from TMP into BIN with its stamp.
go_install_built() {
  local tmp=$1 bin=$2 key=$3 n; shift 3
  for n in "$@"; do
    [[ -x "$tmp/$n" ]] || die "go build produced no $n"
    mv -f "$tmp/$n" "$bin/$n"
    echo "$key" >"$bin/.$n.stamp"
  done
}

# go_module_binary NAME GOMOD_DIR PACKAGE LDFLAGS BIN LOCKFILE WHAT...: builds one
# binary from a module directory of its own (its own go.mod/go.sum and so its
# own key, so adding or bumping it never rebuilds anything else), under the lock.
go_module_binary() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4 bin=$5 lock=$6; shift 6
  local key t tmp
  key="$(go_build_key "$dir" "$@")"
  if [[ -z "$(go_stale "$bin" "$key" "$name")" ]]; then log "up to date: $name"; return 0; fi
  mkdir -p "$bin" "$GOMODCACHE" "$GOCACHE"
  go_lock 8 "$lock"
  if [[ -z "$(go_stale "$bin" "$key" "$name")" ]]; then log "up to date after waiting: $name"; exec 8>&-; return 0; fi
  log "building $name with $("$GO" env GOVERSION) into $bin"
  t=$(date +%s%N)
  tmp="$(mktemp -d "$bin/../.tmp.XXXXXX")"
  (cd "$dir" && "$GO" build -p "${BUNLET_GO_PARALLEL:-2}" -ldflags "$ldflags" -o "$tmp/$name" "$pkg") >&2 \
    || { rm -rf "$tmp"; die "go build of $name failed"; }
  go_install_built "$tmp" "$bin" "$key" "$name"
  rm -rf "$tmp"
  exec 8>&-
  log "built $name in $(( ($(date +%s%N) - t) / 1000000 )) ms"
}

# go_k8s_ldflags VERSION: the -ldflags that stamp a Kubernetes release's version into
# component-base (servers, kubelet, e2e.test) and client-go (kubectl's client side), as
# upstream's hack/lib/version.sh does, with the commit and date from the module cache.
go_k8s_ldflags() {
  local version=$1 commit date major minor p flags="-s -w"
  commit="$(go_origin k8s.io/kubernetes "$version" Hash)"
  date="$(go_origin k8s.io/kubernetes "$version" Time)"
  major="${version#v}"; major="${major%%.*}"
  minor="${version#v*.}"; minor="${minor%%.*}"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    flags+=" -X $p.gitTreeState=clean -X $p.buildDate=${date:-1970-01-01T00:00:00Z}"
    [[ -n "$commit" ]] && flags+=" -X $p.gitCommit=$commit"
  done
  echo "$flags"
}
