/**
 * The agent's configuration, from the command line and the --config file,
 * with upstream's precedence: built-in defaults, then the file (with the
 * config file's defaults), then the flags given on the command line.
 *
 *   loadConfig(argv, deps) -> run (AgentConfig) | help | version | error
 *
 * loadConfig never exits, prints or throws for bad input: the entry point
 * (src/main.ts) decides what to do with each result.
 */
import * as v from "valibot";
import { applyLegacyDefaults, mergeEvictionDefaults } from "./defaults.ts";
import { ConfigError } from "./errors.ts";
import { FLAGS } from "./flag-table.ts";
import { defaultAgentFlags, parseArgs, type FlagTarget } from "./flags.ts";
import { helpText } from "./help.ts";
import { API_VERSION, KIND, KubeletConfigurationSchema, type KubeletConfiguration } from "./kubelet-config.ts";
import { loadKubeletConfigFile } from "./load-file.ts";
import { validateKubeletConfiguration } from "./validate.ts";
import { refusals } from "./settings.ts";
import { checkDns1123Subdomain } from "./validators.ts";

export type { EvictionSignal, KubeletConfiguration, KubeletConfigurationFile } from "./kubelet-config.ts";
export { EVICTION_SIGNALS, KubeletConfigurationFileSchema, KubeletConfigurationSchema } from "./kubelet-config.ts";
export type { Milliseconds } from "./duration.ts";
export { formatDuration, parseDuration } from "./duration.ts";
export { parseQuantity, parseThreshold, type Threshold } from "./quantity.ts";
export { kubeletVersion } from "./version.ts";

/** Everything the agent is configured with. */
export interface AgentConfig {
  /** --hostname-override, else the host name; trimmed, lowercased, a valid DNS-1123 subdomain. */
  nodeName: string;
  /** --kubeconfig. Unset means standalone mode: no API server, static pods only. */
  kubeconfig?: string;
  /** --bootstrap-kubeconfig; only together with kubeconfig. */
  bootstrapKubeconfig?: string;
  /** --node-ip: none, one IP, or an IPv4/IPv6 pair. */
  nodeIPs: string[];
  /** --node-labels, checked like upstream (kubernetes.io labels limited to the kubelet's own). */
  nodeLabels: Record<string, string>;
  /** --root-dir (default /var/lib/kubelet). */
  rootDir: string;
  /** --cert-dir (default /var/lib/kubelet/pki). */
  certDir: string;
  /** --cloud-provider: "" or "external". */
  cloudProvider: string;
  /** --config as given, if any. */
  configFile?: string;
  /** kubelet.runOnce (--runonce). */
  runOnce: boolean;
  /** kubelet.logging.verbosity (-v). */
  verbosity: number;
  /** kubelet.registerNode (--register-node); meaningful only with kubeconfig. */
  registerNode: boolean;
  /** The KubeletConfiguration: defaults applied, flags merged, validated. */
  kubelet: KubeletConfiguration;
  /** cgroupDriver was set in the config file or by --cgroup-driver (not defaulted): a runtime that reports another driver is then a startup error. */
  cgroupDriverSet?: boolean;
}

export type ConfigResult =
  /** warnings: flags accepted but ignored, and similar notes to log at start. */
  | { kind: "run"; config: AgentConfig; warnings: string[] }
  | { kind: "help"; text: string }
  | { kind: "version" }
  /** message names the flag or config file field and what was expected. */
  | { kind: "error"; message: string };

export interface ConfigDeps {
  /** Reads the --config file; throws (with `code: "ENOENT"` when missing) like fs.readFileSync. */
  readFile(path: string): string | Buffer;
  /** The host name, used as the node name without --hostname-override. */
  hostname(): string;
  /** Unused today: like upstream, no setting comes from the environment. Kept for callers and tests. */
  env?: Record<string, string | undefined>;
  /** The working directory relative paths start at; default process.cwd(). */
  cwd?(): string;
}

export function loadConfig(argv: readonly string[], deps: ConfigDeps): ConfigResult {
  try {
    return load(argv, deps);
  } catch (err) {
    if (err instanceof ConfigError) return { kind: "error", message: err.message };
    throw err;
  }
}

function load(argv: readonly string[], deps: ConfigDeps): ConfigResult {
  const args = parseArgs(argv, FLAGS);
  if (args.help) return { kind: "help", text: helpText(FLAGS, flagDefaults()) };
  // Upstream prints the version before reading the config file.
  if (args.version) return { kind: "version" };

  const configFile = args.occurrences.filter((o) => o.def.name === "config").at(-1)?.raw || undefined;
  let fileFields: readonly string[] = [];
  const kubelet = configFile
    ? loadKubeletConfigFile(configFile, { readFile: deps.readFile, cwd: deps.cwd ? deps.cwd() : process.cwd(), onFields: (f) => (fileFields = f) })
    : flagDefaults().kubelet;
  const target: FlagTarget = { kubelet, agent: defaultAgentFlags(), warnings: [], seen: new Set() };
  for (const o of args.occurrences) o.apply(target);
  mergeEvictionDefaults(kubelet);

  const errors = validateKubeletConfiguration(kubelet).map((e) => `invalid configuration: ${e}`);
  // Every setting is acted on or refused: a value the agent would not act on stops it here (exit 2).
  if (errors.length === 0) errors.push(...refusals(kubelet, fileDefaults(), flagOfField).map((e) => `not acted on by this agent: ${e}`));
  const { agent } = target;
  if (agent.bootstrapKubeconfig && !agent.kubeconfig) errors.push("flag --bootstrap-kubeconfig needs --kubeconfig: the bootstrapped credentials are written there");
  const nodeName = resolveNodeName(agent.hostnameOverride, deps.hostname, errors);
  if (errors.length > 0) throw new ConfigError(errors.join("\n"));

  if (!configFile && kubelet.authentication.anonymous.enabled && kubelet.authorization.mode === "AlwaysAllow")
    target.warnings.push(
      "no --config given: the upstream flag defaults apply, so the kubelet API allows anonymous requests (--anonymous-auth, --authorization-mode=AlwaysAllow); pass a KubeletConfiguration file for the secure defaults",
    );
  return {
    kind: "run",
    warnings: target.warnings,
    config: {
      nodeName,
      ...(agent.kubeconfig ? { kubeconfig: agent.kubeconfig } : {}),
      ...(agent.bootstrapKubeconfig ? { bootstrapKubeconfig: agent.bootstrapKubeconfig } : {}),
      nodeIPs: agent.nodeIPs,
      nodeLabels: agent.nodeLabels,
      rootDir: agent.rootDir,
      certDir: agent.certDir,
      cloudProvider: agent.cloudProvider,
      ...(configFile ? { configFile } : {}),
      runOnce: kubelet.runOnce,
      verbosity: kubelet.logging.verbosity,
      registerNode: kubelet.registerNode,
      kubelet,
      cgroupDriverSet: fileFields.includes("cgroupDriver") || args.occurrences.some((o) => o.def.name === "cgroup-driver"),
    },
  };
}

/** The configuration of an empty config file: what a refused field must equal. */
function fileDefaults(): KubeletConfiguration {
  return v.parse(KubeletConfigurationSchema, { apiVersion: API_VERSION, kind: KIND });
}

const FLAG_OF_FIELD = new Map(FLAGS.filter((f) => f.field && !f.field.includes(".")).map((f) => [f.field as string, f.name]));
const flagOfField = (field: string) => FLAG_OF_FIELD.get(field);

/** The flag defaults: the config file defaults, then upstream's legacy flag defaults on top. */
function flagDefaults(): FlagTarget {
  const kubelet = v.parse(KubeletConfigurationSchema, { apiVersion: API_VERSION, kind: KIND });
  applyLegacyDefaults(kubelet);
  return { kubelet, agent: defaultAgentFlags(), warnings: [], seen: new Set() };
}

/** After upstream nodeutil.GetHostname: trimmed and lowercased; here also checked as a node name. */
function resolveNodeName(override: string | undefined, hostname: () => string, errors: string[]): string {
  const source = override ? "--hostname-override" : "the host name";
  const name = (override ?? hostname()).trim().toLowerCase();
  if (name === "") {
    errors.push(`node name from ${source} is empty`);
    return name;
  }
  const err = checkDns1123Subdomain(name);
  if (err) errors.push(`node name from ${source}: ${err}`);
  return name;
}
