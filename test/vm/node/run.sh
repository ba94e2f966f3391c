#!/bin/bash
# Runs inside the systemd test node (scripts/vm/node-image.sh), started by
# bunlet-node-check.service from the payload disk (scripts/vm/run-node.ts),
# as root, once systemd is up. It sets the node up as a user would
# (`kubelet install`, `systemctl enable --now kubelet`) and prints what it
# sees as facts on the serial console:
#   BUNLET-FACT <name> <value...>
# The host test (test/integration/systemd-node-vm.test.ts) computes what
# each fact must be and asserts it; this script only observes. The last step
# powers the node off through logind with the agent's delay lock held, and
# a unit stopped after the agent prints which pod stopped when.
set -u
P=/payload
# full: every check, on the image's containerd 1.6; containerd2: containerd 2.x (the hook below), the
# cgroup driver it reports, a config that disagrees, the pods and their slices, then power off.
MODE=$(cat $P/mode 2>/dev/null || echo full)
fact() { local name=$1; shift; echo "BUNLET-FACT $name $*"; }
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }

# Waits until the command succeeds, up to $1 seconds; false on timeout.
wait_for() {
  local limit=$1; shift
  local end=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -ge "$end" ] && return 1
    sleep 2
  done
}
pods_json() { curl -sf --max-time 10 http://127.0.0.1:10255/pods; }
# pod <name> <jq expression on the pod>
pod() { pods_json | jq -r --arg n "$1" ".items[] | select(.metadata.name | startswith(\$n + \"-\")) | $2"; }
running() { [ "$(pod "$1" '.status.containerStatuses[0].state | has("running")')" = "true" ]; }
all_running() { running guaranteed && running burstable && running besteffort; }
container_ids() { for p in guaranteed burstable besteffort; do pod $p '.status.containerStatuses[0].containerID'; done | tr '\n' ' '; }
agent_up() { curl -sf --max-time 5 -o /dev/null http://127.0.0.1:10255/pods; }
# The agent never exits on its own: a restart by systemd (Restart=always) means it died.
agent_died() { [ "$(systemctl show kubelet -p NRestarts --value)" != "0" ] || [ "$(systemctl show kubelet -p SubState --value)" = "auto-restart" ] || [ "$(systemctl is-active kubelet)" = "failed" ]; }
agent_up_or_died() { agent_up || agent_died; }
oneline() { tr '\n' '|' | tr -s ' ' | cut -c1-9000; }
# When the agent is not up or the pods do not run: what the agent, systemd and
# containerd say, one fact per source on one line each (the host test puts
# them in its first failure: CI shows only a failed test's last lines).
diagnose() {
  fact diag-kubelet-status "$(systemctl status kubelet --no-pager -n 0 2>&1 | oneline) NRestarts=$(systemctl show kubelet -p NRestarts --value)"
  fact diag-kubelet-journal-head "$(journalctl -u kubelet -n 10000 -o cat --no-pager 2>&1 | head -15 | oneline)"
  fact diag-kubelet-journal "$(journalctl -u kubelet -n 30 -o cat --no-pager 2>&1 | oneline)"
  fact diag-kubelet-version "$(timeout 60 /usr/bin/kubelet --version 2>&1 | oneline; printf ' rc=%s' "${PIPESTATUS[0]}")"
  fact diag-containerd-journal "$(journalctl -u containerd -n 20 -o cat --no-pager 2>&1 | oneline)"
  fact diag-ctr "containers: $(ctr -n k8s.io containers ls 2>&1 | oneline) tasks: $(ctr -n k8s.io tasks ls 2>&1 | oneline) images: $(ctr -n k8s.io images ls -q 2>&1 | oneline)"
  fact diag-kernel "$(dmesg | grep -iE 'segfault|traps:|invalid opcode|killed process|oom-kill' | tail -8 | oneline)"
  proc_facts "$(systemctl show kubelet -p MainPID --value)"
}
# The agent's process when it is alive but not serving: busy (CPU ticks in 5 s) or blocked (each
# thread's wchan), its threads and children.
proc_facts() {
  local pid=$1 cpu1 cpu2
  [ -n "$pid" ] && [ "$pid" != 0 ] && [ -d "/proc/$pid" ] || { fact diag-kubelet-proc "no process (MainPID=$pid)"; return; }
  cpu1=$(awk '{print $14+$15}' "/proc/$pid/stat"); sleep 5; cpu2=$(awk '{print $14+$15}' "/proc/$pid/stat")
  fact diag-kubelet-proc "pid=$pid $(grep -E '^(State|Threads|VmRSS):' "/proc/$pid/status" | tr -s '\t ' ' ' | oneline) cpu_ticks_in_5s=$((cpu2 - cpu1)) wchan=$(for t in /proc/"$pid"/task/*; do printf '%s:%s ' "$(cat "$t/comm")" "$(cat "$t/wchan")"; done) children=$(pgrep -P "$pid" -a | oneline)"
}
# The OOM pod (32Mi, over its limit) once it terminated: its status, and the memcg of each task the
# kernel's OOM killer killed (the oom-kill lines), which must be this container's scope.
oom_facts() {
  wait_for 120 sh -c "[ -n \"\$(curl -sf http://127.0.0.1:10255/pods | jq -r '.items[] | select(.metadata.name | startswith(\"oom-\")) | .status.containerStatuses[0].state.terminated.reason // empty')\" ]"
  fact oom "$(pod oom '.status.containerStatuses[0].state.terminated | "reason=\(.reason) exitCode=\(.exitCode)"') containerID=$(pod oom '.status.containerStatuses[0].containerID') phase=$(pod oom '.status.phase') uid=$(pod oom '.metadata.uid')"
  fact oom-kernel "$(dmesg | grep 'oom-kill:' | grep -o 'task_memcg=[^,]*' | tr '\n' ' ')"
}
# Stops here: the diagnostics, then power off (the later checks need a running agent).
give_up() {
  fact gave-up "$1 t=$(elapsed)"
  diagnose
  systemctl poweroff
  exit 0
}

# Hook for another containerd (e.g. 2.x built from Go modules): the payload's
# containerd/bin replaces the binaries and containerd/config.toml the config.
if [ -d $P/containerd/bin ]; then
  cp -a $P/containerd/bin/. /usr/local/bin/
  [ -f $P/containerd/config.toml ] && cp $P/containerd/config.toml /etc/containerd/config.toml
  mkdir -p /etc/systemd/system/containerd.service.d
  printf '[Service]\nExecStart=\nExecStart=/usr/local/bin/containerd\n' >/etc/systemd/system/containerd.service.d/bunlet-vm.conf
  systemctl daemon-reload
  systemctl restart containerd
fi

fact node "kernel=$(uname -r) pid1=$(cat /proc/1/comm) cgroupfs=$(stat -fc %T /sys/fs/cgroup) systemd=$(systemctl --version | head -1 | awk '{print $2}')"
fact controllers "$(cat /sys/fs/cgroup/cgroup.controllers)"
fact runtime "containerd=$(containerd --version | awk '{print $3}') runc=$(runc --version | head -1 | awk '{print $3}') SystemdCgroup=$(grep -c 'SystemdCgroup = true' /etc/containerd/config.toml)"
wait_for 60 systemctl is-active --quiet containerd
fact containerd-active "$(systemctl is-active containerd)"

# kubeReservedCgroup (kubelet.yaml): a slice that exists before the agent starts (the agent enforces kubeReserved
# on it and never creates it, as upstream); a unit in it keeps it alive.
systemd-run --quiet --unit=bunlet-kube-reserved --slice=kubereserved.slice sleep infinity
wait_for 30 test -d /sys/fs/cgroup/kubereserved.slice

# containerd 2.x answers CRI RuntimeConfig (1.6 does not): a config file that says cgroupfs while the
# runtime says systemd must stop the agent at start, exit 2, with a message naming both settings.
if [ "$MODE" = containerd2 ]; then
  sed 's/^cgroupDriver: systemd$/cgroupDriver: cgroupfs/' $P/kubelet.yaml >/tmp/mismatch.yaml
  timeout -k 10 150 $P/kubelet --config=/tmp/mismatch.yaml >/tmp/mismatch.log 2>&1
  fact mismatch "rc=$? config=$(grep '^cgroupDriver' /tmp/mismatch.yaml | tr -d ' ')"
  fact mismatch-message "$(grep -m1 '^kubelet: ' /tmp/mismatch.log)"
  fact mismatch-log "$(head -12 /tmp/mismatch.log | oneline) ... $(tail -8 /tmp/mismatch.log | oneline)"
fi

# logind lets a delay lock hold a shutdown this long (the agent needs its grace periods: 15 s + 10 s).
mkdir -p /etc/systemd/logind.conf.d
printf '[Login]\nInhibitDelayMaxSec=40\n' >/etc/systemd/logind.conf.d/kubelet.conf
systemctl restart systemd-logind

# As a user: the config first (install keeps a config it did not write), then install, then enable.
mkdir -p /etc/kubernetes
cp $P/kubelet.yaml /etc/kubernetes/kubelet.yaml
$P/kubelet install >/tmp/install.log 2>&1
fact install "rc=$? unit=$(test -f /etc/systemd/system/kubelet.service && echo yes) binary=$(test -x /usr/bin/kubelet && echo yes)"
cp $P/manifests/*.yaml /etc/kubernetes/manifests/
systemctl enable --now kubelet 2>&1
fact kubelet-active "$(systemctl is-active kubelet) enabled=$(systemctl is-enabled kubelet) t=$(elapsed)"

# The agent serves its read-only port within seconds of starting (about 20 s under TCG on a busy host);
# when it dies or does not serve it, the run stops here with the diagnostics (not after every later wait).
if wait_for 120 agent_up_or_died && agent_up; then fact agent-up "yes t=$(elapsed)"; else
  fact agent-up "no t=$(elapsed) active=$(systemctl is-active kubelet) NRestarts=$(systemctl show kubelet -p NRestarts --value)"
  give_up "the agent did not serve its read-only port"
fi
if wait_for 300 all_running; then fact pods-running "yes t=$(elapsed)"; else
  fact pods-running "no t=$(elapsed)"
  fact pods "$(pods_json | jq -c '[.items[] | {name: .metadata.name, phase: .status.phase, state: .status.containerStatuses}]')"
  give_up "the static pods did not run"
fi
fact pods "$(pods_json | jq -c '[.items[] | {name: .metadata.name, uid: .metadata.uid, qos: .status.qosClass, state: (.status.containerStatuses[0].state | keys[0])}]')"

# The slices and their files, read in /sys/fs/cgroup; the unit properties as systemd shows them.
fact tree "$(cd /sys/fs/cgroup && find kubepods.slice -maxdepth 3 -type d -name '*.slice' | sort | tr '\n' ' ')"
for p in guaranteed burstable besteffort; do
  uid=$(pod $p '.metadata.uid')
  slice=$(find /sys/fs/cgroup/kubepods.slice -maxdepth 2 -type d -name "*-pod${uid//-/_}.slice" | head -1)
  unit=$(basename "$slice")
  files=""
  for f in cpu.weight cpu.max memory.max memory.min pids.max; do files="$files $f=$(tr ' ' '_' <"$slice/$f")"; done
  fact "slice-$p" "path=${slice#/sys/fs/cgroup} $files"
  fact "unit-$p" "$(systemctl show "$unit" -p ActiveState -p Wants -p CPUWeight -p CPUQuotaPerSecUSec -p MemoryMax -p TasksMax -p DefaultDependencies | tr '\n' ' ')"
  fact "scopes-$p" "$(find "$slice" -mindepth 1 -maxdepth 1 -type d -name '*.scope' -printf '%f ' | sed 's/cri-containerd-[0-9a-f]*/cri-containerd-ID/g')"
  # The app container's own scope (the sandbox's pause has another): MemoryQoS's memory.min / memory.high and
  # memory.oom.group (singleProcessOOMKill unset) from the CRI.
  cid=$(pod $p '.status.containerStatuses[0].containerID' | sed 's|^containerd://||')
  scope="$slice/cri-containerd-$cid.scope"
  fact "container-$p" "exists=$([ -d "$scope" ] && echo yes || echo no) memory.min=$(cat "$scope/memory.min" 2>/dev/null) memory.high=$(cat "$scope/memory.high" 2>/dev/null) memory.max=$(cat "$scope/memory.max" 2>/dev/null) memory.oom.group=$(cat "$scope/memory.oom.group" 2>/dev/null)"
done
# MemoryQoS on the QoS levels: kubepods-burstable.slice = the Burstable pods' requests, kubepods.slice = Guaranteed's + those.
fact memory-qos "kubepods=$(cat /sys/fs/cgroup/kubepods.slice/memory.min) burstable=$(cat /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/memory.min) besteffort=$(cat /sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/memory.min) oom_phase=$(pod oom '.status.phase')"
# enforceNodeAllocatable system-reserved-compressible and kube-reserved: the files and what systemd holds.
reserved_files() { local d=/sys/fs/cgroup/$1; echo "$1:cpu.weight=$(cat $d/cpu.weight) $1:memory.max=$(cat $d/memory.max) $1:memory.min=$(cat $d/memory.min) $1:pids.max=$(cat $d/pids.max)"; }
fact reserved "$(reserved_files system.slice) $(reserved_files kubereserved.slice)"
fact reserved-units "system.slice:$(systemctl show system.slice -p CPUWeight --value) kubereserved.slice:$(systemctl show kubereserved.slice -p CPUWeight -p MemoryMax -p TasksMax --value | tr '\n' ',')"
fact reserved-journal "$(journalctl -u kubelet --no-pager -o cat | grep 'enforced reserved limits' | head -2 | oneline)"
fact qos-slices "burstable=$(cat /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/cpu.weight) besteffort=$(cat /sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/cpu.weight)"

# Pod-level resources: a static pod Guaranteed by spec.resources alone is added; each running container's
# oom_score_adj as runc set it (containerd 2.x here does not restrict it, and runs as root with
# CAP_SYS_RESOURCE, unlike the project's hosts where containerd must clamp negative values).
podlevel_facts() {
  local p uid cid scope v out=""
  cp $P/podlevel/podlevel.yaml /etc/kubernetes/manifests/
  if ! wait_for 120 running podlevel; then fact podlevel "running=no t=$(elapsed) $(pod podlevel '.status | tostring' | oneline)"; return; fi
  uid=$(pod podlevel '.metadata.uid')
  fact podlevel "running=yes qos=$(pod podlevel '.status.qosClass') uid=$uid path=$(find /sys/fs/cgroup/kubepods.slice -maxdepth 2 -type d -name "*-pod${uid//-/_}.slice" | head -1 | sed 's|^/sys/fs/cgroup||')"
  for p in podlevel guaranteed burstable besteffort; do
    cid=$(pod $p '.status.containerStatuses[0].containerID' | sed 's|^containerd://||')
    scope=$(find /sys/fs/cgroup/kubepods.slice -type d -name "cri-containerd-$cid.scope" | head -1)
    v=$(cat "/proc/$(head -1 "$scope/cgroup.procs")/oom_score_adj" 2>&1)
    v=${v//$'\n'/_}
    out="$out $p=${v// /_}"
  done
  fact oom-score-adj "$out"
}

# containerd 2.x: the OOM kill and pod-level resources too, then power off (the rest is the full run's, on containerd 1.6).
if [ "$MODE" = containerd2 ]; then
  fact journal-driver "$(journalctl -u kubelet --no-pager -o cat | grep -m1 'cgroup driver')"
  oom_facts
  podlevel_facts
  fact done "t=$(elapsed)"
  systemctl poweroff
  exit 0
fi

# What one busctl call to systemd costs here (the systemd driver makes about three per pod start).
t=$(date +%s%N)
for i in 1 2 3 4 5 6 7 8 9 10; do busctl --system call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager GetUnit s kubepods.slice >/dev/null; done
fact busctl-ms "$(( ($(date +%s%N) - t) / 10000000 ))"

# /stats/summary against the v2 files, and PSI (KubeletPSI) under a load this script makes: four busy loops in the
# burstable pod's container (cpu.max 1.5 CPUs on this 2-vCPU node) for 24 s. During the load the summary's pressure
# must grow; after it, with the pod idle (its counters still), the summary and the files are read back to back.
stats_check() {
  local uid slice cid scope load
  summary() { curl -sfk --max-time 20 https://127.0.0.1:10250/stats/summary; }
  uid=$(pod burstable '.metadata.uid')
  slice=$(find /sys/fs/cgroup/kubepods.slice -maxdepth 2 -type d -name "*-pod${uid//-/_}.slice" | head -1)
  cid=$(pod burstable '.status.containerStatuses[0].containerID' | sed 's|^containerd://||')
  scope="$slice/cri-containerd-$cid.scope"
  pick() { jq -c --arg uid "$uid" '{node: {cpu: .node.cpu, memory: .node.memory, io: .node.io, rlimit: .node.rlimit}, pod: (.pods[] | select(.podRef.uid == $uid) | {cpu, memory, io, process_stats, containers: [.containers[] | {name, cpu, memory, io}]})}'; }
  cg_files() { echo "$1.usage_usec=$(awk '/^usage_usec/ {print $2}' "$2/cpu.stat") $1.memory.current=$(cat "$2/memory.current") $1.inactive_file=$(awk '/^inactive_file / {print $2}' "$2/memory.stat") $1.cpu_some_total=$(sed -n 's/^some .*total=//p' "$2/cpu.pressure")"; }
  node_files() { echo "node.busy_jiffies=$(awk '/^cpu / {print $2+$3+$4+$7+$8+$9}' /proc/stat) node.anon=$(awk '/^anon / {print $2}' /sys/fs/cgroup/memory.stat) node.file=$(awk '/^file / {print $2}' /sys/fs/cgroup/memory.stat) node.inactive_file=$(awk '/^inactive_file / {print $2}' /sys/fs/cgroup/memory.stat) node.cpu_some_total=$(sed -n 's/^some .*total=//p' /proc/pressure/cpu) node.pressure_files=$(ls /proc/pressure | tr '\n' ',') pod.pressure_files=$(cd "$slice" && ls -d *.pressure | tr '\n' ',')"; }
  fact psi-before "$(summary | pick)"
  ctr -n k8s.io tasks exec --exec-id bunlet-psi-load "$cid" sh -c 'for i in 1 2 3 4; do timeout 24 sh -c "while :; do :; done" & done; wait' >/dev/null 2>&1 &
  load=$!
  sleep 16 # the agent's summary (10 s period) has a pass under the load
  fact psi-during "$(summary | pick)"
  fact psi-during-files "$(cg_files pod "$slice") $(cg_files ctr "$scope")"
  wait $load
  sleep 12 # the load is over: a pass with the pod idle
  fact stats-files-before "$(cg_files pod "$slice") $(cg_files ctr "$scope") $(node_files)"
  fact stats-summary "$(summary | pick)"
  fact stats-files-after "$(cg_files pod "$slice") $(cg_files ctr "$scope") $(node_files)"
}
stats_check

# OOM: the 32Mi container over its limit.
oom_facts

# Logs: the agent's own lines are in the journal.
fact journal "lines=$(journalctl -u kubelet --no-pager -o cat | wc -l) driver=$(journalctl -u kubelet --no-pager -o cat | grep -c 'cgroup driver')"
fact journal-driver "$(journalctl -u kubelet --no-pager -o cat | grep -m1 'cgroup driver')"

# systemctl restart kubelet: no container restarted.
before=$(container_ids)
systemctl restart kubelet
sleep 5
wait_for 180 sh -c 'curl -sf http://127.0.0.1:10255/pods >/dev/null'
sleep 15
after=$(container_ids)
fact restart "same=$([ "$before" = "$after" ] && echo yes || echo no) before=$before after=$after active=$(systemctl is-active kubelet)"

# systemctl stop kubelet: the pods keep running.
systemctl stop kubelet
sleep 3
fact stop "kubelet=$(systemctl is-active kubelet) running_tasks=$(ctr -n k8s.io tasks ls | grep -c RUNNING) slices=$(find /sys/fs/cgroup/kubepods.slice -name '*-pod*.slice' | wc -l)"
systemctl start kubelet
wait_for 180 all_running
fact restarted "kubelet=$(systemctl is-active kubelet) same=$([ "$before" = "$(container_ids)" ] && echo yes || echo no)"

# Eviction under real memory pressure. The agent never evicts static pods (upstream: they are
# critical), so this needs API pods: with a control plane on the host (payload/cluster), the agent
# is restarted in cluster mode (its containers keep running), and run.sh creates two pods through
# the API. kubelet.yaml's evictionHard memory.available is the threshold; the agent reads the node's
# memory from the root cgroup's memory.stat (cgroup v2). The BestEffort victim holds 300 MiB, then
# the Burstable hog fills a tmpfs (more than the victim holds, within its request) until what the
# agent reports available (its /stats/summary) is 100 MiB under the threshold. The victim must be
# evicted first, and its eviction alone ends the pressure: with the hog's fill still in place,
# nothing else may be evicted in the passes that follow (nor after this script frees the fill).
# (A victim holding less than the node is short would leave the pressure on, and upstream's
# eviction manager, as this agent's, then evicts the hog at the next pass.)
eviction_check() {
  local port threshold before fill t_fill victim_mib
  port=$(cat $P/cluster/port)
  api() { local path=$1; shift; curl -sf --max-time 20 --cacert $P/cluster/ca.crt --cert $P/cluster/admin.crt --key $P/cluster/admin.key "https://kubernetes:$port$path" "$@"; }
  create() { sed -e "s/FILL_MIB/${2:-0}/" -e "s/REQUEST_MIB/${3:-0}/" "$1" | api /api/v1/namespaces/default/pods -X POST -H 'Content-Type: application/json' --data-binary @- >/dev/null; }
  node_available_mib() { curl -sfk --max-time 10 https://127.0.0.1:10250/stats/summary | jq -r '.node.memory.availableBytes / 1048576 | floor'; }
  above_threshold() { [ "$(node_available_mib)" -gt "$threshold" ]; }
  evicted() { [ "$(pod "$1" '"\(.status.phase)/\(.status.reason)"')" = "Failed/Evicted" ]; }
  echo "10.0.2.2 kubernetes" >>/etc/hosts
  echo "KUBELET_ARGS=--kubeconfig=$P/cluster/kubeconfig" >/etc/default/kubelet
  # PID pressure (after the memory check): evictionHard pid.available 300 tasks below what is available now, as
  # the agent reports it (rlimit: maxpid - curproc); the forker pod's 600 processes take the node under it.
  rlimit=$(curl -sfk --max-time 10 https://127.0.0.1:10250/stats/summary | jq -r '.node.rlimit | "\(.maxpid) \(.curproc)"')
  pid_threshold=$(( ${rlimit% *} - ${rlimit#* } - 300 ))
  sed -i "s/^  memory.available: \([0-9]*Mi\)$/  memory.available: \1\n  pid.available: \"$pid_threshold\"/" /etc/kubernetes/kubelet.yaml
  fact pid-setup "maxpid=${rlimit% *} curproc=${rlimit#* } threshold=$pid_threshold pid_max=$(cat /proc/sys/kernel/pid_max) threads_max=$(cat /proc/sys/kernel/threads-max) config=$(grep -c '^  pid.available: ' /etc/kubernetes/kubelet.yaml)"
  systemctl restart kubelet
  if ! wait_for 180 api /api/v1/nodes/bunlet-node; then
    fact eviction-node "no t=$(elapsed) api=$(api /healthz 2>&1 || echo unreachable)"
    diagnose
    return 0
  fi
  fact eviction-node "registered t=$(elapsed)"
  threshold=$(sed -n 's/^ *memory.available: *\([0-9]*\)Mi$/\1/p' /etc/kubernetes/kubelet.yaml)
  create $P/eviction/victim.json
  wait_for 120 running victim
  sleep 12 # the victim's stats are in the agent's summary
  victim_mib=$(curl -sfk --max-time 10 https://127.0.0.1:10250/stats/summary | jq -r '[.pods[] | select(.podRef.name == "victim-0") | .memory.workingSetBytes // 0] | max // 0 | ./1048576 | floor')
  # What the system itself uses on a real node (daemons, caches): 200 MiB of the tmpfs, written by this
  # script (charged to its own service's cgroup), so that the hog can request what it holds: allocatable is
  # capacity minus the reserved memory and the threshold.
  mkdir -p /var/lib/bunlet-vm/fill
  mount -t tmpfs -o size=1900m bunlet-fill /var/lib/bunlet-vm/fill
  dd if=/dev/zero of=/var/lib/bunlet-vm/fill/system bs=1M count=200 2>/dev/null
  sleep 12 # the agent's summary has it
  before=$(node_available_mib)
  if [ -z "$before" ] || [ "$before" -le "$threshold" ]; then fact eviction-pressure "threshold_mib=$threshold available_before_mib=$before (no room to add pressure)"; return 0; fi
  fill=$(( before - threshold + 100 ))
  create $P/eviction/hog.json $fill $(( fill + 64 ))
  t_fill=$(elapsed)
  wait_for 240 evicted victim
  fact eviction-victim "$(pod victim '"phase=\(.status.phase) reason=\(.status.reason)"') t=$(( $(elapsed) - t_fill )) message=$(pod victim '.status.message' | tr ' ' '_')"
  sleep 25 # the fill still in place: fresh passes see the victim's memory back, and evict nothing else
  fact eviction-pressure "threshold_mib=$threshold available_before_mib=$before system_mib=200 victim_mib=$victim_mib short_mib=100 fill_mib=$fill hog=$(pod hog '"\(.status.phase)/\(.status.reason // "-")"') available_mib=$(node_available_mib) hog_memory_current=$(cat /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$(pod hog '.metadata.uid | gsub("-"; "_")').slice/memory.current 2>/dev/null) psi_some=$(awk '/^some/ {print $2}' /proc/pressure/memory 2>/dev/null)"
  rm -f /var/lib/bunlet-vm/fill/data /var/lib/bunlet-vm/fill/system
  wait_for 60 above_threshold
  sleep 20 # two more eviction passes: nothing else may be evicted now
  fact eviction-after "$(for p in hog besteffort burstable guaranteed; do printf '%s=%s ' $p "$(pod $p '"\(.status.phase)/\(.status.reason // "-")"')"; done) available_mib=$(node_available_mib)"
  fact evicted-pods "$(journalctl -u kubelet --no-pager -o cat | grep 'pod is evicted successfully' | grep -o 'pod=[^ ]*' | tr '\n' ' ')"
  fact eviction-reclaim "$(journalctl -u kubelet --no-pager -o cat | grep -m1 'attempting to reclaim')"
  api /api/v1/namespaces/default/pods/hog-0 -X DELETE >/dev/null
  api /api/v1/namespaces/default/pods/victim-0 -X DELETE >/dev/null
  pid_check
}

# The forker (BestEffort, API) starts 600 sleeping processes: pid.available (pid_max or threads-max, whichever is
# smaller, minus the kernel's task count) goes under the threshold set above; the agent reports PIDPressure on the
# Node and evicts the pod with the most processes. Sampled every 3 s: the agent's rlimit, the Node's condition.
pid_check() {
  local end min_avail=999999999 max_procs=0 condition=False cond avail procs
  wait_for 60 sh -c "! curl -sf http://127.0.0.1:10255/pods | jq -e '.items[] | select(.metadata.name == \"hog-0\" or .metadata.name == \"victim-0\")' >/dev/null"
  sed "s/FORK_COUNT/600/" $P/eviction/forker.json | api /api/v1/namespaces/default/pods -X POST -H 'Content-Type: application/json' --data-binary @- >/dev/null
  local t_start
  t_start=$(elapsed)
  end=$(( $(date +%s) + 240 ))
  while [ "$(date +%s)" -lt "$end" ]; do
    s=$(curl -sfk --max-time 10 https://127.0.0.1:10250/stats/summary)
    avail=$(echo "$s" | jq -r '.node.rlimit | .maxpid - .curproc')
    procs=$(echo "$s" | jq -r '[.pods[] | select(.podRef.name == "forker-0") | .process_stats.process_count // 0] | max // 0')
    cond=$(api /api/v1/nodes/bunlet-node | jq -r '.status.conditions[] | select(.type == "PIDPressure") | .status')
    [ -n "$avail" ] && [ "$avail" != null ] && [ "$avail" -lt "$min_avail" ] && min_avail=$avail
    [ -n "$procs" ] && [ "$procs" -gt "$max_procs" ] && max_procs=$procs
    [ "$cond" = True ] && condition=True
    evicted forker && break
    sleep 3
  done
  fact pid-victim "$(pod forker '"phase=\(.status.phase) reason=\(.status.reason)"') t=$(( $(elapsed) - t_start )) message=$(pod forker '.status.message' | tr ' ' '_')"
  # The condition goes to the API server with the next status pass (nodeStatusUpdateFrequency, 10 s, as upstream: no
  # pass is made for it), which a quick eviction may precede; it stays True for evictionPressureTransitionPeriod.
  local after=False
  for _ in $(seq 1 10); do
    [ "$(api /api/v1/nodes/bunlet-node | jq -r '.status.conditions[] | select(.type == "PIDPressure") | .status')" = True ] && { after=True; break; }
    sleep 2
  done
  fact pid-pressure "threshold=$pid_threshold min_available=$min_avail max_forker_procs=$max_procs condition=$condition after=$after"
  fact pid-reclaim "$(journalctl -u kubelet --no-pager -o cat | grep 'attempting to reclaim' | grep -m1 'pids')"
  fact pid-evicted "$(journalctl -u kubelet --no-pager -o cat | grep 'pod is evicted successfully' | grep -o 'pod=[^ ]*' | tr '\n' ' ')"
  fact pid-others "$(for p in besteffort burstable guaranteed; do printf '%s=%s ' $p "$(pod $p '"\(.status.phase)/\(.status.reason // "-")"')"; done)"
  api /api/v1/namespaces/default/pods/forker-0 -X DELETE >/dev/null
}
[ -d $P/cluster ] && eviction_check

# The shutdown: the agent holds logind's delay lock; a unit ordered before
# kubelet.service is stopped after it, once the pods have stopped, and prints
# which pod's container got TERM when (each appends to /var/lib/bunlet-vm/stopped).
wait_for 60 sh -c 'systemd-inhibit --list --no-pager | grep -q kubelet'
fact inhibitor "$(systemd-inhibit --list --no-pager | grep kubelet | tr -s ' ')"
rm -f /var/lib/bunlet-vm/stopped
cat >/etc/systemd/system/bunlet-vm-report.service <<'EOF'
[Unit]
Description=bunlet test node: report the pods' stop order at shutdown
Before=kubelet.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
ExecStop=/bin/sh -c 'echo "BUNLET-FACT shutdown-order $(tr "\\n" " " </var/lib/bunlet-vm/stopped 2>/dev/null) poweroff-at=$(cat /run/bunlet-poweroff-at)" >/dev/ttyS0'
EOF
systemctl daemon-reload
systemctl start bunlet-vm-report.service
fact done "t=$(elapsed)"
date +%s >/run/bunlet-poweroff-at
systemctl poweroff
