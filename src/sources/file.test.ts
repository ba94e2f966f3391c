import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../util/clock.ts";
import { memoryLogger } from "../util/log.ts";
import { FileSource, scanManifests } from "./file.ts";
import type { SourceSnapshot } from "./types.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "filesource-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const manifest = (name: string, image = "busybox") => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  containers:
  - name: main
    image: ${image}
`;

describe("scanManifests", () => {
  test("applies static pod defaults with a stable UID", () => {
    writeFileSync(join(dir, "web.yaml"), manifest("web"));
    const first = scanManifests(dir, "node-a");
    const second = scanManifests(dir, "node-a");
    expect(first.problems).toEqual([]);
    const pod = first.pods[0]!;
    expect(pod.metadata.name).toBe("web-node-a");
    expect(pod.metadata.namespace).toBe("default");
    expect(pod.spec.nodeName).toBe("node-a");
    expect(pod.metadata.uid).toMatch(/^[0-9a-f]{32}$/);
    expect(pod.metadata.annotations?.["kubernetes.io/config.source"]).toBe("file");
    expect(second.pods[0]!.metadata.uid).toBe(pod.metadata.uid!);
    expect(scanManifests(dir, "node-b").pods[0]!.metadata.uid).not.toBe(pod.metadata.uid!);
  });

  test("a changed manifest gets a new UID", () => {
    writeFileSync(join(dir, "web.yaml"), manifest("web"));
    const before = scanManifests(dir, "n").pods[0]!.metadata.uid;
    writeFileSync(join(dir, "web.yaml"), manifest("web", "busybox:2"));
    expect(scanManifests(dir, "n").pods[0]!.metadata.uid).not.toBe(before!);
  });

  test("reports bad files by name and keeps the good ones", () => {
    writeFileSync(join(dir, "good.json"), JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name: "good" }, spec: { containers: [{ name: "c", image: "busybox" }] } }));
    writeFileSync(join(dir, "noimage.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  containers:\n  - name: c\n");
    writeFileSync(join(dir, "badname.yaml"), manifest("Bad_Name"));
    writeFileSync(join(dir, "garbage.yaml"), "a: [1, 2\nb: }");
    writeFileSync(join(dir, "dup.yaml"), manifest("good"));
    writeFileSync(join(dir, ".swap.yaml"), "garbage");
    mkdirSync(join(dir, "subdir"));
    const { pods, problems } = scanManifests(dir, "n");
    expect(pods.map((p) => p.metadata.name)).toEqual(["good-n"]);
    const byFile = Object.fromEntries(problems.map((p) => [p.file.slice(dir.length + 1), p.reason]));
    expect(Object.keys(byFile).sort()).toEqual(["badname.yaml", "garbage.yaml", "good.json", "noimage.yaml"]);
    expect(byFile["noimage.yaml"]).toContain('field "spec.containers[0].image"');
    expect(byFile["badname.yaml"]).toContain('field "metadata.name"');
    expect(byFile["garbage.yaml"]).toContain("invalid YAML at line 2, column 1: missed comma between flow collection entries");
    writeFileSync(join(dir, "garbage.yaml"), "kind: Pod\n");
    expect(scanManifests(dir, "n").problems.find((p) => p.file.endsWith("garbage.yaml"))!.reason).toBe('field "metadata": is required; field "spec": is required');
  });

  test("duplicate pod names keep the first file", () => {
    writeFileSync(join(dir, "a.yaml"), manifest("web"));
    writeFileSync(join(dir, "b.yaml"), manifest("web", "other"));
    const { pods, problems } = scanManifests(dir, "n");
    expect(pods).toHaveLength(1);
    expect(problems[0]!.reason).toContain('"web-n_default" is already defined in');
  });

  test("a missing directory yields no pods and no problems", () => {
    expect(scanManifests(join(dir, "absent"), "n")).toEqual({ pods: [], problems: [], uidNotes: [] });
  });
});

describe("FileSource", () => {
  test("emits on start and on each periodic rescan; reports a problem once", async () => {
    const clock = new FakeClock();
    const { logger, lines } = memoryLogger();
    writeFileSync(join(dir, "bad.yaml"), "kind: Pod\n");
    const snapshots: SourceSnapshot[] = [];
    await using source = new FileSource({ path: dir, nodeName: "n", checkFrequencyMs: 20_000, clock, logger });
    source.start((s) => snapshots.push(s));
    expect(snapshots).toHaveLength(1);
    writeFileSync(join(dir, "web.yaml"), manifest("web"));
    clock.advance(20_000);
    expect(snapshots.at(-1)!.pods.map((p) => p.metadata.name)).toEqual(["web-n"]);
    clock.advance(20_000);
    expect(lines.filter((l) => l.includes("could not process manifest file"))).toHaveLength(1);
    expect(lines[0]).toContain("bad.yaml");
  });
});
