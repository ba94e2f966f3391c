#!/usr/bin/env bash
# Certificates and kubeconfigs for a test control plane, made with openssl.
#
#   scripts/controlplane/pki.sh DIR              the cluster PKI (kept if already there)
#   scripts/controlplane/pki.sh DIR node NAME    a node identity: client certificate
#                                                CN=system:node:NAME, O=system:nodes, and
#                                                DIR/kubeconfig/node-NAME.kubeconfig;
#                                                prints the kubeconfig path
#
# Layout (DIR/pki):
#   ca.crt ca.key                      the cluster CA (also signs CSRs in the
#                                      controller-manager)
#   apiserver.crt/.key                 serving: 127.0.0.1, localhost, kubernetes,
#                                      kubernetes.default[.svc[.cluster.local]], 10.96.0.1
#   sa.key sa.pub                      service-account token signing pair
#   admin.crt/.key                     CN=kubernetes-admin, O=system:masters
#   kube-controller-manager.crt/.key   CN=system:kube-controller-manager
#   kube-scheduler.crt/.key            CN=system:kube-scheduler
#   apiserver-kubelet-client.crt/.key  apiserver -> kubelet, O=system:masters
#   nodes/NAME.crt/.key                CN=system:node:NAME, O=system:nodes
#   front-proxy-ca.crt/.key            the aggregation layer's request-header CA, and
#   front-proxy-client.crt/.key        its client (CN=front-proxy-client), so
#                                      aggregated APIs and delegated authentication work
# and DIR/kubeconfig/{admin,controller-manager,scheduler,node-NAME}.kubeconfig,
# which name the certificate files by absolute path.
#
# Keys are ECDSA P-256 (fast to make; Go and Bun both take them), certificates
# last a year. The server URL in the kubeconfigs is APISERVER_URL from the
# environment, else from DIR/controlplane.env (written by up.sh), else
# https://127.0.0.1:6443.
set -euo pipefail

log() { echo "controlplane/pki: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { die "usage: $0 DIR | $0 DIR node NAME"; }

[[ $# -eq 1 || ($# -eq 3 && "$2" == node) ]] || usage
dir="$(realpath -m "$1")"
pki="$dir/pki"
kc="$dir/kubeconfig"
command -v openssl >/dev/null || die "openssl not found"

if [[ -z "${APISERVER_URL:-}" && -f "$dir/controlplane.env" ]]; then
  APISERVER_URL="$(sed -n 's/^APISERVER_URL=//p' "$dir/controlplane.env")"
fi
server="${APISERVER_URL:-https://127.0.0.1:6443}"
days=365

newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }

# makeca NAME CN: a self-signed CA, NAME.crt + NAME.key.
makeca() {
  [[ -f "$pki/$1.crt" ]] && return 0
  newkey "$pki/$1.key"
  openssl req -x509 -new -key "$pki/$1.key" -subj "/CN=$2" -days "$days" -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$pki/$1.crt.tmp" 2>/dev/null
  mv "$pki/$1.crt.tmp" "$pki/$1.crt"
}

# sign NAME SUBJECT EXTENSIONS [CA]: NAME.key + NAME.crt signed by CA (default
# ca). Written under temporary names and renamed, so a half-made pair is never
# used.
sign() {
  local name="$1" subj="$2" ext="$3" ca="${4:-ca}" tmp
  tmp="$(mktemp -d "$pki/.sign.XXXXXX")"
  newkey "$tmp/k"
  openssl req -new -key "$tmp/k" -subj "$subj" -out "$tmp/csr" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" "$ext" >"$tmp/ext"
  openssl x509 -req -in "$tmp/csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$days" -sha256 \
    -extfile "$tmp/ext" -out "$tmp/c" 2>/dev/null
  mv "$tmp/k" "$pki/$name.key"
  mv "$tmp/c" "$pki/$name.crt"
  rm -rf "$tmp"
}
client() { sign "$1" "$2" "extendedKeyUsage=clientAuth" "${3:-ca}"; }

# kubeconfig FILE USER CERTNAME
kubeconfig() {
  local file="$1" user="$2" cert="$3"
  cat >"$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: bunlet
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $pki/$cert.crt
    client-key: $pki/$cert.key
contexts:
- name: $user@bunlet
  context:
    cluster: bunlet
    user: $user
current-context: $user@bunlet
EOF
  chmod 600 "$file.tmp"
  mv "$file.tmp" "$file"
}

if [[ $# -eq 3 ]]; then
  node="$3"
  # A DNS-1123 subdomain, as Node names are.
  [[ "$node" =~ ^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$ ]] || die "bad node name: $node"
  [[ -f "$pki/ca.key" ]] || die "no CA in $pki: run $0 $dir first"
  mkdir -p "$pki/nodes" "$kc"
  [[ -f "$pki/nodes/$node.crt" ]] || client "nodes/$node" "/O=system:nodes/CN=system:node:$node"
  kubeconfig "$kc/node-$node.kubeconfig" "system:node:$node" "nodes/$node"
  echo "$kc/node-$node.kubeconfig"
  exit 0
fi

mkdir -p "$pki" "$kc"
chmod 700 "$pki"
makeca ca bunlet-test-ca
makeca front-proxy-ca bunlet-test-front-proxy-ca
[[ -f "$pki/apiserver.crt" ]] || sign apiserver "/CN=kube-apiserver" \
  "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
if [[ ! -f "$pki/sa.pub" ]]; then
  newkey "$pki/sa.key"
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi
[[ -f "$pki/admin.crt" ]] || client admin "/O=system:masters/CN=kubernetes-admin"
[[ -f "$pki/kube-controller-manager.crt" ]] || client kube-controller-manager "/CN=system:kube-controller-manager"
[[ -f "$pki/kube-scheduler.crt" ]] || client kube-scheduler "/CN=system:kube-scheduler"
[[ -f "$pki/apiserver-kubelet-client.crt" ]] || client apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
[[ -f "$pki/front-proxy-client.crt" ]] || client front-proxy-client "/CN=front-proxy-client" front-proxy-ca

# Kubeconfigs are cheap: always rewritten, so they follow the server URL.
kubeconfig "$kc/admin.kubeconfig" kubernetes-admin admin
kubeconfig "$kc/controller-manager.kubeconfig" system:kube-controller-manager kube-controller-manager
kubeconfig "$kc/scheduler.kubeconfig" system:kube-scheduler kube-scheduler
for f in "$pki"/nodes/*.crt; do
  [[ -f "$f" ]] || continue
  n="$(basename "$f" .crt)"
  kubeconfig "$kc/node-$n.kubeconfig" "system:node:$n" "nodes/$n"
done
log "PKI ready in $pki, kubeconfigs in $kc (server $server)"
