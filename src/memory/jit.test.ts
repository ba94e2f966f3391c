import { describe, expect, test } from "bun:test";
import { JIT_VARIABLE, jitEnabled, planJit, type ProcessFacts } from "./jit.ts";

const facts = (over: Partial<ProcessFacts> = {}): ProcessFacts => ({
  env: { PATH: "/usr/bin", HOME: undefined },
  execPath: "/usr/bin/kubelet",
  argv: ["bun", "/$bunfs/root/kubelet", "--config=/etc/kubernetes/kubelet.yaml", "--v=2"],
  argv0: "kubelet",
  execArgv: [],
  compiled: true,
  ...over,
});

describe("planJit", () => {
  test("the compiled agent runs itself again with the same arguments and environment, plus the variable", () => {
    expect(planJit(facts())).toEqual({
      kind: "reexec",
      file: "/usr/bin/kubelet",
      args: ["kubelet", "--config=/etc/kubernetes/kubelet.yaml", "--v=2"],
      env: { PATH: "/usr/bin", [JIT_VARIABLE]: "0" },
    });
  });

  test("from source: bun, its own flags, the script, then the arguments", () => {
    const plan = planJit(facts({ compiled: false, execPath: "/opt/bun", argv0: "bun", argv: ["/opt/bun", "/src/main.ts", "--v=4"], execArgv: ["--inspect=127.0.0.1:9229"] }));
    expect(plan).toMatchObject({ kind: "reexec", file: "/opt/bun", args: ["bun", "--inspect=127.0.0.1:9229", "/src/main.ts", "--v=4"] });
  });

  test("once: a process that already has a JIT switch (the replaced one, or the operator's choice) keeps running", () => {
    for (const env of [{ BUN_JSC_useJIT: "0" }, { BUN_JSC_useJIT: "1" }, { BUN_JSC_useJIT: "" }, { BUN_JSC_useDFGJIT: "0" }, { BUN_JSC_useBaselineJIT: "1" }]) {
      expect(planJit(facts({ env }))).toEqual({ kind: "keep" });
    }
    // Other JavaScriptCore options are passed along, not taken as a choice about the JIT.
    expect(planJit(facts({ env: { BUN_JSC_forceRAMSize: "268435456" } }))).toMatchObject({ kind: "reexec", env: { BUN_JSC_forceRAMSize: "268435456", BUN_JSC_useJIT: "0" } });
  });
});

test("jitEnabled: off only when BUN_JSC_useJIT says 0 or false (bun:ffi, for maxOpenFiles, needs it)", () => {
  expect(jitEnabled({})).toBe(true);
  expect(jitEnabled({ [JIT_VARIABLE]: "1" })).toBe(true);
  expect(jitEnabled({ BUN_JSC_useDFGJIT: "0" })).toBe(true);
  expect(jitEnabled({ [JIT_VARIABLE]: "0" })).toBe(false);
  expect(jitEnabled({ [JIT_VARIABLE]: "false" })).toBe(false);
});
