/**
 * Fuzz: the config file parser and the command line, on thousands of
 * generated and mutated inputs. loadConfig must never throw, and every
 * rejection must name the flag, the field or the file it is about.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { arbitraryJson, forAll, keysOf, mutateText, mutateValue, randomString, type Rng } from "../util/fuzz.ts";
import { FLAGS } from "./flag-table.ts";
import { loadConfig, type ConfigResult } from "./index.ts";

const FULL = readFileSync(new URL("./testdata/full.yaml", import.meta.url), "utf8");
const KUBEADM = readFileSync(new URL("./testdata/kubeadm.yaml", import.meta.url), "utf8");
const FULL_OBJECT = Bun.YAML.parse(FULL) as Record<string, unknown>;

const KEYS = [...keysOf(FULL_OBJECT), "offlineAutonomy", "enabled", "maxAge"];

const run = (argv: string[], file: string | undefined): ConfigResult =>
  loadConfig(argv, {
    readFile: (path) => {
      if (path === "/k.yaml" && file !== undefined) return file;
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: "ENOENT" });
    },
    hostname: () => "fuzz-node",
    cwd: () => "/",
  });

/** A rejection is clear when it says which flag, field, file or node name it is about. */
const NAMES_SOMETHING = /(field "|flag --|--[a-z]|config file |node name |unknown flag|unknown shorthand|unexpected argument "|bad flag syntax: |flag -[a-zA-Z]\b)/;

/** About the config file: a field, or what is wrong with the file as a whole. */
const FILE_PROBLEM =
  /^(field "|invalid YAML|invalid JSON|is empty|is \d+ bytes|holds \d+ documents|nesting is deeper|expected a KubeletConfiguration object|YAML anchors|line \d+, column \d+: |document is)/;

/** full.yaml without the fields (and feature gates) this agent refuses: it loads. */
const LOADABLE_OBJECT = (() => {
  const o = structuredClone(FULL_OBJECT);
  const result = run(["--config=/k.yaml"], JSON.stringify(o));
  for (const line of result.kind === "error" ? result.message.split("\n") : []) {
    const gate = /feature gate (\w+)=/.exec(line);
    if (gate) delete (o["featureGates"] as Record<string, unknown>)[gate[1]!];
    else delete o[/field "(\w+)"/.exec(line)![1]!];
  }
  return o;
})();
const FULL_LOADABLE = JSON.stringify(LOADABLE_OBJECT, null, 2);

const outcomes = { run: 0, help: 0, version: 0, error: 0 };

function check([argv, file]: [string[], string | undefined]): void {
  const result = run(argv, file);
  outcomes[result.kind]++;
  expect(["run", "help", "version", "error"]).toContain(result.kind);
  if (result.kind !== "error") return;
  expect(result.message.length).toBeGreaterThan(0);
  // Several problems come one per line; an argument with a newline in it (echoed as pflag does) spans lines.
  for (const line of result.message.split("\n")) {
    const aboutFile = /^config file \/k\.yaml: (.*)$/.exec(line);
    if (aboutFile && !FILE_PROBLEM.test(aboutFile[1]!)) throw new Error(`file rejection that names no field: ${JSON.stringify(line)}`);
    if (!NAMES_SOMETHING.test(line) && !argv.some((a) => a.includes(line))) throw new Error(`rejection that names nothing: ${JSON.stringify(line)}`);
  }
}

const FLAG_VALUES = [
  "",
  "0",
  "-1",
  "true",
  "false",
  "10s",
  "1m0s",
  "-5s",
  "abc",
  "100Mi",
  "10%",
  "a=b,c=d",
  "127.0.0.1",
  "::1",
  "1.2.3.4,::1",
  "memory.available<100Mi",
  "Webhook",
  "x".repeat(70),
];

function randomFlag(rng: Rng): string {
  const def = rng.pick(FLAGS);
  const name = rng.bool(0.1) && def.short ? `-${def.short}` : `--${rng.bool(0.03) ? randomString(rng, 5) : def.name}`;
  if (def.isBool && rng.bool(0.5)) return name;
  const value = rng.bool(0.7) ? rng.pick(FLAG_VALUES) : randomString(rng, rng.int(10));
  return rng.bool(0.8) ? `${name}=${value}` : `${name} ${value}`;
}

function generate(rng: Rng, i: number): [string[], string | undefined] {
  const flags = Array.from({ length: rng.int(4) }, () => randomFlag(rng)).flatMap((f) => (f.includes(" ") && !f.includes("=") ? f.split(" ") : [f]));
  switch (i % 5) {
    case 0:
      return [["--config=/k.yaml", ...flags], mutateText(rng, rng.bool(0.7) ? FULL_LOADABLE : rng.bool(0.7) ? KUBEADM : FULL)];
    case 1:
      return [["--config=/k.yaml", ...flags], JSON.stringify(mutateValue(rng, rng.bool(0.7) ? LOADABLE_OBJECT : FULL_OBJECT, KEYS))];
    case 2:
      return [["--config=/k.yaml"], JSON.stringify({ apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration", ...(arbitraryJson(rng, KEYS, 3) as object) })];
    case 3:
      return [flags, undefined];
    default:
      return [[...flags, rng.bool() ? "--config=/missing.yaml" : "--config=/k.yaml"], rng.bool() ? randomString(rng, rng.int(200)) : ""];
  }
}

test("the testdata files: kubeadm's loads as it is; every field of full.yaml is acted on or refused by name", () => {
  expect(run(["--config=/k.yaml"], KUBEADM).kind).toBe("run");
  const full = run(["--config=/k.yaml"], FULL);
  expect(full.kind).toBe("error");
  for (const line of full.kind === "error" ? full.message.split("\n") : []) expect(line).toMatch(/^not acted on by this agent: field "[A-Za-z]+"/);
  expect(run(["--config=/k.yaml"], FULL_LOADABLE).kind).toBe("run");
});

test("3000 generated and mutated config files and command lines: no throw, every rejection names what it is about", () => {
  forAll({ seed: 0xc0ff_1234, count: 3000 }, generate, check);
  // Both sides were exercised: inputs that still load, and rejections.
  expect(outcomes.run).toBeGreaterThan(150);
  expect(outcomes.error).toBeGreaterThan(1500);
}, 60_000); // thousands of cases: a loaded machine must not time them out
