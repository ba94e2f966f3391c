/**
 * RuntimeClass → CRI runtime handler, after upstream
 * pkg/kubelet/runtimeclass (LookupRuntimeHandler): no class (or "") is the
 * runtime's default handler ""; a class that does not exist is upstream's
 * NotFound error and the pod's sandbox is not created; any other failure to
 * read it is "failed to lookup RuntimeClass <name>: ...". Only in cluster
 * mode: without an API server upstream has no RuntimeClass manager and
 * every pod gets the default handler.
 */
import * as v from "valibot";
import type { KubeApi } from "../api/index.ts";
import { formatIssues } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";

export interface RuntimeClasses {
  /** The CRI runtime handler for a pod's spec.runtimeClassName; rejects with RuntimeClassError. */
  handlerFor(runtimeClassName: string | null | undefined): Promise<string>;
}

/** Standalone (no API server): every pod gets the runtime's default handler "", as upstream without a RuntimeClass manager. */
export const defaultRuntimeClasses: RuntimeClasses = { handlerFor: async () => "" };

export class RuntimeClassError extends Error {
  override readonly name = "RuntimeClassError";
  constructor(
    readonly runtimeClassName: string,
    readonly notFound: boolean,
    message: string,
  ) {
    super(message);
  }
}

const RuntimeClass = v.looseObject({ handler: v.pipe(v.string(), v.minLength(1, "must not be empty")) });

/** Reads classes with a GET; a found class is kept for `ttlMs` (its handler is immutable), a missing one is asked again next time. */
export class ApiRuntimeClasses implements RuntimeClasses {
  private readonly found = new Map<string, { handler: string; at: number }>();

  constructor(private readonly opts: { api: Pick<KubeApi, "getRuntimeClass">; clock: Clock; ttlMs?: number }) {}

  async handlerFor(runtimeClassName: string | null | undefined): Promise<string> {
    if (!runtimeClassName) return "";
    const now = this.opts.clock.now();
    const hit = this.found.get(runtimeClassName);
    if (hit && now - hit.at < (this.opts.ttlMs ?? 60_000)) return hit.handler;
    let object: unknown;
    try {
      object = await this.opts.api.getRuntimeClass(runtimeClassName);
    } catch (err) {
      throw new RuntimeClassError(runtimeClassName, false, `failed to lookup RuntimeClass ${runtimeClassName}: ${errorMessage(err)}`);
    }
    if (object === undefined) {
      this.found.delete(runtimeClassName);
      // The lister's NotFound, as upstream's message reads: runtimeclass.node.k8s.io "<name>" not found.
      throw new RuntimeClassError(runtimeClassName, true, `runtimeclass.node.k8s.io "${runtimeClassName}" not found`);
    }
    const parsed = v.safeParse(RuntimeClass, object);
    if (!parsed.success) throw new RuntimeClassError(runtimeClassName, false, `failed to lookup RuntimeClass ${runtimeClassName}: ${formatIssues(parsed.issues)}`);
    this.found.set(runtimeClassName, { handler: parsed.output.handler, at: now });
    return parsed.output.handler;
  }
}

/** Standalone mode (upstream: no RuntimeClass manager without an API client): the default handler for every pod. */
export const defaultHandlerOnly: RuntimeClasses = { handlerFor: async () => "" };
