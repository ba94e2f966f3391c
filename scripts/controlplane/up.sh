#!/usr/bin/env bash
# Starts a real, private Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) with everything under DIR and every
# port on 127.0.0.1 chosen free, so several run side by side.
#
#   scripts/controlplane/up.sh DIR        start (or find running; restarts
#                                         components of DIR that died)
#   scripts/controlplane/down.sh DIR      stop everything of DIR and remove it
#   scripts/controlplane/restart-apiserver.sh DIR [DOWN_SECONDS]
#
# When kube-apiserver answers /readyz and the controller-manager has made the
# `default` ServiceAccount, prints on stdout (KEY=VALUE, also kept in
# DIR/controlplane.env):
#   APISERVER_URL=https://127.0.0.1:PORT
#   KUBECONFIG=DIR/kubeconfig/admin.kubeconfig
#   CA_FILE=DIR/pki/ca.crt
# Node identities: scripts/controlplane/pki.sh DIR node NAME.
#
# Environment (read when DIR is first started):
#   BUNLET_APISERVER_PORT              secure port (default: a free one; e.g. 6443)
#   BUNLET_NODE_MONITOR_GRACE_PERIOD   controller-manager --node-monitor-grace-period
#                                      (default upstream's 50s; tests use e.g. 20s)
#   BUNLET_APISERVER_ARGS, BUNLET_CONTROLLER_MANAGER_ARGS, BUNLET_SCHEDULER_ARGS
#                                      extra flags, space-separated
#   BUNLET_CONTROLPLANE_V              log verbosity of the Kubernetes components (default 1)
#   BUNLET_CONTROLPLANE_TIMEOUT        seconds to wait for readiness (default 90)
#   BUNLET_CONTROLPLANE_BIN            binaries to use (default: scripts/controlplane/build.sh,
#                                      which builds them once into BUNLET_CACHE)
set -euo pipefail
cp_script=up
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -eq 1 ]] || die "usage: $0 DIR"
dir="$(cp_dir "$1")"
t0=$(date +%s%N)
timeout="${BUNLET_CONTROLPLANE_TIMEOUT:-90}"

if [[ -e "$dir" && ! -f "$dir/$MARKER" && -n "$(ls -A "$dir" 2>/dev/null)" ]]; then
  die "$dir exists, is not empty and is not a control-plane directory; refusing to use it"
fi
mkdir -p "$dir"
touch "$dir/$MARKER"
cp_lock "$dir"

if [[ -n "${BUNLET_CONTROLPLANE_BIN:-}" ]]; then
  BIN="$BUNLET_CONTROLPLANE_BIN"
else
  BIN="$(bash "$cp_here/build.sh")"
fi
for n in "${COMPONENTS[@]}" kubectl; do [[ -x "$BIN/$n" ]] || die "no $BIN/$n"; done

env_file="$dir/controlplane.env"
if [[ ! -f "$env_file" ]]; then
  # Ports, URLs and paths, once per DIR: restarts keep them.
  read -r -a ports <<<"$(claim_ports "$dir" 5)"
  api_port="${BUNLET_APISERVER_PORT:-${ports[0]}}"
  if [[ -n "${BUNLET_APISERVER_PORT:-}" ]] && listening "$api_port"; then
    release_ports "$dir"; die "port $api_port (BUNLET_APISERVER_PORT) is in use"
  fi
  cat >"$env_file.tmp" <<EOF
KUBERNETES_VERSION=$("$BIN/kubectl" version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -1)
BIN=$BIN
APISERVER_PORT=$api_port
ETCD_CLIENT_PORT=${ports[1]}
ETCD_PEER_PORT=${ports[2]}
CONTROLLER_MANAGER_PORT=${ports[3]}
SCHEDULER_PORT=${ports[4]}
APISERVER_URL=https://127.0.0.1:$api_port
KUBECONFIG=$dir/kubeconfig/admin.kubeconfig
CA_FILE=$dir/pki/ca.crt
EOF
  mv "$env_file.tmp" "$env_file"
fi
# shellcheck disable=SC1090
# (BIN too: a DIR keeps the binaries it was first started with.)
source <(grep -E '^[A-Z_]+=' "$env_file")

bash "$cp_here/pki.sh" "$dir"
pki="$dir/pki"
kc="$dir/kubeconfig"

# args NAME FLAG...: DIR/NAME.args, one flag per line (written once per DIR).
args() {
  local name="$1"; shift
  [[ -f "$dir/$name.args" ]] && return 0
  printf '%s\n' "$@" >"$dir/$name.args.tmp"
  mv "$dir/$name.args.tmp" "$dir/$name.args"
}
v="${BUNLET_CONTROLPLANE_V:-1}"
# shellcheck disable=SC2206
extra_api=(${BUNLET_APISERVER_ARGS:-})
# shellcheck disable=SC2206
extra_kcm=(${BUNLET_CONTROLLER_MANAGER_ARGS:-})
# shellcheck disable=SC2206
extra_sched=(${BUNLET_SCHEDULER_ARGS:-})
grace=()
[[ -n "${BUNLET_NODE_MONITOR_GRACE_PERIOD:-}" ]] && grace=("--node-monitor-grace-period=$BUNLET_NODE_MONITOR_GRACE_PERIOD")

etcd_peer="http://127.0.0.1:$ETCD_PEER_PORT"
etcd_client="http://127.0.0.1:$ETCD_CLIENT_PORT"
# Plain http on loopback. --unsafe-no-fsync: a throwaway test store, and
# fsync is most of etcd's latency on CI disks.
args etcd \
  --name=default \
  "--data-dir=$dir/etcd" \
  "--listen-client-urls=$etcd_client" \
  "--advertise-client-urls=$etcd_client" \
  "--listen-peer-urls=$etcd_peer" \
  "--initial-advertise-peer-urls=$etcd_peer" \
  "--initial-cluster=default=$etcd_peer" \
  --initial-cluster-state=new \
  --unsafe-no-fsync=true \
  --log-level=warn

# NodeRestriction on top of the default admission plugins (a normal
# cluster's), Node+RBAC authorization, bootstrap tokens for TLS bootstrap,
# the front-proxy (request-header) setup kubeadm makes. The advertised
# address is loopback, which an Endpoints object may not hold: no endpoint
# reconciler (the `kubernetes` Service still exists, without endpoints).
# Open watches end 2 s into a SIGTERM instead of holding the shutdown for
# the 60 s request timeout.
args kube-apiserver \
  --bind-address=127.0.0.1 \
  --advertise-address=127.0.0.1 \
  --endpoint-reconciler-type=none \
  "--secure-port=$APISERVER_PORT" \
  "--etcd-servers=$etcd_client" \
  "--client-ca-file=$pki/ca.crt" \
  "--tls-cert-file=$pki/apiserver.crt" \
  "--tls-private-key-file=$pki/apiserver.key" \
  --authorization-mode=Node,RBAC \
  --enable-admission-plugins=NodeRestriction \
  --enable-bootstrap-token-auth=true \
  --allow-privileged=true \
  --service-cluster-ip-range=10.96.0.0/12 \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  "--service-account-key-file=$pki/sa.pub" \
  "--service-account-signing-key-file=$pki/sa.key" \
  "--requestheader-client-ca-file=$pki/front-proxy-ca.crt" \
  --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User \
  --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  "--proxy-client-cert-file=$pki/front-proxy-client.crt" \
  "--proxy-client-key-file=$pki/front-proxy-client.key" \
  "--kubelet-client-certificate=$pki/apiserver-kubelet-client.crt" \
  "--kubelet-client-key=$pki/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types=InternalIP,Hostname \
  --shutdown-watch-termination-grace-period=2s \
  --profiling=false \
  "--v=$v" \
  ${extra_api[@]+"${extra_api[@]}"}

# Every controller except the cloud ones (no cloud provider), plus the two
# bootstrap-token ones kubeadm turns on; no leader election (one instance,
# and it must survive restart-apiserver); node lifecycle on, so NotReady
# taints and evictions happen.
args kube-controller-manager \
  --bind-address=127.0.0.1 \
  "--secure-port=$CONTROLLER_MANAGER_PORT" \
  "--kubeconfig=$kc/controller-manager.kubeconfig" \
  "--authentication-kubeconfig=$kc/controller-manager.kubeconfig" \
  "--authorization-kubeconfig=$kc/controller-manager.kubeconfig" \
  --controllers='*,bootstrap-signer-controller,token-cleaner-controller,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller' \
  --leader-elect=false \
  --use-service-account-credentials=true \
  "--service-account-private-key-file=$pki/sa.key" \
  "--root-ca-file=$pki/ca.crt" \
  "--cluster-signing-cert-file=$pki/ca.crt" \
  "--cluster-signing-key-file=$pki/ca.key" \
  --allocate-node-cidrs=false \
  --service-cluster-ip-range=10.96.0.0/12 \
  --profiling=false \
  "--v=$v" \
  ${grace[@]+"${grace[@]}"} \
  ${extra_kcm[@]+"${extra_kcm[@]}"}

args kube-scheduler \
  --bind-address=127.0.0.1 \
  "--secure-port=$SCHEDULER_PORT" \
  "--kubeconfig=$kc/scheduler.kubeconfig" \
  "--authentication-kubeconfig=$kc/scheduler.kubeconfig" \
  "--authorization-kubeconfig=$kc/scheduler.kubeconfig" \
  --leader-elect=false \
  --profiling=false \
  "--v=$v" \
  ${extra_sched[@]+"${extra_sched[@]}"}

started=()
ensure() { # NAME
  if ! running_pid "$dir" "$1" >/dev/null; then
    start_component "$dir" "$BIN" "$1"
    started+=("$1")
  fi
}
# kube-apiserver waits for etcd itself; the controller-manager and the
# scheduler give up if kube-apiserver is not healthy soon, so they start
# once it is ready.
ensure etcd
ensure kube-apiserver
wait_apiserver "$dir" "$timeout"
ensure kube-controller-manager
ensure kube-scheduler

deadline=$(( $(date +%s) + timeout ))
for n in kube-controller-manager:$CONTROLLER_MANAGER_PORT kube-scheduler:$SCHEDULER_PORT; do
  until listening "${n#*:}"; do
    running_pid "$dir" "${n%%:*}" >/dev/null || { tail -n 30 "$dir/${n%%:*}.log" >&2; die "${n%%:*} exited (log: $dir/${n%%:*}.log)"; }
    (( $(date +%s) < deadline )) || die "${n%%:*} does not listen on ${n#*:} after ${timeout}s"
    sleep 0.2
  done
done
# The service-account controllers work: pods can be created.
until kubectl_admin "$dir" get serviceaccount default -n default -o name >/dev/null 2>&1; do
  running_pid "$dir" kube-controller-manager >/dev/null || { tail -n 30 "$dir/kube-controller-manager.log" >&2; die "kube-controller-manager exited"; }
  (( $(date +%s) < deadline )) || die "no default ServiceAccount after ${timeout}s (log: $dir/kube-controller-manager.log)"
  sleep 0.2
done

if ((${#started[@]})); then
  log "started ${started[*]} ($KUBERNETES_VERSION) in $(ms "$t0") ms"
else
  log "already running ($KUBERNETES_VERSION)"
fi
log "try: $BIN/kubectl --kubeconfig $KUBECONFIG get --raw /readyz"
echo "APISERVER_URL=$APISERVER_URL"
echo "KUBECONFIG=$KUBECONFIG"
echo "CA_FILE=$CA_FILE"
