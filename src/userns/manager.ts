/**
 * User namespaces for pods with `spec.hostUsers: false`, as upstream's
 * pkg/kubelet/userns: the node's ID range (the "kubelet" user's subordinate
 * IDs, or 65536..2^32 by default) is cut into slots of idsPerPod; each such pod
 * gets one slot, mapped as container 0 → host first ID for idsPerPod IDs, the
 * same for UIDs and GIDs. The mapping is written to the pod's directory
 * (`<rootDir>/pods/<uid>/userns`, upstream's JSON) so a restarted agent reads
 * it back and keeps it; a release frees the slot and removes the file.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { posix } from "node:path";

/** Upstream userNsUnitLength: idsPerPod and the range are multiples of it. */
export const USERNS_UNIT = 65536;
/** Upstream's default range without subordinate IDs for "kubelet": every ID from 65536 up. */
export const DEFAULT_RANGE = { firstId: USERNS_UNIT, length: 2 ** 32 - USERNS_UNIT } as const;
/** The file in the pod's directory (upstream mappingsFile). */
export const MAPPINGS_FILE = "userns";

export interface IdMapping {
  hostId: number;
  containerId: number;
  length: number;
}

export class UserNamespaceError extends Error {
  override name = "UserNamespaceError";
}

export interface UserNamespaceOptions {
  /** The node's range (subordinate IDs of "kubelet", or DEFAULT_RANGE). */
  range: { firstId: number; length: number };
  /** userNamespaces.idsPerPod (validated at start). */
  idsPerPod: number;
  maxPods: number;
  /** <rootDir>/pods/<uid> */
  podDir(uid: string): string;
  /** <rootDir>/pods, read at start for the mappings written before a restart. */
  podsRoot: string;
  /** [0, 1): where the scan for a free slot starts, as upstream's random-scan allocator. */
  random: () => number;
}

/** Upstream MakeUserNsManager's checks of the range against idsPerPod and maxPods; the messages are upstream's. */
function checkRange(o: UserNamespaceOptions): void {
  const { firstId, length } = o.range;
  const n = o.idsPerPod;
  if (n % USERNS_UNIT !== 0) throw new UserNamespaceError(`kubelet user namespace length ${n} is not a multiple of ${USERNS_UNIT}`);
  if (firstId % n !== 0) throw new UserNamespaceError(`kubelet user assigned ID ${firstId} is not a multiple of ${n}`);
  if (firstId < n) throw new UserNamespaceError(`kubelet user assigned ID ${firstId} must be greater or equal to ${n}`);
  if (length % n !== 0) throw new UserNamespaceError(`kubelet user assigned IDs length ${length} is not a multiple of ${n}`);
  if (Math.floor(length / n) < o.maxPods) throw new UserNamespaceError(`kubelet user assigned IDs are not enough to support ${o.maxPods} pods`);
}

export class UserNamespaceManager {
  private readonly off: number;
  private readonly slots: number;
  private readonly used = new Set<number>();
  private readonly usedBy = new Map<string, number>();

  /** Throws UserNamespaceError on a range that does not fit, or a mappings file on disk that cannot be read back. */
  constructor(private readonly o: UserNamespaceOptions) {
    checkRange(o);
    this.off = o.range.firstId / o.idsPerPod;
    this.slots = o.range.length / o.idsPerPod;
    let uids: string[] = [];
    try {
      uids = readdirSync(o.podsRoot);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    for (const uid of uids) {
      const content = this.read(uid);
      if (content) this.parseAndRecord(uid, content, "record pod mappings");
    }
  }

  /** The pod's mapping: the one on disk (kept across restarts), or a new slot written there. */
  mappingsFor(uid: string): { uids: IdMapping[]; gids: IdMapping[] } {
    const content = this.read(uid);
    const m = content ? this.parseAndRecord(uid, content, "user namespace") : this.create(uid);
    return { uids: [{ ...m }], gids: [{ ...m }] };
  }

  /** Frees the pod's slot and removes its mappings file (upstream Release). */
  release(uid: string): void {
    const from = this.usedBy.get(uid);
    if (from === undefined) return;
    this.usedBy.delete(uid);
    rmSync(posix.join(this.o.podDir(uid), MAPPINGS_FILE), { force: true });
    this.used.delete(from / this.o.idsPerPod - this.off);
  }

  /**
   * upstream CleanupOrphanedPodUsernsAllocations (housekeeping): a pod
   * directory on disk whose pod is not `known` (not wanted by a source, not
   * running) has its slot released, and so has a slot whose pod has no
   * directory any more. Returns the released pods.
   */
  cleanupOrphans(known: (uid: string) => boolean): string[] {
    // Only a held slot can be released: with none (no pod asked for a user namespace), reading the pods directory
    // every housekeeping pass (2 s) would find nothing to do.
    if (this.usedBy.size === 0) return [];
    let found: string[];
    try {
      found = readdirSync(this.o.podsRoot, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new UserNamespaceError(`user namespace: read pods from disk: ${(err as Error).message}`);
      found = [];
    }
    const released: string[] = [];
    for (const uid of found) {
      if (known(uid) || !this.usedBy.has(uid)) continue;
      this.release(uid);
      released.push(uid);
    }
    const onDisk = new Set(found);
    for (const uid of [...this.usedBy.keys()]) {
      if (onDisk.has(uid)) continue;
      this.release(uid);
      released.push(uid);
    }
    return released;
  }

  /** Pods holding a slot now. */
  allocated(): ReadonlyMap<string, number> {
    return this.usedBy;
  }

  private read(uid: string): string {
    try {
      return readFileSync(posix.join(this.o.podDir(uid), MAPPINGS_FILE), "utf8");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return "";
      throw err;
    }
  }

  private create(uid: string): IdMapping {
    const index = this.allocateNext();
    if (index === undefined) throw new UserNamespaceError("create user namespace: could not find an empty slot to allocate a user namespace");
    const hostId = (index + this.off) * this.o.idsPerPod;
    this.used.add(index);
    this.usedBy.set(uid, hostId);
    const m: IdMapping = { hostId, containerId: 0, length: this.o.idsPerPod };
    try {
      const dir = this.o.podDir(uid);
      mkdirSync(dir, { recursive: true, mode: 0o750 });
      // Upstream's file store writes a temporary file and renames it.
      const tmp = posix.join(dir, `.${MAPPINGS_FILE}.tmp`);
      writeFileSync(tmp, JSON.stringify({ uidMappings: [m], gidMappings: [m] }), { mode: 0o644 });
      renameSync(tmp, posix.join(dir, MAPPINGS_FILE));
    } catch (err) {
      this.release(uid);
      throw new UserNamespaceError(`create user namespace: ${(err as Error).message}`);
    }
    return m;
  }

  /** Upstream's random-scan bitmap: from a random slot, the first free one, wrapping. */
  private allocateNext(): number | undefined {
    if (this.used.size >= this.slots) return undefined;
    const start = Math.floor(this.o.random() * this.slots) % this.slots;
    for (let i = 0; i < this.slots; i++) {
      const index = (start + i) % this.slots;
      if (!this.used.has(index)) return index;
    }
    return undefined;
  }

  /** Upstream parseUserNsFileAndRecord + record; errors carry its messages behind `prefix`. */
  private parseAndRecord(uid: string, content: string, prefix: string): IdMapping {
    const fail = (msg: string): never => {
      throw new UserNamespaceError(`${prefix}: ${msg}`);
    };
    let parsed: { uidMappings?: unknown; gidMappings?: unknown };
    try {
      parsed = JSON.parse(content);
    } catch (err) {
      return fail(`invalid user namespace mappings file: ${(err as Error).message}`);
    }
    const uids = Array.isArray(parsed?.uidMappings) ? (parsed.uidMappings as Partial<IdMapping>[]) : [];
    const gids = Array.isArray(parsed?.gidMappings) ? (parsed.gidMappings as Partial<IdMapping>[]) : [];
    if (uids.length !== 1) fail("invalid user namespace configuration: no more than one mapping allowed.");
    if (uids.length !== gids.length) fail("invalid user namespace configuration: GID and UID mappings should be identical.");
    const u = { hostId: uids[0]!.hostId ?? 0, containerId: uids[0]!.containerId ?? 0, length: uids[0]!.length ?? 0 };
    const g = { hostId: gids[0]!.hostId ?? 0, containerId: gids[0]!.containerId ?? 0, length: gids[0]!.length ?? 0 };
    if (u.hostId !== g.hostId || u.containerId !== g.containerId || u.length !== g.length) fail("invalid user namespace configuration: GID and UID mapping should be identical");
    if (u.containerId !== 0) fail("invalid user namespace configuration: UID 0 must be mapped");
    const n = this.o.idsPerPod;
    if (u.length !== n) fail(`wrong user namespace length ${u.length}`);
    if (u.hostId % n !== 0) fail(`wrong user namespace offset specified ${u.hostId}`);
    const prev = this.usedBy.get(uid);
    if (prev !== undefined && prev !== u.hostId) fail(`different user namespace range already used by pod "${uid}"`);
    const index = u.hostId / n - this.off;
    if (index < 0 || index >= this.slots) fail(`id ${u.hostId} is out of range`);
    if (prev === undefined && this.used.has(index)) fail(`range picked for pod "${uid}" already taken`);
    this.used.add(index);
    this.usedBy.set(uid, u.hostId);
    return u;
  }
}

/** Where the "kubelet" user and its subordinate ID ranges are read: the host's files (`hostIdFiles`), or a test's. */
export interface IdFiles {
  /** The file's content; undefined when it cannot be read (no such file: no ranges). */
  read(path: string): string | undefined;
}

/** The host's /etc/passwd, /etc/subuid and /etc/subgid. */
export const hostIdFiles: IdFiles = {
  read(path) {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return undefined;
    }
  },
};

/**
 * Upstream getKubeletMappings, reading the subordinate ID files getsubids
 * reads: no "kubelet" user in /etc/passwd gives DEFAULT_RANGE; a "kubelet"
 * user needs exactly one range, the same in subuid and subgid.
 */
export function kubeletMappings(files: { passwd: string; subuid: string; subgid: string }, idFiles: IdFiles): { firstId: number; length: number } {
  const passwd = idFiles.read(files.passwd) ?? "";
  if (!passwd.split("\n").some((l) => l.split(":")[0] === "kubelet")) return DEFAULT_RANGE;
  const entries = (path: string) =>
    (idFiles.read(path) ?? "")
      .split("\n")
      .map((l) => l.trim().split(":"))
      .filter((p) => p[0] === "kubelet" && p.length === 3);
  const uids = entries(files.subuid);
  const gids = entries(files.subgid);
  if (uids.length !== 1) throw new UserNamespaceError(`error retrieving additional uids for user "kubelet": ${uids.length} ranges in ${files.subuid}, want one`);
  if (gids.length !== 1 || gids[0]!.join(":") !== uids[0]!.join(":")) throw new UserNamespaceError(`mismatched subuids and subgids for user "kubelet"`);
  const firstId = Number(uids[0]![1]);
  const length = Number(uids[0]![2]);
  if (!Number.isInteger(firstId) || !Number.isInteger(length) || firstId < 0 || length < 0 || firstId > 2 ** 32 - 1 || length > 2 ** 32 - 1)
    throw new UserNamespaceError(`invalid line "${uids[0]!.join(":")}" in ${files.subuid}`);
  return { firstId, length };
}
