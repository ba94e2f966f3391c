/**
 * What `/exec`, `/attach`, `/portForward` and `/run` on 10250 act on, after
 * upstream's pkg/kubelet/server/server.go (getExec, getAttach,
 * getPortForward, getRun) and the kubelet's GetExec/GetAttach/
 * GetPortForward/RunInContainer:
 *
 *   /exec/{namespace}/{pod}[/{uid}]/{container}?command=..&input=1&output=1&error=1&tty=1
 *   /attach/{namespace}/{pod}[/{uid}]/{container}?input=1&output=1&error=1&tty=1
 *   /portForward/{namespace}/{pod}[/{uid}]            (ports in SPDY stream headers, or ?port= for WebSocket)
 *   /run/{namespace}/{pod}[/{uid}]/{container}?cmd=ls+-l   (POST; ExecSync, answers the output)
 *
 * The pod is looked up among the pods this agent runs (by namespace and
 * name, and uid when the path has one); the container or sandbox id comes
 * from the runtime (running containers / ready sandboxes with the pod's
 * labels). The runtime answers exec/attach/portForward with a URL on its
 * own streaming server; the agent proxies the client's connection to it
 * (upstream's behaviour since redirectContainerStreaming was removed), see
 * stream-proxy.ts.
 */
import * as v from "valibot";
import type { Pod } from "../pods/schema.ts";
import type { RuntimeService } from "../cri/index.ts";
import { ContainerState, PodSandboxState } from "../cri/index.ts";
import { ContainerNameLabel, PodUidLabel } from "../runtime/labels.ts";
import { HttpError } from "./errors.ts";

export type StreamingKind = "exec" | "attach" | "portForward" | "run";

export interface StreamingTarget {
  kind: StreamingKind;
  namespace: string;
  pod: string;
  uid?: string;
  /** Absent for portForward only. */
  container?: string;
}

/** The runtime calls streaming needs. */
export type StreamingRuntime = Pick<RuntimeService, "listContainers" | "listPodSandbox" | "exec" | "attach" | "portForward" | "execSync">;

const PREFIXES: Record<string, StreamingKind> = { exec: "exec", attach: "attach", portForward: "portForward", run: "run" };

/** The target of a streaming path, or undefined when the path is not one (upstream's routes, with and without {uid}). */
export function parseStreamingPath(path: string): StreamingTarget | undefined {
  const parts = path.split("/").slice(1);
  const kind = PREFIXES[parts[0] ?? ""];
  if (!kind) return undefined;
  let segs: string[];
  try {
    segs = parts.slice(1).map(decodeURIComponent);
  } catch {
    return undefined;
  }
  if (segs.some((s) => s === "")) return undefined;
  if (kind === "portForward") {
    if (segs.length === 2) return { kind, namespace: segs[0]!, pod: segs[1]! };
    if (segs.length === 3) return { kind, namespace: segs[0]!, pod: segs[1]!, uid: segs[2]! };
    return undefined;
  }
  if (segs.length === 3) return { kind, namespace: segs[0]!, pod: segs[1]!, container: segs[2]! };
  if (segs.length === 4) return { kind, namespace: segs[0]!, pod: segs[1]!, uid: segs[2]!, container: segs[3]! };
  return undefined;
}

/** Methods upstream registers for each kind. */
export function allowedMethods(kind: StreamingKind): string[] {
  return kind === "run" ? ["POST"] : ["GET", "POST"];
}

export interface StreamOptions {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

// The API server sends "1" (upstream's remotecommand reads `== "1"`); "true" is accepted too.
const flag = (q: URLSearchParams, name: string) => {
  const val = q.get(name);
  return val === "1" || val === "true";
};

/**
 * Upstream remotecommand NewOptions with core/v1's parameter names
 * (ExecStdinParam "input", ExecStdoutParam "output", ExecStderrParam
 * "error", ExecTTYParam "tty"): stderr is dropped with a tty; at least one
 * stream is required (400).
 */
export function parseStreamOptions(q: URLSearchParams): StreamOptions {
  const tty = flag(q, "tty");
  const stdin = flag(q, "input");
  const stdout = flag(q, "output");
  const stderr = flag(q, "error") && !tty;
  if (!stdin && !stdout && !stderr) throw new HttpError(400, "you must specify at least 1 of stdin, stdout, stderr");
  return { stdin, stdout, stderr, tty };
}

const PortSchema = v.pipe(v.string(), v.regex(/^\d{1,5}$/), v.transform(Number), v.minValue(1), v.maxValue(65535));

/** `?port=` values (WebSocket port forwarding; SPDY clients name ports in stream headers instead). */
export function parsePorts(q: URLSearchParams): number[] {
  return q
    .getAll("port")
    .flatMap((p) => p.split(","))
    .map((raw) => {
      const r = v.safeParse(PortSchema, raw.trim());
      if (!r.success) throw new HttpError(400, `unable to parse ${JSON.stringify(raw)} as a port: expected 1-65535`);
      return r.output;
    });
}

/** The pods exec, attach, portForward and run may reach: those with a status here (status/ `ReportedStatuses`). */
export interface StreamablePods {
  list(): readonly { pod: Pod }[];
}

export interface StreamingResolverOptions {
  pods: StreamablePods;
  cri: StreamingRuntime;
}

export interface StreamingResolver {
  /** The runtime's streaming URL for an exec, attach or portForward; HttpError 400/404 for bad requests and unknown pods/containers. */
  streamUrl(target: StreamingTarget, query: URLSearchParams): Promise<string>;
  /** `/run`: runs `cmd` to completion; stdout then stderr. A non-zero exit is an HttpError 500 with upstream's message. */
  run(target: StreamingTarget, cmd: string[]): Promise<Uint8Array>;
}

const describePod = (t: StreamingTarget) => `${t.namespace}/${t.pod}`;

export function streamingResolver(opts: StreamingResolverOptions): StreamingResolver {
  const findPod = (t: StreamingTarget): Pod => {
    const entry = opts.pods
      .list()
      .find(({ pod }) => pod.metadata.name === t.pod && (pod.metadata.namespace ?? "default") === t.namespace && (t.uid === undefined || pod.metadata.uid === t.uid));
    if (!entry) throw new HttpError(404, t.uid === undefined ? `pod "${describePod(t)}" does not exist` : `pod "${describePod(t)}" with uid ${t.uid} does not exist`);
    return entry.pod;
  };

  /** The newest running container of that name in the pod, as the runtime lists it. */
  const containerId = async (pod: Pod, t: StreamingTarget): Promise<string> => {
    const name = t.container!;
    const spec = pod.spec as { containers: { name: string }[]; initContainers?: { name: string }[]; ephemeralContainers?: { name: string }[] };
    const known = [...spec.containers, ...(spec.initContainers ?? []), ...(spec.ephemeralContainers ?? [])].some((c) => c.name === name);
    if (!known) throw new HttpError(404, `container "${name}" not found in pod "${describePod(t)}"`);
    const running = await opts.cri.listContainers({
      state: { state: ContainerState.CONTAINER_RUNNING },
      labelSelector: { [PodUidLabel]: pod.metadata.uid, [ContainerNameLabel]: name },
    });
    const newest = running.sort((a, b) => Number(b.createdAt - a.createdAt))[0];
    if (!newest) throw new HttpError(404, `container "${name}" in pod "${describePod(t)}" is not running`);
    return newest.id;
  };

  const sandboxId = async (pod: Pod, t: StreamingTarget): Promise<string> => {
    const ready = await opts.cri.listPodSandbox({ state: { state: PodSandboxState.SANDBOX_READY }, labelSelector: { [PodUidLabel]: pod.metadata.uid } });
    const newest = ready.sort((a, b) => Number(b.createdAt - a.createdAt))[0];
    if (!newest) throw new HttpError(404, `pod "${describePod(t)}" has no running sandbox`);
    return newest.id;
  };

  return {
    async streamUrl(t, query) {
      switch (t.kind) {
        case "exec": {
          const o = parseStreamOptions(query);
          const cmd = query.getAll("command");
          if (!cmd.length) throw new HttpError(400, "you must specify a command");
          const pod = findPod(t);
          return opts.cri.exec({ containerId: await containerId(pod, t), cmd, ...o });
        }
        case "attach": {
          const o = parseStreamOptions(query);
          const pod = findPod(t);
          return opts.cri.attach({ containerId: await containerId(pod, t), ...o });
        }
        case "portForward": {
          const ports = parsePorts(query);
          const pod = findPod(t);
          return opts.cri.portForward(await sandboxId(pod, t), ports);
        }
        case "run":
          throw new HttpError(400, "run is not a streaming request");
      }
    },
    async run(t, cmd) {
      const pod = findPod(t);
      const r = await opts.cri.execSync(await containerId(pod, t), cmd, 0);
      if (r.exitCode !== 0) {
        throw new HttpError(500, `command '${cmd.join(" ")}' exited with ${r.exitCode}: ${new TextDecoder().decode(r.stderr)}`);
      }
      const out = new Uint8Array(r.stdout.length + r.stderr.length);
      out.set(r.stdout, 0);
      out.set(r.stderr, r.stdout.length);
      return out;
    },
  };
}
