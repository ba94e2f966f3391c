/**
 * The static pod source: a file or a directory of YAML/JSON manifests,
 * watched with fs.watch and rescanned every `fileCheckFrequency` because
 * watch events can be lost or coalesced. A bad file is reported by name and
 * skipped; the other files' pods still run.
 */
import { readdirSync, readFileSync, statSync, watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../util/clock.ts";
import { decodeDocuments } from "../util/decode.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { podResourceErrors, invalidPodMessage } from "./resource-validation.ts";
import { parsePod, type Pod } from "../pods/schema.ts";
import { applyStaticPodDefaults, logUidNote, type StaticUidNote } from "./defaults.ts";
import type { PodSource, SourceSnapshot } from "./types.ts";
import { podFullName } from "../pods/identity.ts";

export interface FileProblem {
  file: string;
  reason: string;
}

export interface FileSourceOptions {
  path: string;
  nodeName: string;
  checkFrequencyMs: number;
  clock: Clock;
  logger: Logger;
  /** Pod UIDs the runtime had sandboxes for at startup (a pod running under this agent's earlier UID rule keeps it). */
  runtimePodUids?: ReadonlySet<string>;
  /** Called for each file that cannot be turned into a pod. */
  onProblem?: (problem: FileProblem) => void;
}

export interface ScanResult {
  pods: Pod[];
  problems: FileProblem[];
  /** Files whose pod UID is not upstream's, and why. */
  uidNotes: { file: string; note: StaticUidNote }[];
}

/** Reads every manifest under `path`; pure apart from the reads. */
export function scanManifests(path: string, nodeName: string, runtimePodUids?: ReadonlySet<string>): ScanResult {
  const problems: FileProblem[] = [];
  const uidNotes: ScanResult["uidNotes"] = [];
  let files: string[];
  try {
    const stat = statSync(path);
    files = stat.isDirectory()
      ? readdirSync(path)
          .filter((name) => !name.startsWith(".")) // upstream ignores hidden files (editor swap files)
          .sort()
          .map((name) => join(path, name))
      : [path];
  } catch (err) {
    // A missing directory is normal before the operator creates it.
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { pods: [], problems, uidNotes };
    return { pods: [], problems: [{ file: path, reason: errorMessage(err) }], uidNotes };
  }
  const pods: Pod[] = [];
  const seenNames = new Map<string, string>();
  for (const file of files) {
    const result = readManifest(file, nodeName, runtimePodUids);
    if (!result.ok) {
      if (result.error) problems.push({ file, reason: result.error });
      continue;
    }
    const fullName = podFullName(result.pod);
    const other = seenNames.get(fullName);
    if (other) {
      problems.push({ file, reason: `pod "${fullName}" is already defined in ${other}` });
      continue;
    }
    seenNames.set(fullName, file);
    pods.push(result.pod);
    if (result.uidNote) uidNotes.push({ file, note: result.uidNote });
  }
  return { pods, problems, uidNotes };
}

type ReadResult = { ok: true; pod: Pod; uidNote?: StaticUidNote } | { ok: false; error?: string };

function readManifest(file: string, nodeName: string, runtimePodUids?: ReadonlySet<string>): ReadResult {
  let text: string;
  try {
    if (!statSync(file).isFile()) return { ok: false };
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { ok: false }; // removed while scanning
    return { ok: false, error: errorMessage(err) };
  }
  return parseManifest(text, { file, nodeName, runtimePodUids });
}

/** One manifest file's text to a static pod (defaults applied), or why not; pure, so it is fuzzed. */
export function parseManifest(
  text: string,
  opts: { file: string; nodeName: string; runtimePodUids?: ReadonlySet<string> },
): { ok: true; pod: Pod; uidNote?: StaticUidNote } | { ok: false; error: string } {
  if (text.trim() === "") return { ok: false, error: "file is empty" };
  let docs: unknown[];
  try {
    docs = decodeDocuments(text);
  } catch (err) {
    return { ok: false, error: errorMessage(err) };
  }
  if (docs.length !== 1) return { ok: false, error: `expected one Pod document, found ${docs.length}` };
  const parsed = parsePod(docs[0]);
  if (!parsed.ok) return { ok: false, error: parsed.error };
  // What the API server would refuse (upstream validates every static pod it decodes): resources that cannot be overcommitted.
  const invalid = podResourceErrors(parsed.value);
  if (invalid.length) return { ok: false, error: invalidPodMessage(invalid) };
  let uidNote: StaticUidNote | undefined;
  const pod = applyStaticPodDefaults(parsed.value, {
    nodeName: opts.nodeName,
    source: "file",
    location: opts.file,
    manifest: docs[0],
    runtimePodUids: opts.runtimePodUids,
    onUidNote: (note) => (uidNote = note),
  });
  return uidNote ? { ok: true, pod, uidNote } : { ok: true, pod };
}

export class FileSource implements PodSource {
  readonly name = "file" as const;
  private watcher: FSWatcher | undefined;
  private cancelTimer: (() => void) | undefined;
  private debounce: (() => void) | undefined;
  private lastProblems = new Map<string, string>();
  private lastUidNotes = new Map<string, string>();
  private stopped = false;
  private onChange: () => void = () => {};

  constructor(private readonly opts: FileSourceOptions) {}

  start(emit: (snapshot: SourceSnapshot) => void): void {
    const rescan = () => {
      if (this.stopped) return;
      const { pods, problems, uidNotes } = scanManifests(this.opts.path, this.opts.nodeName, this.opts.runtimePodUids);
      this.report(problems);
      this.reportUids(uidNotes);
      emit({ source: "file", pods });
      // The directory may have appeared since the last scan.
      if (!this.watcher) this.watch();
    };
    this.onChange = () => {
      // Editors write in several steps; coalesce a burst into one rescan.
      this.debounce?.();
      this.debounce = this.opts.clock.setTimer(100, rescan);
    };
    rescan();
    const periodic = () => {
      rescan();
      this.cancelTimer = this.opts.clock.setTimer(this.opts.checkFrequencyMs, periodic);
    };
    this.cancelTimer = this.opts.clock.setTimer(this.opts.checkFrequencyMs, periodic);
  }

  private watch(): void {
    try {
      this.watcher = watch(this.opts.path, { persistent: false }, () => this.onChange());
      this.watcher.on("error", (err) => {
        this.opts.logger.warn("static pod path watch failed; relying on periodic rescans", { path: this.opts.path, err });
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch {
      // The path may not exist yet; the periodic rescan retries.
    }
  }

  /** Logs each problem once, not on every rescan, until the file changes. */
  private report(problems: FileProblem[]): void {
    const current = new Map(problems.map((p) => [p.file, p.reason]));
    for (const p of problems) {
      if (this.lastProblems.get(p.file) === p.reason) continue;
      this.opts.logger.error("could not process manifest file", { path: p.file, reason: p.reason });
      this.opts.onProblem?.(p);
    }
    this.lastProblems = current;
  }

  /** Logs once per file and change why its pod's UID is not the upstream kubelet's. */
  private reportUids(notes: ScanResult["uidNotes"]): void {
    const current = new Map(notes.map(({ file, note }) => [file, JSON.stringify(note)]));
    for (const { file, note } of notes) {
      if (this.lastUidNotes.get(file) === current.get(file)) continue;
      logUidNote(this.opts.logger, { path: file }, note);
    }
    this.lastUidNotes = current;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stopped = true;
    this.watcher?.close();
    this.cancelTimer?.();
    this.debounce?.();
  }
}
