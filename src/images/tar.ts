/**
 * Reads the table of contents of a tar file (ustar, GNU long names, PAX
 * path records) without loading its contents: image tarballs can be larger
 * than an edge node's free memory, so blobs are streamed from their offsets.
 */
import { closeSync, openSync, readSync } from "node:fs";

export interface TarEntry {
  name: string;
  /** Byte offset of the entry's data in the file. */
  offset: number;
  size: number;
  type: "file" | "dir" | "other";
}

export class TarError extends Error {
  override readonly name = "TarError";
}

const BLOCK = 512;

function field(block: Uint8Array, start: number, length: number): string {
  const bytes = block.subarray(start, start + length);
  const end = bytes.indexOf(0);
  return new TextDecoder().decode(end < 0 ? bytes : bytes.subarray(0, end));
}

function octal(block: Uint8Array, start: number, length: number, what: string): number {
  // GNU base-256 for sizes of 8 GiB and more: high bit of the first byte set.
  if (block[start]! & 0x80) {
    let n = 0;
    for (let i = start + 1; i < start + length; i++) n = n * 256 + block[i]!;
    return n;
  }
  const text = field(block, start, length).trim();
  if (text === "") return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarError(`invalid ${what} field ${JSON.stringify(text)}`);
  return parseInt(text, 8);
}

function checksumOk(block: Uint8Array): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : block[i]!;
  try {
    return sum === octal(block, 148, 8, "checksum");
  } catch {
    return false; // not even a number where the checksum goes: not a tar header
  }
}

/** PAX extended header records: "<len> key=value\n". */
function paxPath(data: Uint8Array): string | undefined {
  const text = new TextDecoder().decode(data);
  for (const line of text.split("\n")) {
    const m = /^\d+ path=(.*)$/.exec(line);
    if (m) return m[1];
  }
  return undefined;
}

/** Lists the entries of the tar file at `path`; throws TarError for a file that is not a tar or is truncated. */
export function readTarIndex(path: string): TarEntry[] {
  const fd = openSync(path, "r");
  try {
    const entries: TarEntry[] = [];
    const header = new Uint8Array(BLOCK);
    let at = 0;
    let longName: string | undefined;
    for (;;) {
      const n = readSync(fd, header, 0, BLOCK, at);
      if (n === 0) break; // no end-of-archive blocks: accepted, as GNU tar does
      if (n < BLOCK) throw new TarError(`truncated header at byte ${at}`);
      if (header.every((b) => b === 0)) break;
      if (!checksumOk(header)) throw new TarError(`bad header checksum at byte ${at} (not a tar file, or corrupt)`);
      const size = octal(header, 124, 12, "size");
      const typeflag = String.fromCharCode(header[156]!);
      const dataAt = at + BLOCK;
      const next = dataAt + Math.ceil(size / BLOCK) * BLOCK;
      const readData = () => {
        const data = new Uint8Array(size);
        if (readSync(fd, data, 0, size, dataAt) < size) throw new TarError(`truncated entry at byte ${dataAt}`);
        return data;
      };
      if (typeflag === "L") {
        longName = field(readData(), 0, size);
      } else if (typeflag === "x") {
        longName = paxPath(readData()) ?? longName;
      } else if (typeflag === "g") {
        // global PAX header: nothing we need
      } else {
        const prefix = field(header, 345, 155);
        const name = longName ?? (prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100));
        longName = undefined;
        const type = typeflag === "0" || typeflag === "\0" || typeflag === "7" ? "file" : typeflag === "5" ? "dir" : "other";
        entries.push({ name: name.replace(/^\.\//, ""), offset: dataAt, size, type });
        if (type === "file") {
          // The data must be there: a truncated blob is found now, not halfway through an import.
          const probe = new Uint8Array(1);
          if (size > 0 && readSync(fd, probe, 0, 1, dataAt + size - 1) < 1) throw new TarError(`truncated entry ${name}`);
        }
      }
      at = next;
    }
    return entries;
  } finally {
    closeSync(fd);
  }
}

/** Reads a (small) entry whole: index.json, manifests, configs. */
export function readEntry(path: string, entry: TarEntry, maxBytes = 16 * 1024 * 1024): Uint8Array {
  if (entry.size > maxBytes) throw new TarError(`${entry.name} is ${entry.size} bytes, more than the ${maxBytes} expected`);
  const fd = openSync(path, "r");
  try {
    const data = new Uint8Array(entry.size);
    if (readSync(fd, data, 0, entry.size, entry.offset) < entry.size) throw new TarError(`truncated entry ${entry.name}`);
    return data;
  } finally {
    closeSync(fd);
  }
}

/**
 * Streams an entry's data in chunks (large layers). 32 KiB, as containerd's own
 * client writes content (io.Copy's buffer): each gRPC message then fits in an
 * HTTP/2 stream's initial 64 KiB window instead of waiting on window updates
 * in the middle of one.
 */
export async function* entryChunks(path: string, entry: TarEntry, chunkBytes = 32 * 1024): AsyncGenerator<Uint8Array> {
  const fd = openSync(path, "r");
  try {
    for (let done = 0; done < entry.size; ) {
      const chunk = new Uint8Array(Math.min(chunkBytes, entry.size - done));
      const n = readSync(fd, chunk, 0, chunk.length, entry.offset + done);
      if (n <= 0) throw new TarError(`truncated entry ${entry.name}`);
      done += n;
      yield n === chunk.length ? chunk : chunk.subarray(0, n);
    }
  } finally {
    closeSync(fd);
  }
}
