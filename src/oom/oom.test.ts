import { describe, expect, test } from "bun:test";
import type { ObjectRef } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { OomParser, OomWatcher, parseKmsgRecord, podUidOfCgroup, type KernelLog } from "./index.ts";

// Records as this machine's kernel (6.18) wrote them for a container over its pod's limit.
const POD = "125b2684-b2fd-4c73-b16f-bc90f75b51b1";
const podCgroup = `/process_api/d852/bunlet-semantics-a45e43/kubepods/burstable/pod${POD}`;
const containerOom = [
  "4,10783,10901617933,-;dd invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=999",
  "4,10784,10901617944,-;CPU: 1 UID: 0 PID: 28645 Comm: dd Not tainted 6.18.44-fc-v669 #1 PREEMPT(none) ",
  "6,10874,10901618246,-;[  28645]     0 28645    16951     4228     3936      292         0    73728        0           999 dd",
  `6,10875,10901618249,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=d565ae,mems_allowed=0,oom_memcg=${podCgroup},task_memcg=${podCgroup}/d565ae9a,task=dd,pid=28645,uid=0`,
  "3,10876,10901618268,-;Memory cgroup out of memory: Killed process 28645 (dd) total-vm:67804kB, anon-rss:15744kB, file-rss:1168kB, shmem-rss:0kB, UID:0 pgtables:72kB oom_score_adj:999\n SUBSYSTEM=memory",
];
const systemOom = [
  "4,200,5000000,-;stress invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
  "6,201,5000010,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/system.slice/stress.service,task=stress,pid=4242,uid=0",
  "3,202,5000020,-;Out of memory: Killed process 4242 (stress) total-vm:2000000kB, anon-rss:1900000kB",
];
const legacySystemOom = [
  "4,300,6000000,-;java invoked oom-killer: gfp_mask=0x24201ca, order=0, oom_score_adj=0",
  "3,301,6000010,-;Out of memory: Kill process 99 (java) score 900 or sacrifice child",
  "3,302,6000020,-;Killed process 99 (java) total-vm:100kB, anon-rss:50kB, file-rss:0kB",
];

class FakeKernelLog implements KernelLog {
  pending: string[] = [];
  closed = false;
  read() {
    const out = this.pending;
    this.pending = [];
    return out;
  }
  close() {
    this.closed = true;
  }
}

describe("OOM watcher", () => {
  test("kmsg records parse; continuation lines are dropped", () => {
    expect(parseKmsgRecord(containerOom[4]!)).toEqual({
      priority: 3,
      seq: 10876,
      timestampUs: 10901618268,
      message: expect.stringMatching(/^Memory cgroup out of memory: Killed process 28645 \(dd\)/),
    });
    expect(parseKmsgRecord(containerOom[4]!)!.message).not.toContain("SUBSYSTEM");
    expect(parseKmsgRecord("no separator")).toBeUndefined();
  });

  test("the parser finds the task, pid and both cgroups in the modern and the legacy kernel format", () => {
    const parse = (lines: string[]) => {
      const p = new OomParser();
      return lines.map((l) => p.feed(parseKmsgRecord(l)!)).filter((x) => x !== undefined);
    };
    expect(parse(containerOom)).toEqual([
      { pid: 28645, processName: "dd", timestampUs: 10901618268, taskCgroup: `${podCgroup}/d565ae9a`, oomCgroup: podCgroup, constraint: "CONSTRAINT_MEMCG" },
    ]);
    // A global OOM names no oom_memcg: the limit hit is the root's.
    expect(parse(systemOom)).toMatchObject([{ pid: 4242, processName: "stress", taskCgroup: "/", oomCgroup: "/" }]);
    expect(parse(legacySystemOom)).toMatchObject([{ pid: 99, processName: "java", oomCgroup: "/" }]);
    expect(parse(containerOom.slice(1))).toEqual([]); // no start line: not an OOM report
  });

  test("pod UIDs from cgroupfs and systemd pod cgroup names", () => {
    expect(podUidOfCgroup(`${podCgroup}/d565ae9a`)).toBe(POD);
    expect(podUidOfCgroup(`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${POD.replaceAll("-", "_")}.slice/cri-containerd-abc.scope`)).toBe(POD);
    expect(podUidOfCgroup("/system.slice/stress.service")).toBeUndefined();
  });

  test("a system OOM is a SystemOOM Warning on the Node; a kill in a pod this node runs is OOMKilling on the pod; others are not reported", () => {
    const kernelLog = new FakeKernelLog();
    const clock = new FakeClock();
    const events: { ref: ObjectRef; type: string; reason: string; message: string }[] = [];
    const known: ObjectRef = { kind: "Pod", name: "hog", namespace: "default", uid: POD };
    const watcher = new OomWatcher({
      kernelLog,
      recorder: { event: (ref, type, reason, message) => void events.push({ ref, type, reason, message }) },
      nodeName: "n1",
      pods: { reportedPod: (uid) => (uid === POD ? ({ metadata: { name: "hog", namespace: "default", uid: POD }, spec: { containers: [] } } as Pod) : undefined) },
      clock,
      logger: memoryLogger().logger,
    }).start();
    kernelLog.pending.push(...systemOom, ...containerOom);
    clock.advance(1000);
    kernelLog.pending.push(...containerOom.map((l) => l.replaceAll(POD, "00000000-0000-0000-0000-000000000000")));
    clock.advance(1000);
    expect(events).toEqual([
      { ref: { kind: "Node", name: "n1", uid: "n1" }, type: "Warning", reason: "SystemOOM", message: "System OOM encountered, victim process: stress, pid: 4242" },
      { ref: known, type: "Warning", reason: "OOMKilling", message: "Memory cgroup out of memory: Killed process 28645 (dd)" },
    ]);
    watcher[Symbol.dispose]();
    expect(kernelLog.closed).toBe(true);
    kernelLog.pending.push(...systemOom);
    clock.advance(5000);
    expect(events).toHaveLength(2);
  });
});
