/**
 * An in-memory CheckpointStore for unit tests: holds real state, records
 * writes, and can be told that a document is corrupt or that the disk fails.
 */
import type { Checkpoint, CheckpointStore, ReadResult } from "./store.ts";
import { CheckpointError } from "./store.ts";
import type { Clock } from "../util/clock.ts";

export class FakeCheckpointStore implements CheckpointStore {
  private readonly docs = new Map<string, { data: string; writtenAt: number; sensitive: boolean } | "corrupt">();
  /** Every successful write, in order: `kind/key`. */
  readonly writes: string[] = [];
  /** When set, writes throw this (a full or read-only disk). */
  failWrites: Error | undefined;

  constructor(private readonly clock: Clock) {}

  write(kind: string, key: string, data: unknown, opts: { sensitive?: boolean } = {}): void {
    if (this.failWrites) throw new CheckpointError("write", kind, key, this.failWrites);
    this.docs.set(`${kind}/${key}`, { data: JSON.stringify(data), writtenAt: this.clock.now(), sensitive: opts.sensitive ?? false });
    this.writes.push(`${kind}/${key}`);
  }

  writeMany(kind: string, docs: readonly { key: string; data: unknown }[], opts: { sensitive?: boolean } = {}): void {
    for (const { key, data } of docs) this.write(kind, key, data, opts);
  }

  read<T = unknown>(kind: string, key: string): ReadResult<T> {
    const doc = this.docs.get(`${kind}/${key}`);
    if (!doc) return { ok: false, reason: "missing" };
    if (doc === "corrupt") return { ok: false, reason: "corrupt", file: `fake:${kind}/${key}`, message: "checksum mismatch" };
    return { ok: true, key, data: JSON.parse(doc.data) as T, writtenAt: doc.writtenAt };
  }

  list<T = unknown>(kind: string): Checkpoint<T>[] {
    return this.keys(kind).flatMap((key) => {
      const r = this.read<T>(kind, key);
      return r.ok ? [{ key, data: r.data, writtenAt: r.writtenAt }] : [];
    });
  }

  remove(kind: string, key: string): void {
    this.docs.delete(`${kind}/${key}`);
  }

  keys(kind: string): string[] {
    const prefix = `${kind}/`;
    return [...this.docs.keys()]
      .filter((k) => k.startsWith(prefix))
      .map((k) => k.slice(prefix.length))
      .sort();
  }

  /** Whether the document was written as sensitive (the file store encrypts those). */
  isSensitive(kind: string, key: string): boolean {
    const doc = this.docs.get(`${kind}/${key}`);
    return doc !== undefined && doc !== "corrupt" && doc.sensitive;
  }

  /** Test hook: the document's file no longer verifies. */
  corrupt(kind: string, key: string): void {
    this.docs.set(`${kind}/${key}`, "corrupt");
  }
}
