/**
 * The three calls of systemd's D-Bus API (org.freedesktop.systemd1.Manager)
 * that the systemd cgroup driver needs: StartTransientUnit, SetUnitProperties
 * and StopUnit, as upstream's libcontainer systemd manager makes them.
 *
 * Made with `busctl call` (systemd's own client, present wherever systemd
 * is PID 1), as src/shutdown/logind.ts does: the calls happen a few times per
 * pod start and stop, never on a hot path, and busctl brings the D-Bus
 * authentication, marshalling and error names that a hand-written client
 * would have to carry and keep right. Measured cost: see docs/cgroups.md.
 */
import { CgroupError } from "./errors.ts";

/** One unit property, typed as D-Bus wants it: s string, b boolean, t uint64, as string array. */
export type UnitProperty =
  | { name: string; type: "s"; value: string }
  | { name: string; type: "b"; value: boolean }
  | { name: string; type: "t"; value: bigint }
  | { name: string; type: "as"; value: string[] };

export interface SystemdUnits {
  /** StartTransientUnit(name, "replace", properties): "exists" when a unit of that name is loaded already. */
  startUnit(name: string, properties: UnitProperty[]): Promise<"started" | "exists">;
  /** SetUnitProperties(name, runtime=true, properties). */
  setUnitProperties(name: string, properties: UnitProperty[]): Promise<void>;
  /** StopUnit(name, "replace"); a unit that is not loaded is already stopped. */
  stopUnit(name: string): Promise<void>;
}

/** USEC_INFINITY / "infinity" of every uint64 resource property. */
export const UINT64_MAX = 2n ** 64n - 1n;

/** The busctl argument words of a(sv): the count, then name, signature, value(s) for each. */
export function propertyArgs(properties: UnitProperty[]): string[] {
  const out = [String(properties.length)];
  for (const p of properties) {
    out.push(p.name, p.type);
    if (p.type === "as") out.push(String(p.value.length), ...p.value);
    else out.push(String(p.value));
  }
  return out;
}

const DEST = ["org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager"];

export interface BusctlOptions {
  /** The busctl executable; "busctl" on PATH by default. */
  busctl?: string;
  /** A bus address (tests: a private bus); the system bus by default. */
  address?: string;
  timeoutMs?: number;
}

/** SystemdUnits over `busctl call`. */
export function busctlSystemdUnits(opts: BusctlOptions = {}): SystemdUnits {
  const bus = opts.address ? [`--address=${opts.address}`] : ["--system"];
  const timeout = `--timeout=${Math.max(1, Math.round((opts.timeoutMs ?? 30_000) / 1000))}`;
  async function call(op: string, unit: string, method: string, signature: string, args: string[]): Promise<{ ok: true } | { ok: false; message: string }> {
    // "--" ends the options: the root slice "-.slice" (Wants= of kubepods.slice) would be read as one.
    const argv = [opts.busctl ?? "busctl", ...bus, timeout, "--", "call", ...DEST, method, signature, ...args];
    let proc;
    try {
      proc = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    } catch (e) {
      throw new CgroupError("Unsupported", op, unit, `cannot run busctl to reach systemd (cgroupDriver: systemd needs systemd's busctl): ${(e as Error).message}`, { cause: e });
    }
    const [, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return code === 0 ? { ok: true } : { ok: false, message: err.trim() || `busctl exited ${code}` };
  }
  const fail = (op: string, unit: string, message: string): never => {
    throw new CgroupError("Io", op, unit, `systemd ${op} failed: ${message}`);
  };
  return {
    async startUnit(name, properties) {
      const r = await call("StartTransientUnit", name, "StartTransientUnit", "ssa(sv)a(sa(sv))", [name, "replace", ...propertyArgs(properties), "0"]);
      if (r.ok) return "started";
      if (/already exists|UnitExists/i.test(r.message)) return "exists";
      return fail("StartTransientUnit", name, r.message);
    },
    async setUnitProperties(name, properties) {
      const r = await call("SetUnitProperties", name, "SetUnitProperties", "sba(sv)", [name, "true", ...propertyArgs(properties)]);
      if (!r.ok) fail("SetUnitProperties", name, r.message);
    },
    async stopUnit(name) {
      const r = await call("StopUnit", name, "StopUnit", "ss", [name, "replace"]);
      if (!r.ok && !/not loaded|NoSuchUnit/i.test(r.message)) fail("StopUnit", name, r.message);
    },
  };
}
