/**
 * A crash-safe local store of small JSON documents, one file per (kind, key)
 * under `<rootDir>/checkpoints/<kind>/`: what the agent needs to keep
 * running its pods when it restarts while the API server cannot be reached
 * (desired pods, and later the configMaps, secrets and tokens they use).
 *
 * Each file is an envelope `{version, kind, key, writtenAt, encoding,
 * checksum, payload}`; `checksum` is the sha256 of `payload`, so a
 * truncated or altered file is detected, reported (a warning naming the
 * file) and ignored, never thrown at the caller. Writes are atomic and
 * durable: a temporary file (mode 0600) is written and fsync'd, renamed over
 * the old one and the directory fsync'd, so a crash or power loss leaves the
 * old version or the new one, never half of one.
 *
 * `sensitive: true` (secrets, tokens) encrypts the payload with AES-256-GCM
 * under a node-local key (`checkpoints/.key`, 32 random bytes, 0600, made on
 * first use); the kind and key are the additional authenticated data, so an
 * encrypted file copied under another name does not decrypt.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes as cryptoRandomBytes } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";

export const CHECKPOINT_VERSION = 1;

/** One stored document, as read back and verified. */
export interface Checkpoint<T = unknown> {
  key: string;
  data: T;
  /** When it was written (the injected clock's milliseconds). */
  writtenAt: number;
}

export type ReadResult<T = unknown> =
  | ({ ok: true } & Checkpoint<T>)
  | { ok: false; reason: "missing" }
  /** The file exists but cannot be trusted (truncated, altered, wrong key); `message` says why. */
  | { ok: false; reason: "corrupt"; file: string; message: string };

export interface CheckpointStore {
  /**
   * Replaces the document (kind, key) atomically and durably. Throws a
   * CheckpointError when the disk refuses; the previous version stays.
   */
  write(kind: string, key: string, data: unknown, opts?: { sensitive?: boolean }): void;
  /**
   * Writes several documents of one kind, each as `write` does, with one
   * directory sync for all of them. Throws a CheckpointError naming the
   * first that failed; the ones before it are written.
   */
  writeMany(kind: string, docs: readonly { key: string; data: unknown }[], opts?: { sensitive?: boolean }): void;
  /** Reads and verifies one document; never throws for bad content. */
  read<T = unknown>(kind: string, key: string): ReadResult<T>;
  /** Every valid document of a kind; corrupt ones are reported through the logger and skipped. */
  list<T = unknown>(kind: string): Checkpoint<T>[];
  /** Removes one document; a missing one counts as removed. */
  remove(kind: string, key: string): void;
  /** The keys of a kind that have a file, valid or not. */
  keys(kind: string): string[];
}

/** A write that could not be made durable; carries what was being written. */
export class CheckpointError extends Error {
  constructor(
    readonly op: "write" | "remove",
    readonly kind: string,
    readonly key: string,
    cause: unknown,
  ) {
    super(`checkpoint ${op} ${kind}/${key}: ${errorMessage(cause)}`, { cause });
    this.name = "CheckpointError";
  }
}

interface Envelope {
  version: number;
  kind: string;
  key: string;
  writtenAt: number;
  encoding: "json" | "aes-256-gcm";
  checksum: string;
  payload: string;
}

export interface FileCheckpointStoreOptions {
  /** Usually `<rootDir>/checkpoints`. */
  dir: string;
  clock: Clock;
  logger: Logger;
  /** Injected for deterministic tests; node:crypto's by default. */
  randomBytes?: (n: number) => Buffer;
}

const KIND_RE = /^[a-z0-9][a-z0-9-]*$/;
const TMP_MARK = ".tmp-";

/** A key becomes a file name: `/` and other unsafe characters are percent-encoded. */
function fileNameOf(key: string): string {
  if (key === "" || key.length > 200) throw new Error(`checkpoint key must be 1 to 200 characters, got ${key.length}`);
  return `${encodeURIComponent(key).replace(/\./g, "%2E")}.json`;
}

function keyOfFile(name: string): string | undefined {
  if (!name.endsWith(".json") || name.startsWith(".")) return undefined;
  try {
    return decodeURIComponent(name.slice(0, -".json".length));
  } catch {
    return undefined;
  }
}

const sha256 = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;

export class FileCheckpointStore implements CheckpointStore {
  private key: Buffer | undefined;
  private readonly madeDirs = new Set<string>();
  private readonly randomBytes: (n: number) => Buffer;

  constructor(private readonly opts: FileCheckpointStoreOptions) {
    this.randomBytes = opts.randomBytes ?? cryptoRandomBytes;
  }

  private kindDir(kind: string): string {
    if (!KIND_RE.test(kind)) throw new Error(`checkpoint kind ${JSON.stringify(kind)} must be lowercase letters, digits and dashes`);
    return join(this.opts.dir, kind);
  }

  write(kind: string, key: string, data: unknown, opts: { sensitive?: boolean } = {}): void {
    this.writeMany(kind, [{ key, data }], opts);
  }

  writeMany(kind: string, docs: readonly { key: string; data: unknown }[], opts: { sensitive?: boolean } = {}): void {
    if (docs.length === 0) return;
    const dir = this.kindDir(kind);
    let written = 0;
    let failure: CheckpointError | undefined;
    for (const { key, data } of docs) {
      try {
        const content = this.envelope(kind, key, data, opts);
        const write = () => atomicWrite(dir, fileNameOf(key), content, this.randomBytes(6).toString("hex"));
        this.ensureDir(dir);
        try {
          write();
        } catch (err) {
          // The directory was removed since it was made: make it again, once.
          if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
          this.madeDirs.delete(dir);
          this.ensureDir(dir);
          write();
        }
        written++;
      } catch (err) {
        failure = new CheckpointError("write", kind, key, err);
        break;
      }
    }
    // One directory sync makes every rename above durable.
    if (written > 0) {
      try {
        fsyncDir(dir);
      } catch (err) {
        failure ??= new CheckpointError("write", kind, docs[written - 1]!.key, err);
      }
    }
    if (failure) throw failure;
  }

  private envelope(kind: string, key: string, data: unknown, opts: { sensitive?: boolean }): string {
    const json = JSON.stringify(data);
    if (json === undefined) throw new Error("data is not JSON");
    const payload = opts.sensitive ? this.encrypt(json, `${kind}/${key}`) : json;
    const envelope: Envelope = {
      version: CHECKPOINT_VERSION,
      kind,
      key,
      writtenAt: this.opts.clock.now(),
      encoding: opts.sensitive ? "aes-256-gcm" : "json",
      checksum: sha256(payload),
      payload,
    };
    return JSON.stringify(envelope);
  }

  /** mkdir once per directory, not once per write. */
  private ensureDir(dir: string): void {
    if (this.madeDirs.has(dir)) return;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.madeDirs.add(dir);
  }

  read<T = unknown>(kind: string, key: string): ReadResult<T> {
    const file = join(this.kindDir(kind), fileNameOf(key));
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { ok: false, reason: "missing" };
      return { ok: false, reason: "corrupt", file, message: `cannot read: ${errorMessage(err)}` };
    }
    try {
      return { ok: true, ...this.open<T>(text, kind, key) };
    } catch (err) {
      return { ok: false, reason: "corrupt", file, message: errorMessage(err) };
    }
  }

  list<T = unknown>(kind: string): Checkpoint<T>[] {
    const out: Checkpoint<T>[] = [];
    for (const key of this.keys(kind)) {
      const r = this.read<T>(kind, key);
      if (r.ok) out.push({ key: r.key, data: r.data, writtenAt: r.writtenAt });
      else if (r.reason === "corrupt") this.opts.logger.warn("ignoring corrupt checkpoint", { file: r.file, reason: r.message });
    }
    return out;
  }

  keys(kind: string): string[] {
    const dir = this.kindDir(kind);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    const keys: string[] = [];
    for (const name of names) {
      // Left by a crash between write and rename: never the current version.
      if (name.includes(TMP_MARK)) {
        rmSync(join(dir, name), { force: true });
        continue;
      }
      const key = keyOfFile(name);
      if (key !== undefined) keys.push(key);
    }
    return keys.sort();
  }

  remove(kind: string, key: string): void {
    try {
      const dir = this.kindDir(kind);
      rmSync(join(dir, fileNameOf(key)), { force: true });
      fsyncDir(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw new CheckpointError("remove", kind, key, err);
    }
  }

  /** Parses and verifies an envelope; throws an Error saying what is wrong. */
  private open<T>(text: string, kind: string, key: string): Checkpoint<T> {
    let envelope: Partial<Envelope>;
    try {
      envelope = JSON.parse(text) as Partial<Envelope>;
    } catch {
      throw new Error(`not a complete JSON envelope (${text.length} bytes; truncated?)`);
    }
    if (envelope === null || typeof envelope !== "object") throw new Error("envelope is not an object");
    if (envelope.version !== CHECKPOINT_VERSION) throw new Error(`unsupported version ${JSON.stringify(envelope.version)}`);
    if (envelope.kind !== kind || envelope.key !== key) throw new Error(`envelope names ${envelope.kind}/${envelope.key}, expected ${kind}/${key}`);
    if (typeof envelope.payload !== "string" || typeof envelope.writtenAt !== "number") throw new Error("envelope lacks payload or writtenAt");
    if (envelope.checksum !== sha256(envelope.payload)) throw new Error("checksum mismatch");
    let json: string;
    if (envelope.encoding === "json") json = envelope.payload;
    else if (envelope.encoding === "aes-256-gcm") json = this.decrypt(envelope.payload, `${kind}/${key}`);
    else throw new Error(`unknown encoding ${JSON.stringify(envelope.encoding)}`);
    return { key, data: JSON.parse(json) as T, writtenAt: envelope.writtenAt };
  }

  private encrypt(plain: string, aad: string): string {
    const iv = this.randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.nodeKey(), iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64");
  }

  private decrypt(payload: string, aad: string): string {
    const raw = Buffer.from(payload, "base64");
    if (raw.length < 28) throw new Error("encrypted payload too short");
    const decipher = createDecipheriv("aes-256-gcm", this.nodeKey(), raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(raw.subarray(12, 28));
    try {
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
    } catch {
      throw new Error("cannot decrypt with this node's key (key replaced, or the file was altered)");
    }
  }

  /** The node-local key; made (0600, atomically) on first use. */
  private nodeKey(): Buffer {
    if (this.key) return this.key;
    const file = join(this.opts.dir, ".key");
    try {
      const existing = readFileSync(file);
      if (existing.length !== 32) throw new Error(`${file} holds ${existing.length} bytes, expected 32`);
      this.key = existing;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      mkdirSync(this.opts.dir, { recursive: true, mode: 0o700 });
      const fresh = this.randomBytes(32);
      atomicWrite(this.opts.dir, ".key", fresh, this.randomBytes(6).toString("hex"));
      fsyncDir(this.opts.dir);
      this.key = fresh;
    }
    return this.key;
  }
}

/** Write temp (0600), fsync it, rename over `name`; the caller syncs the directory. */
function atomicWrite(dir: string, name: string, content: string | Buffer, suffix: string): void {
  const tmp = join(dir, `.${name}${TMP_MARK}${suffix}`);
  const fd = openSync(tmp, "wx", 0o600);
  try {
    const buf = typeof content === "string" ? Buffer.from(content) : content;
    for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, join(dir, name));
}

function fsyncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
