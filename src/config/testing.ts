/** For tests: the agent's configuration as it loads a KubeletConfiguration file holding `fields` (given by --config). */
import { type AgentConfig, loadConfig } from "./index.ts";

export function configFromFields(fields: Record<string, unknown>, opts: { rootDir: string; hostname: string }): AgentConfig {
  const r = loadConfig(["--config=/k.json", `--root-dir=${opts.rootDir}`], {
    readFile: (p) => {
      if (p === "/k.json") return JSON.stringify({ apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration", ...fields });
      throw Object.assign(new Error(`ENOENT: ${p}`), { code: "ENOENT" });
    },
    hostname: () => opts.hostname,
    cwd: () => "/",
  });
  if (r.kind !== "run") throw new Error(`the config did not load: ${JSON.stringify(r)}`);
  return r.config;
}
