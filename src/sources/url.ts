/**
 * The static pod URL source (upstream config/http.go): GETs `staticPodURL`
 * every `httpCheckFrequency` with the configured headers; the body is one
 * Pod or a PodList, in JSON or YAML. A failed fetch or a body that does not
 * parse keeps the last good view (the pods keep running) and is reported;
 * the source is ready after its first good fetch.
 */
import type { Clock } from "../util/clock.ts";
import { decodeDocuments, MAX_DOCUMENT_BYTES } from "../util/decode.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { podResourceErrors, invalidPodMessage } from "./resource-validation.ts";
import { parsePod, type Pod } from "../pods/schema.ts";
import { applyStaticPodDefaults, logUidNote, type StaticUidNote } from "./defaults.ts";
import type { PodSource, SourceSnapshot } from "./types.ts";
import { podFullName } from "../pods/identity.ts";

export interface UrlSourceOptions {
  url: string;
  headers: Record<string, string[]>;
  nodeName: string;
  checkFrequencyMs: number;
  clock: Clock;
  logger: Logger;
  fetch?: typeof fetch;
  /** Pod UIDs the runtime had sandboxes for at startup (a pod running under this agent's earlier UID rule keeps it). */
  runtimePodUids?: ReadonlySet<string>;
}

/** Turns a fetched body into pods; pure, so every error path is unit-tested. */
export function podsFromBody(
  body: string,
  opts: { url: string; nodeName: string; runtimePodUids?: ReadonlySet<string> },
): { ok: true; pods: Pod[]; uidNotes: { pod: string; note: StaticUidNote }[] } | { ok: false; error: string } {
  let docs: unknown[];
  try {
    docs = decodeDocuments(body);
  } catch (err) {
    return { ok: false, error: errorMessage(err) };
  }
  if (docs.length !== 1) return { ok: false, error: `expected one Pod or PodList document, found ${docs.length}` };
  const doc = docs[0] as { kind?: string; items?: unknown[] };
  // A PodList without items (or null, as Go writes an empty one) is empty; anything else that is not a list
  // is an error, never an empty list: that would remove every pod of the URL.
  if (doc?.kind === "PodList" && doc.items != null && !Array.isArray(doc.items)) return { ok: false, error: 'field "items": expected a list of Pods' };
  const items = doc?.kind === "PodList" ? (doc.items ?? []) : [doc];
  const pods: Pod[] = [];
  const uidNotes: { pod: string; note: StaticUidNote }[] = [];
  const names = new Set<string>();
  for (const [i, item] of items.entries()) {
    const parsed = parsePod(item);
    if (!parsed.ok) return { ok: false, error: doc?.kind === "PodList" ? `items[${i}]: ${parsed.error}` : parsed.error };
    // What the API server would refuse (upstream validates every static pod it decodes): resources that cannot be overcommitted.
    const invalid = podResourceErrors(parsed.value);
    if (invalid.length) return { ok: false, error: doc?.kind === "PodList" ? `items[${i}]: ${invalidPodMessage(invalid)}` : invalidPodMessage(invalid) };
    let uidNote: StaticUidNote | undefined;
    const pod = applyStaticPodDefaults(parsed.value, {
      nodeName: opts.nodeName,
      source: "http",
      location: opts.url,
      manifest: item,
      runtimePodUids: opts.runtimePodUids,
      onUidNote: (note) => (uidNote = note),
    });
    if (uidNote) uidNotes.push({ pod: podFullName(pod), note: uidNote });
    if (names.has(podFullName(pod))) return { ok: false, error: `items[${i}]: duplicate pod "${podFullName(pod)}"` };
    names.add(podFullName(pod));
    pods.push(pod);
  }
  return { ok: true, pods, uidNotes };
}

export class UrlSource implements PodSource {
  readonly name = "http" as const;
  private cancel: (() => void) | undefined;
  private stopped = false;
  private lastError = "";
  private lastUidNotes = new Map<string, string>();
  private inFlight: Promise<void> | undefined;

  constructor(private readonly opts: UrlSourceOptions) {}

  start(emit: (snapshot: SourceSnapshot) => void): void {
    const tick = () => {
      this.inFlight = this.poll(emit).finally(() => {
        if (!this.stopped) this.cancel = this.opts.clock.setTimer(this.opts.checkFrequencyMs, tick);
      });
    };
    tick();
  }

  private async poll(emit: (snapshot: SourceSnapshot) => void): Promise<void> {
    const { url, logger } = this.opts;
    let result: ReturnType<typeof podsFromBody>;
    try {
      const headers = new Headers();
      for (const [k, values] of Object.entries(this.opts.headers)) for (const value of values) headers.append(k, value);
      const res = await (this.opts.fetch ?? fetch)(url, { headers, signal: AbortSignal.timeout(10_000) });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const length = Number(res.headers.get("content-length") ?? 0);
      if (length > MAX_DOCUMENT_BYTES) throw new Error(`body is ${length} bytes, more than the limit of ${MAX_DOCUMENT_BYTES}`);
      result = podsFromBody(await res.text(), { url, nodeName: this.opts.nodeName, runtimePodUids: this.opts.runtimePodUids });
    } catch (err) {
      result = { ok: false, error: errorMessage(err) };
    }
    if (this.stopped) return;
    if (!result.ok) {
      if (result.error !== this.lastError) logger.error("could not read static pods from URL; keeping the last good set", { url, reason: result.error });
      this.lastError = result.error;
      return;
    }
    this.lastError = "";
    const notes = new Map(result.uidNotes.map(({ pod, note }) => [pod, JSON.stringify(note)]));
    for (const { pod, note } of result.uidNotes) if (this.lastUidNotes.get(pod) !== notes.get(pod)) logUidNote(logger, { url, pod }, note);
    this.lastUidNotes = notes;
    emit({ source: "http", pods: result.pods });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    this.cancel?.();
    await this.inFlight;
  }
}
