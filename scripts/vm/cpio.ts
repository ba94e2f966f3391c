/**
 * A writer for the "newc" cpio format the kernel unpacks as initramfs
 * (Documentation/driver-api/early-userspace/buffer-format.rst). Written
 * here rather than piping to cpio(1): no extra package, and the output is
 * byte-for-byte reproducible (mtime 0, inode numbers by order), so it can
 * be cached by its inputs. Uncompressed, because decompressing ~100 MB
 * under qemu's software emulation costs seconds.
 */
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";

export type CpioEntry =
  | { type: "dir"; path: string; mode?: number }
  | { type: "file"; path: string; mode?: number; source: string }
  | { type: "data"; path: string; mode?: number; data: string | Uint8Array }
  | { type: "symlink"; path: string; target: string }
  | { type: "chardev"; path: string; major: number; minor: number; mode?: number };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const S_IFCHR = 0o020000;

const hex8 = (n: number) => n.toString(16).padStart(8, "0");
const pad4 = (n: number) => (4 - (n % 4)) % 4;
const enc = new TextEncoder();

function header(fields: { ino: number; mode: number; nlink: number; size: number; rdevMajor: number; rdevMinor: number; name: string }): Uint8Array {
  const name = enc.encode(fields.name + "\0");
  const h = "070701" + [fields.ino, fields.mode, 0, 0, fields.nlink, 0, fields.size, 0, 0, fields.rdevMajor, fields.rdevMinor, name.length, 0].map(hex8).join("");
  const out = new Uint8Array(h.length + name.length + pad4(h.length + name.length));
  out.set(enc.encode(h), 0);
  out.set(name, h.length);
  return out;
}

/** Writes `entries` (parents before children; paths without a leading "/") to `outPath`. */
export function writeCpio(outPath: string, entries: CpioEntry[]): void {
  const fd = openSync(outPath, "w");
  try {
    let ino = 1;
    const put = (b: Uint8Array) => {
      for (let off = 0; off < b.length; ) off += writeSync(fd, b, off, b.length - off);
    };
    for (const e of entries) {
      const name = e.path.replace(/^\/+/, "");
      let mode: number;
      let data: Uint8Array = new Uint8Array(0);
      let rdevMajor = 0;
      let rdevMinor = 0;
      switch (e.type) {
        case "dir":
          mode = S_IFDIR | (e.mode ?? 0o755);
          break;
        case "file":
          mode = S_IFREG | (e.mode ?? 0o644);
          data = readFileSync(e.source);
          break;
        case "data":
          mode = S_IFREG | (e.mode ?? 0o644);
          data = typeof e.data === "string" ? enc.encode(e.data) : e.data;
          break;
        case "symlink":
          mode = S_IFLNK | 0o777;
          data = enc.encode(e.target);
          break;
        case "chardev":
          mode = S_IFCHR | (e.mode ?? 0o600);
          rdevMajor = e.major;
          rdevMinor = e.minor;
          break;
      }
      put(header({ ino: ino++, mode, nlink: e.type === "dir" ? 2 : 1, size: data.length, rdevMajor, rdevMinor, name }));
      put(data);
      put(new Uint8Array(pad4(data.length)));
    }
    put(header({ ino: 0, mode: 0, nlink: 1, size: 0, rdevMajor: 0, rdevMinor: 0, name: "TRAILER!!!" }));
  } finally {
    closeSync(fd);
  }
}
