/**
 * CPU sets as the kernel writes them in cpuset.cpus and sysfs lists
 * ("0-3,8,10-11"), and as upstream's k8s.io/utils/cpuset formats them: a
 * sorted set of CPU ids, ranges for consecutive runs.
 */
export type CpuSet = readonly number[];

export class CpuSetParseError extends Error {
  constructor(
    readonly text: string,
    why: string,
  ) {
    super(`invalid CPU list ${JSON.stringify(text)}: ${why}`);
    this.name = "CpuSetParseError";
  }
}

const sorted = (cpus: Iterable<number>): CpuSet => [...new Set(cpus)].sort((a, b) => a - b);

export const cpuSet = (...cpus: number[]): CpuSet => sorted(cpus);

export function parseCpuSet(text: string): CpuSet {
  const out: number[] = [];
  const trimmed = text.trim();
  if (trimmed === "") return [];
  for (const part of trimmed.split(",")) {
    const m = /^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$/.exec(part);
    if (!m) throw new CpuSetParseError(text, `${JSON.stringify(part)} is not a CPU or a range`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo) throw new CpuSetParseError(text, `range ${part} ends before it starts`);
    for (let c = lo; c <= hi; c++) out.push(c);
  }
  return sorted(out);
}

export function formatCpuSet(set: CpuSet): string {
  const s = sorted(set);
  const parts: string[] = [];
  for (let i = 0; i < s.length; ) {
    let j = i;
    while (j + 1 < s.length && s[j + 1] === s[j]! + 1) j++;
    parts.push(j === i ? String(s[i]) : `${s[i]}-${s[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

export const union = (...sets: CpuSet[]): CpuSet => sorted(sets.flat());
export const difference = (a: CpuSet, b: CpuSet): CpuSet => a.filter((c) => !b.includes(c));
export const intersection = (a: CpuSet, b: CpuSet): CpuSet => a.filter((c) => b.includes(c));
export const sameSet = (a: CpuSet, b: CpuSet): boolean => formatCpuSet(a) === formatCpuSet(b);
