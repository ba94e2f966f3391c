/**
 * Import boundaries between the folders of src/: each folder is a subsystem,
 * and no chain of imports may lead from a folder back to itself. A cycle
 * means two subsystems cannot be understood, tested or replaced apart; the
 * fix is to move the helper that closes it to the folder that owns it.
 * Generated code (cri/gen, images/containerd/gen) counts as its folder.
 * Test files may reach across (a test of one folder uses another's fake);
 * agent.ts and main.ts at the top wire everything and are not a folder.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir);

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) sourceFiles(path, out);
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

/** The folder under src/ a file belongs to, or undefined for the top-level wiring files. */
function folderOf(path: string): string | undefined {
  const parts = relative(SRC, path).split("/");
  return parts.length > 1 ? parts[0] : undefined;
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s[^;'"]*?from\s*["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)|^import\s*["'](\.{1,2}\/[^"']+)["']/gm;

/** Folder → folder it imports → the first file-level import that makes the edge. */
function folderGraph(files: readonly string[]): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of files) {
    const from = folderOf(file);
    if (from === undefined) continue;
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2] ?? match[3];
      if (spec === undefined) continue;
      const target = resolve(dirname(file), spec);
      const to = folderOf(target);
      if (to === undefined || to === from) continue;
      let edges = graph.get(from);
      if (edges === undefined) graph.set(from, (edges = new Map()));
      if (!edges.has(to)) edges.set(to, `${relative(SRC, file)} → ${relative(SRC, target)}`);
    }
  }
  return graph;
}

/** Every elementary cycle is too many to list; one shortest cycle through each folder that has one. */
function folderCycles(graph: Map<string, Map<string, string>>): string[][] {
  const cycles: string[][] = [];
  const seen = new Set<string>();
  for (const start of [...graph.keys()].sort()) {
    if (seen.has(start)) continue;
    // Breadth-first from start's neighbours back to start: the shortest cycle through start.
    const parent = new Map<string, string>();
    const queue = [...(graph.get(start)?.keys() ?? [])].sort();
    for (const n of queue) parent.set(n, start);
    let found = false;
    for (let i = 0; i < queue.length && !found; i++) {
      const node = queue[i]!;
      if (node === start) {
        found = true;
        break;
      }
      for (const next of [...(graph.get(node)?.keys() ?? [])].sort()) {
        if (parent.has(next)) continue;
        parent.set(next, node);
        queue.push(next);
      }
    }
    if (!parent.has(start)) continue;
    const cycle = [start];
    for (let at = parent.get(start)!; at !== start; at = parent.get(at)!) cycle.unshift(at);
    cycle.unshift(start);
    for (const f of cycle) seen.add(f);
    cycles.push(cycle);
  }
  return cycles;
}

function describeCycle(graph: Map<string, Map<string, string>>, cycle: string[]): string {
  const steps = cycle.slice(1).map((to, i) => `  ${cycle[i]} → ${to}  (${graph.get(cycle[i]!)!.get(to)})`);
  return `${cycle.join(" → ")}\n${steps.join("\n")}`;
}

describe("folder imports", () => {
  test("no cycle between the folders of src/", () => {
    const graph = folderGraph(sourceFiles(SRC));
    expect(graph.size).toBeGreaterThan(20);
    const cycles = folderCycles(graph).map((c) => describeCycle(graph, c));
    expect(cycles).toEqual([]);
  });

  test("the check finds a cycle and names the imports that close it", () => {
    const graph = new Map([
      ["a", new Map([["b", "a/x.ts → b/y.ts"]])],
      ["b", new Map([["c", "b/y.ts → c/z.ts"]])],
      ["c", new Map([["a", "c/z.ts → a/x.ts"]])],
      ["d", new Map([["a", "d/w.ts → a/x.ts"]])],
    ]);
    const cycles = folderCycles(graph);
    expect(cycles).toEqual([["a", "b", "c", "a"]]);
    expect(describeCycle(graph, cycles[0]!)).toContain("c → a  (c/z.ts → a/x.ts)");
  });

  test("generated code counts as its folder, and test files are left out", () => {
    const files = sourceFiles(SRC);
    expect(files.some((f) => f.includes("/cri/gen/"))).toBe(true);
    expect(files.some((f) => f.endsWith(".test.ts"))).toBe(false);
    expect(folderOf(join(SRC, "cri/gen/api.ts"))).toBe("cri");
    expect(folderOf(join(SRC, "images/containerd/gen/leases.ts"))).toBe("images");
  });
});
