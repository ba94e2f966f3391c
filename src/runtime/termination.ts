/**
 * Termination messages, as upstream (kuberuntime_container.go makeMounts and
 * getTerminationMessage): every container start gets a fresh empty file
 * `<rootDir>/pods/<uid>/containers/<container>/<8 random hex>` mounted at its
 * terminationMessagePath; once the container exited, at most 4096 bytes of
 * it are the terminated state's message. With FallbackToLogsOnError, a
 * failed container that wrote nothing there gets the tail of its log (80
 * lines, at most 2048 bytes) instead.
 *
 * The host path is found again through the CRI's record of the container's
 * mounts (as upstream does), so an agent restart reads the same file.
 */
import { chmodSync, closeSync, mkdirSync, openSync, readSync, fstatSync, writeFileSync } from "node:fs";
import { posix } from "node:path";
import { Mount } from "../cri/index.ts";
import type { PodDirs } from "../pods/dirs.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import { parseCriLine } from "../logs/cri-line.ts";
import { podUid } from "../pods/identity.ts";

export const DEFAULT_TERMINATION_MESSAGE_PATH = "/dev/termination-log";
/** Upstream MaxContainerTerminationMessageLength. */
export const MAX_TERMINATION_MESSAGE_BYTES = 4096;
/** Upstream MaxContainerTerminationMessageLogLines and ...LogLength. */
export const MAX_LOG_MESSAGE_LINES = 80;
export const MAX_LOG_MESSAGE_BYTES = 2048;
/** How much of the end of a log file is read to find its last lines. */
const LOG_TAIL_WINDOW_BYTES = 256 * 1024;

export const terminationMessagePathOf = (spec: ContainerSpec): string => spec.terminationMessagePath || DEFAULT_TERMINATION_MESSAGE_PATH;

/** Eight hex digits from a 32-bit random number, as upstream's makeUID. */
export const randomFileName = (random: () => number): string => (Math.floor(random() * 0x1_0000_0000) >>> 0).toString(16).padStart(8, "0");

/**
 * Creates the empty termination message file of one container start
 * (world-writable, so a container running as any user can write it) and
 * returns its mount.
 */
export function terminationMessageMount(dirs: PodDirs, pod: Pod, spec: ContainerSpec, random: () => number): Mount {
  const dir = dirs.container(podUid(pod), spec.name);
  mkdirSync(dir, { recursive: true, mode: 0o750 });
  const hostPath = posix.join(dir, randomFileName(random));
  writeFileSync(hostPath, "", { flag: "w" });
  chmodSync(hostPath, 0o666); // the umask must not decide who may write it
  return Mount.create({ containerPath: terminationMessagePathOf(spec), hostPath });
}

/** Reads at most `max` bytes from the start of a file; undefined when it does not exist. */
function readAtMost(path: string, max: number): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  try {
    const buf = Buffer.alloc(max);
    const n = readSync(fd, buf, 0, max, 0);
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/**
 * The last `MAX_LOG_MESSAGE_LINES` lines of a CRI log file, stdout and
 * stderr alike, cut to their last `MAX_LOG_MESSAGE_BYTES` bytes (upstream
 * readLastStringFromContainerLogs keeps them in a circular buffer).
 */
export function lastLogLines(path: string): string {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw err;
  }
  let text: string;
  let partialFirst: boolean;
  try {
    const size = fstatSync(fd).size;
    const start = Math.max(0, size - LOG_TAIL_WINDOW_BYTES);
    const buf = Buffer.alloc(size - start);
    const n = readSync(fd, buf, 0, buf.length, start);
    text = buf.subarray(0, n).toString("utf8");
    partialFirst = start > 0;
  } finally {
    closeSync(fd);
  }
  const raw = text.split("\n");
  if (partialFirst) raw.shift(); // begins mid-line
  const lines: string[] = [];
  let pending = "";
  for (const l of raw) {
    const entry = parseCriLine(l);
    if (!entry) continue;
    pending += entry.text;
    if (entry.partial) continue;
    lines.push(pending + "\n");
    pending = "";
  }
  // The output's last line had no newline (containerd tags it `P` at exit): it is a line too, as it is.
  if (pending) lines.push(pending);
  const joined = Buffer.from(lines.slice(-MAX_LOG_MESSAGE_LINES).join(""));
  return joined.subarray(Math.max(0, joined.length - MAX_LOG_MESSAGE_BYTES)).toString("utf8");
}

export interface ExitedContainerFacts {
  exitCode: number;
  /** The runtime's message (e.g. why the start failed); the termination message is appended to it. */
  runtimeMessage: string;
  mounts: readonly { containerPath: string; hostPath: string }[];
  terminationMessagePath: string;
  terminationMessagePolicy: string;
  logPath: string;
}

/** Upstream getTerminationMessage plus the log fallback: the message of an exited container. */
export function terminationMessage(c: ExitedContainerFacts): string {
  const fallbackToLogs = c.terminationMessagePolicy === "FallbackToLogsOnError" && c.exitCode !== 0;
  let message = "";
  let checkLogs = fallbackToLogs;
  const mount = c.terminationMessagePath ? c.mounts.find((m) => m.containerPath === c.terminationMessagePath) : undefined;
  if (mount) {
    try {
      const data = readAtMost(mount.hostPath, MAX_TERMINATION_MESSAGE_BYTES);
      message = data ?? "";
      checkLogs = fallbackToLogs && !data;
    } catch (err) {
      message = `Error on reading termination log ${mount.hostPath}: ${(err as Error).message}`;
      checkLogs = false;
    }
  }
  if (checkLogs && c.logPath) {
    try {
      message = lastLogLines(c.logPath);
    } catch (err) {
      message = `Error on reading termination message from logs: ${(err as Error).message}`;
    }
  }
  if (!message) return c.runtimeMessage;
  return c.runtimeMessage ? `${c.runtimeMessage}: ${message}` : message;
}
