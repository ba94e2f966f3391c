#!/usr/bin/env bash
# The agent's main job on a fresh Debian machine, as root: sets up what is
# missing for the demo (scripts/setup.sh --demo), builds dist/kubelet, starts a private
# containerd, and runs the agent in standalone mode with the sample static
# pod from examples/static-pods. Ctrl-C stops the agent and removes
# everything the demo started (containers, network, containerd) and its
# directory ($DEMO_DIR, default /tmp/bunlet-demo), where all it wrote is.
#
#   scripts/demo.sh            run until Ctrl-C
#   DEMO_EXIT_AFTER_READY=1    stop by itself once the pod answered (CI smoke)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$repo"

bash scripts/setup.sh --demo
node_modules/.bin/bun scripts/build.ts
dir="${DEMO_DIR:-/tmp/bunlet-demo}"
port="${DEMO_READONLY_PORT:-10255}"
# Pods go under this shell's own memory cgroup, so the demo stays inside the
# limits of whoever started it (on a dedicated node, leave cgroupRoot empty).
cgroup_root="$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)"
cgroup_root="${cgroup_root%/}/bunlet-demo"
export BUNLET_CGROUP_PARENT="$cgroup_root"

scripts/containerd.sh start "$dir" >/dev/null
agent_pid=""
cleanup() {
  trap - INT TERM EXIT
  echo
  echo "demo: stopping the agent and removing the demo's containers, network, containerd and $dir"
  [[ -n "$agent_pid" ]] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
  scripts/containerd.sh purge "$dir" >/dev/null 2>&1 || true
}
trap cleanup INT TERM EXIT

mkdir -p "$dir/manifests" "$dir/pod-logs"
cp examples/static-pods/web.yaml "$dir/manifests/"
cat >"$dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: $dir/manifests
containerRuntimeEndpoint: unix://$dir/containerd.sock
podLogsDir: $dir/pod-logs
cgroupRoot: $cgroup_root
address: 127.0.0.1
readOnlyPort: $port
failSwapOn: false
YAML

# Everything the agent writes stays in $dir, which Ctrl-C removes: --cert-dir
# too (its default, as upstream's, is /var/lib/kubelet/pki whatever the root dir).
dist/kubelet --config="$dir/kubelet.yaml" --root-dir="$dir/kubelet" --cert-dir="$dir/kubelet/pki" --hostname-override=demo-node >"$dir/kubelet.log" 2>&1 &
agent_pid=$!
echo "demo: agent started (pid $agent_pid), log: $dir/kubelet.log"

ip=""
for _ in $(seq 1 120); do
  kill -0 "$agent_pid" 2>/dev/null || { echo "demo: the agent exited; its log:"; tail -20 "$dir/kubelet.log"; exit 1; }
  pods="$(curl -fsS "http://127.0.0.1:$port/pods" 2>/dev/null || true)"
  [[ -n "$pods" ]] && ip="$(node_modules/.bin/bun -e 'const l = JSON.parse(process.argv[1]); const p = l.items.find((p) => p.status?.phase === "Running" && p.status.podIP); console.log(p?.status.podIP ?? "")' "$pods" || true)"
  [[ -n "$ip" ]] && curl -fsS "http://$ip:8080/index.html" >/dev/null 2>&1 && break
  ip=""
  sleep 0.5
done
[[ -n "$ip" ]] || { echo "demo: the pod did not come up; see $dir/kubelet.log"; exit 1; }

cat <<MSG

demo: the static pod web-demo-node is Running at $ip
  curl http://$ip:8080/index.html      -> $(curl -fsS "http://$ip:8080/index.html")
  curl http://127.0.0.1:$port/pods      the pods this node runs (read-only port)
  manifests:   $dir/manifests  (edit or delete web.yaml and watch the agent follow)
  agent log:   $dir/kubelet.log
  pod logs:    $dir/pod-logs
Ctrl-C stops everything.
MSG
if [[ -n "${DEMO_EXIT_AFTER_READY:-}" ]]; then exit 0; fi
wait "$agent_pid"
