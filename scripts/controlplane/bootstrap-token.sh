#!/usr/bin/env bash
# Lets nodes join a running test control plane with only a bootstrap token,
# as `kubeadm join` sets it up: the token Secret, the RBAC that lets
# bootstrappers create CSRs and has the controller-manager auto-approve
# them (new nodes, and renewals by nodes themselves), and a bootstrap
# kubeconfig for the agent's --bootstrap-kubeconfig.
#
#   scripts/controlplane/bootstrap-token.sh DIR [HOURS]   prints DIR/kubeconfig/bootstrap.kubeconfig
#                                                         (the token expires after HOURS, default 24)
#
# Idempotent: the token is made once per DIR and reused.
set -euo pipefail
[[ $# -ge 1 && "${2:-24}" =~ ^[0-9]+$ ]] || { echo "usage: $0 DIR [HOURS]" >&2; exit 1; }
dir="$(realpath -m "$1")"
hours="${2:-24}"
# shellcheck source=/dev/null
source "$dir/controlplane.env"
kubectl() { "$BIN/kubectl" --kubeconfig "$dir/kubeconfig/admin.kubeconfig" "$@"; }
tokenfile="$dir/pki/bootstrap-token"
if [[ ! -f "$tokenfile" ]]; then
  id=$(openssl rand -hex 3)
  secret=$(openssl rand -hex 8)
  echo "$id.$secret" >"$tokenfile"
  chmod 600 "$tokenfile"
fi
token=$(cat "$tokenfile")
id="${token%%.*}"
expiration=$(date -u -d "+$hours hours" +%Y-%m-%dT%H:%M:%SZ)
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-$id
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  token-id: "$id"
  token-secret: "${token#*.}"
  expiration: "$expiration"
  usage-bootstrap-authentication: "true"
  usage-bootstrap-signing: "true"
  auth-extra-groups: system:bootstrappers:bunlet:default-node-token
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: bunlet:kubelet-bootstrap }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:node-bootstrapper }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:bootstrappers }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: bunlet:node-autoapprove-bootstrap }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:certificates.k8s.io:certificatesigningrequests:nodeclient }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:bootstrappers }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: bunlet:node-autoapprove-certificate-rotation }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: system:certificates.k8s.io:certificatesigningrequests:selfnodeclient }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:nodes }]
YAML
out="$dir/kubeconfig/bootstrap.kubeconfig"
cat >"$out.tmp" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: bunlet
  cluster:
    server: $APISERVER_URL
    certificate-authority: $dir/pki/ca.crt
users:
- name: kubelet-bootstrap
  user:
    token: $token
contexts:
- name: kubelet-bootstrap@bunlet
  context: { cluster: bunlet, user: kubelet-bootstrap }
current-context: kubelet-bootstrap@bunlet
YAML
chmod 600 "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
