/**
 * The agent runs JavaScriptCore's interpreter only, without its JIT
 * compilers. Measured with 110 pods (`bun run bench`, docs/benchmarks.md):
 * RSS 81 instead of 128 MiB (the compilers' code and allocations, and the
 * profiling data kept for them). On a quiet machine pod startup latency is
 * the same (the agent mostly waits on containerd and the API server); the
 * cost is CPU: 1.4 to 1.8 times the upstream kubelet's CPU time to start
 * pods (0.9 to 1.6 with it), and 5.8 to 8.1% of a core with 110 pods
 * running (upstream 6.9 to 8.1%), so under heavy CPU contention large
 * batches start later. Memory is what edge nodes run out of first.
 *
 * JavaScriptCore reads its options from `BUN_JSC_*` environment variables
 * once, when the VM is created, before any of our code runs. So the agent
 * replaces itself (execve: the same PID, nothing left behind) with
 * `BUN_JSC_useJIT=0` set, once, at start. A JIT option already in the
 * environment (`BUN_JSC_useJIT=1`, `BUN_JSC_useDFGJIT=0`, ...) is the
 * operator's choice and is kept as it is.
 */

export const JIT_VARIABLE = "BUN_JSC_useJIT";
/** Any of JavaScriptCore's switches for its tiers: useJIT, useBaselineJIT, useDFGJIT, useFTLJIT. */
const OPERATOR_CHOICE = /^BUN_JSC_use\w*JIT$/;

export interface ProcessFacts {
  env: Record<string, string | undefined>;
  /** The executable: the compiled agent, or bun when run from source. */
  execPath: string;
  /** process.argv: [bun, script, ...arguments], also in a compiled executable (its script is a /$bunfs path). */
  argv: readonly string[];
  /** process.argv0: the name the process was started as. */
  argv0: string;
  /** Runtime flags given to bun itself when run from source (`bun --inspect src/main.ts`). */
  execArgv: readonly string[];
  /** Whether this is the compiled executable, whose own arguments start at argv[2]. */
  compiled: boolean;
}

export type JitPlan = { kind: "keep" } | { kind: "reexec"; file: string; args: string[]; env: Record<string, string> };

/** What to run instead of this process, if anything. Pure: `main` carries it out. */
export function planJit(p: ProcessFacts): JitPlan {
  if (Object.keys(p.env).some((k) => OPERATOR_CHOICE.test(k) && p.env[k] !== undefined)) return { kind: "keep" };
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(p.env)) if (v !== undefined) env[k] = v;
  env[JIT_VARIABLE] = "0";
  // Compiled: the executable takes its arguments directly. From source: bun, its flags, the script, the arguments.
  const args = p.compiled ? [p.argv0, ...p.argv.slice(2)] : [p.argv0, ...p.execArgv, ...p.argv.slice(1)];
  return { kind: "reexec", file: p.execPath, args, env };
}

/** Whether JavaScriptCore runs with its JIT under this environment (BUN_JSC_useJIT=0 or false turns it off). */
export function jitEnabled(env: Record<string, string | undefined>): boolean {
  const v = env[JIT_VARIABLE]?.trim().toLowerCase();
  return !(v === "0" || v === "false");
}
