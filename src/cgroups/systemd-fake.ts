/**
 * A stand-in for systemd's unit API in unit tests: records every call, keeps
 * which transient units are loaded, and lets the test decide what a started
 * or stopped slice does to a (fake) cgroupfs through the two hooks.
 */
import type { SystemdUnits, UnitProperty } from "./systemd-units.ts";

export type UnitCall = { method: "StartTransientUnit" | "SetUnitProperties" | "StopUnit"; unit: string; properties: UnitProperty[] };

export class FakeSystemdUnits implements SystemdUnits {
  readonly calls: UnitCall[] = [];
  readonly loaded = new Map<string, UnitProperty[]>();
  constructor(
    private readonly hooks: {
      /** systemd creates the slice's cgroup (and enables controllers in its parent). */
      onStart?: (unit: string) => Promise<void> | void;
      /** systemd removes the slice's cgroup. */
      onStop?: (unit: string) => Promise<void> | void;
    } = {},
  ) {}

  async startUnit(unit: string, properties: UnitProperty[]): Promise<"started" | "exists"> {
    this.calls.push({ method: "StartTransientUnit", unit, properties });
    if (this.loaded.has(unit)) return "exists";
    this.loaded.set(unit, [...properties]);
    await this.hooks.onStart?.(unit);
    return "started";
  }

  async setUnitProperties(unit: string, properties: UnitProperty[]): Promise<void> {
    this.calls.push({ method: "SetUnitProperties", unit, properties });
    const have = this.loaded.get(unit);
    if (!have) throw new Error(`Unit ${unit} not loaded.`);
    for (const p of properties) {
      const i = have.findIndex((h) => h.name === p.name);
      if (i >= 0) have[i] = p;
      else have.push(p);
    }
  }

  async stopUnit(unit: string): Promise<void> {
    this.calls.push({ method: "StopUnit", unit, properties: [] });
    if (!this.loaded.delete(unit)) return;
    await this.hooks.onStop?.(unit);
  }

  /** The value of one property of a loaded unit, as busctl would print it. */
  property(unit: string, name: string): string | undefined {
    const p = this.loaded.get(unit)?.find((q) => q.name === name);
    return p === undefined ? undefined : Array.isArray(p.value) ? p.value.join(" ") : String(p.value);
  }
}
