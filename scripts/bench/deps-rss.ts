// Every dependency's share of the agent's RSS (issue #24: idle RSS toward
// 50 MiB). For each dependency, a program that imports only what the agent
// imports from it is compiled as the agent is (`bun build --compile
// --minify`) and run as the agent runs (JavaScriptCore's interpreter only,
// memory/jit.ts); its VmRSS, RssAnon and RssFile are read 2 s after start
// (the median of 3 runs), and shown above those of a program that imports
// nothing. Imports share code (grpc-transport loads grpc-js, the CRI client
// loads protobuf-ts), so the shares do not add up to "everything".
//
// Run: bun run bench:deps-rss   (a few seconds per row)
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { statusMiB } from "./proc.ts";

const repoRoot = resolve(import.meta.dir, "../..");
// Inside the repository so that bare imports resolve to its node_modules.
const dir = join(repoRoot, "node_modules/.cache/bunlet-deps-rss");
const RUNS = 3;
/** Bun's own Node.js modules that the agent loads anyway (its servers, TLS, spawns; grpc-js's HTTP/2). */
const BUILTINS = "node:http + https + http2 + net + tls + zlib + child_process";

/** What the agent imports from each dependency (see `grep -rh "from \"@\|from \"[a-z]" src`). */
const PROGRAMS: [name: string, source: string][] = [
  ["nothing (the Bun runtime)", ""],
  ["@grpc/grpc-js", 'import * as m from "@grpc/grpc-js";\nkeep(m);'],
  ["@protobuf-ts/runtime + runtime-rpc", 'import * as a from "@protobuf-ts/runtime";\nimport * as b from "@protobuf-ts/runtime-rpc";\nkeep(a, b);'],
  ["@protobuf-ts/grpc-transport (loads grpc-js)", 'import * as m from "@protobuf-ts/grpc-transport";\nkeep(m);'],
  ["the generated CRI client (src/cri/gen, loads protobuf-ts)", `import * as m from "${join(repoRoot, "src/cri/gen/api.client.ts")}";\nkeep(m);`],
  ["the CRI client as the agent builds it (src/cri/client.ts)", `import * as m from "${join(repoRoot, "src/cri/client.ts")}";\nkeep(m);`],
  ["@kubernetes/client-node (config_types only)", 'import * as m from "@kubernetes/client-node/dist/config_types.js";\nkeep(m);'],
  [
    "hono + @hono/node-server",
    'import { Hono } from "hono";\nimport { bodyLimit } from "hono/body-limit";\nimport * as s from "@hono/node-server";\nkeep(new Hono(), bodyLimit, s);',
  ],
  ["js-yaml", 'import * as m from "js-yaml";\nkeep(m);'],
  ["valibot", 'import * as m from "valibot";\nkeep(m);'],
  [
    BUILTINS,
    'import * as a from "node:http";\nimport * as b from "node:https";\nimport * as c from "node:tls";\nimport * as d from "node:zlib";\nimport * as e from "node:child_process";\nimport * as f from "node:http2";\nimport * as g from "node:net";\nkeep(a, b, c, d, e, f, g);',
  ],
];

function measure(source: string, name: string): { rss: number; anon: number; file: number } {
  const base = name.replace(/\W+/g, "-");
  const entry = join(dir, `${base}.ts`);
  const exe = join(dir, base);
  writeFileSync(entry, `${source}\nfunction keep(...xs: unknown[]) { (globalThis as any).__kept = xs; }\nsetInterval(() => {}, 60_000);\n`);
  const b = Bun.spawnSync([process.execPath, "build", "--compile", "--minify", entry, "--outfile", exe], { cwd: repoRoot, stdout: "pipe", stderr: "pipe" });
  if (b.exitCode !== 0) throw new Error(`bun build ${name}: ${b.stderr.toString()}`);
  const runs: { rss: number; anon: number; file: number }[] = [];
  for (let i = 0; i < RUNS; i++) {
    const p = Bun.spawnSync(["sh", "-c", `"$0" & pid=$!; sleep 2; cat /proc/$pid/status; kill $pid`, exe], {
      env: { ...process.env, BUN_JSC_useJIT: "0" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const status = p.stdout.toString();
    runs.push({ rss: statusMiB(status, "VmRSS"), anon: statusMiB(status, "RssAnon"), file: statusMiB(status, "RssFile") });
  }
  runs.sort((x, y) => x.rss - y.rss);
  return runs[Math.floor(RUNS / 2)]!;
}

mkdirSync(dir, { recursive: true });
try {
  const rows = PROGRAMS.map(([name, source]) => ({ name, ...measure(source, name) }));
  const base = rows[0]!;
  const builtins = rows.find((r) => r.name === BUILTINS)!;
  console.log("| program imports only | RSS | RssAnon | RssFile | RSS above nothing | RssAnon above nothing |\n| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const r of rows)
    console.log(
      `| ${r.name} | ${r.rss.toFixed(1)} MiB | ${r.anon.toFixed(1)} | ${r.file.toFixed(1)} | ${r === base ? "–" : `+${(r.rss - base.rss).toFixed(1)}`} | ${r === base ? "–" : `+${(r.anon - base.anon).toFixed(1)}`} |`,
    );
  console.log(
    `\n(Bun's Node.js modules alone, the last row, are +${(builtins.rss - base.rss).toFixed(1)} MiB: most of a dependency's file-backed share is Bun's own code for the modules it loads.)`,
  );
  const meminfo = readFileSync("/proc/meminfo", "utf8");
  console.log(`\n(median of ${RUNS} runs each, 2 s after start, BUN_JSC_useJIT=0; ${statusMiB(meminfo, "MemTotal").toFixed(0)} MiB of RAM)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
