/**
 * The volume manager (upstream pkg/kubelet/volumemanager plus the volume
 * plugins this agent has): sets up a pod's volumes below
 * <rootDir>/pods/<uid>/volumes/<plugin>/<name>, refreshes the ones that
 * project API objects on every sync, hands each container its mounts, and
 * removes it all once the pod's containers are gone. Everything is
 * idempotent and found again on disk, so a restarted agent reuses the
 * volumes of the pods it adopts.
 */
import { existsSync, mkdirSync, chmodSync, readdirSync, rmSync } from "node:fs";
import { Mount, MountPropagation } from "../cri/index.ts";
import type { PodObjects } from "../api/objects.ts";
import { podLimits } from "../cgroups/resources.ts";
import { intValue } from "../cgroups/values.ts";
import { podDirs, type PodDirs } from "../pods/dirs.ts";
import type { ContainerSpec, Pod } from "../pods/schema.ts";
import type { VolumeMountSpec, VolumeSpec } from "../pods/volume-schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import { writeAtomically, type Payload } from "./atomic-writer.ts";
import { checkHostPathType } from "./host-path.ts";
import { VolumeMountError, VolumeSetupError, type ClaimedVolume, type MeasuredVolume, type VolumeFailure, type VolumeManager } from "./index.ts";
import type { Mounter } from "./mount.ts";
import { setVolumeOwnership, type FsGroupChangePolicy } from "./ownership.ts";
import { configMapBytes, configMapMissingKey, DEFAULT_MODE, projectDownwardAPI, projectKeys, secretBytes, secretMissingKey } from "./projection.ts";
import type { DownwardApiAllocatable } from "../cgroups/downward-api.ts";
import { prepareSubPath } from "./subpath.ts";
import { hugePageVolumeSize, hugetlbfsPageSizeOption, isHugePageMedium } from "./hugepages.ts";
import type { TokenSource } from "./token.ts";
import { expand } from "../pods/expansion.ts";
import { podUid } from "../pods/identity.ts";
import { usedVolumeNames } from "../pods/spec.ts";
import { resolveClaim, type ClaimVolume } from "./claims.ts";
import type { KubeApi } from "../api/index.ts";
import type { CsiVolumes } from "./csi.ts";

export interface VolumeManagerOptions {
  rootDir: string;
  mounter: Mounter;
  /** configMaps and secrets (a watched cache in cluster mode). */
  objects: PodObjects;
  /** Service account tokens; without it (standalone) a serviceAccountToken projection fails. */
  tokens?: TokenSource;
  /** Defaults for downwardAPI limits and the size of memory-backed volumes. */
  node: DownwardApiAllocatable;
  clock: Clock;
  logger: Logger;
  /** The agent's pid (subPath bind mounts come from /proc/<pid>/fd). */
  pid?: number;
  random?: () => number;
  /** PersistentVolumeClaims and their PersistentVolumes (cluster mode); without it such volumes fail. */
  claims?: KubeApi;
  /** This node's name and labels, for a local PersistentVolume's node affinity. */
  nodeIdentity?: { name: string; labels: Record<string, string> };
  /** The CSI volume plugin; without it csi volumes fail with why. */
  csi?: CsiVolumes;
}

type Kind = "emptyDir" | "hostPath" | "configMap" | "secret" | "downwardAPI" | "projected" | "persistentVolumeClaim" | "ephemeral" | "csi";

/** Upstream plugin names: the directory of a volume is volumes/<plugin with ~>/<name>. */
const PLUGIN: Record<Exclude<Kind, "hostPath" | "persistentVolumeClaim" | "ephemeral" | "csi">, string> = {
  emptyDir: "kubernetes.io/empty-dir",
  configMap: "kubernetes.io/configmap",
  secret: "kubernetes.io/secret",
  downwardAPI: "kubernetes.io/downward-api",
  projected: "kubernetes.io/projected",
};

interface Location {
  kind: Kind;
  /** What the container's mount binds. */
  hostPath: string;
  /** configMap, secret, downwardAPI and projected are always read-only in containers (CVE-2017-1002102). */
  readOnly: boolean;
}

const KINDS: Kind[] = ["emptyDir", "hostPath", "configMap", "secret", "downwardAPI", "projected", "persistentVolumeClaim", "ephemeral", "csi"];

function fsGroupOf(pod: Pod): { fsGroup?: number; policy?: FsGroupChangePolicy } {
  const sc = (pod.spec.securityContext ?? {}) as { fsGroup?: unknown; fsGroupChangePolicy?: unknown };
  return {
    ...(typeof sc.fsGroup === "number" && Number.isInteger(sc.fsGroup) ? { fsGroup: sc.fsGroup } : {}),
    ...(sc.fsGroupChangePolicy === "OnRootMismatch" || sc.fsGroupChangePolicy === "Always" ? { policy: sc.fsGroupChangePolicy } : {}),
  };
}

/**
 * Upstream FsUserFrom (pkg/volume/util/util.go): the uid every container
 * runs as (its own runAsUser, else the pod's), when they all name the same.
 */
function fsUserOf(pod: Pod): number | undefined {
  const podUser = (pod.spec.securityContext as { runAsUser?: unknown } | undefined)?.runAsUser;
  const all = [...(pod.spec.initContainers ?? []), ...pod.spec.containers, ...(pod.spec.ephemeralContainers ?? [])];
  let fsUser: number | undefined;
  for (const c of all) {
    const user = (c.securityContext as { runAsUser?: unknown } | undefined)?.runAsUser ?? podUser;
    if (typeof user !== "number" || (fsUser !== undefined && fsUser !== user)) return undefined;
    fsUser = user;
  }
  return fsUser;
}

/**
 * Upstream calculateEmptyDirMemorySize: node allocatable memory, lowered to
 * the pod's memory limit and then to the volume's sizeLimit when those are
 * set and smaller.
 */
export function memoryVolumeSize(pod: Pod, sizeLimit: string | number | null | undefined, allocatableBytes: number): number {
  let size = allocatableBytes;
  const { limits, memoryDeclared } = podLimits(pod);
  const podLimit = memoryDeclared ? (limits["memory"] ?? 0) : 0;
  if (podLimit > 0 && podLimit <= size) size = podLimit;
  const volumeLimit = sizeLimit != null ? intValue(sizeLimit) : 0;
  if (volumeLimit > 0 && volumeLimit <= size) size = volumeLimit;
  return size;
}

/** The container's literal and pod-metadata env, what subPathExpr may reference. */
function subPathEnv(pod: Pod, container: ContainerSpec): Map<string, string> {
  const env = new Map<string, string>();
  const meta: Record<string, string | undefined> = {
    "metadata.name": pod.metadata.name,
    "metadata.namespace": pod.metadata.namespace ?? "default",
    "metadata.uid": pod.metadata.uid,
    "spec.nodeName": pod.spec.nodeName,
  };
  for (const e of container.env ?? []) {
    if (e.value !== undefined)
      env.set(
        e.name,
        expand(e.value, (n) => env.get(n)),
      );
    const path = (e.valueFrom as { fieldRef?: { fieldPath?: string } } | undefined)?.fieldRef?.fieldPath;
    if (path && meta[path] !== undefined) env.set(e.name, meta[path]!);
  }
  return env;
}

export class PodVolumeManager implements VolumeManager {
  private readonly dirs: PodDirs;
  /** Volumes set up at least once in this process, by pod UID. */
  private readonly setUp = new Map<string, Set<string>>();
  /** Claims resolved to their bound PersistentVolume, by pod UID and volume name (set up before any container mounts them). */
  private readonly claims = new Map<string, Map<string, ClaimVolume>>();

  constructor(private readonly opts: VolumeManagerOptions) {
    this.dirs = podDirs(opts.rootDir);
  }

  private kindOf(vol: VolumeSpec): Kind | undefined {
    return KINDS.find((k) => vol[k] != null);
  }

  private locate(pod: Pod, vol: VolumeSpec): Location {
    const kind = this.kindOf(vol);
    if (!kind) {
      const other = Object.keys(vol).find((k) => k !== "name") ?? "none";
      throw new Error(`volume type ${JSON.stringify(other)} is not supported by this node`);
    }
    if (kind === "hostPath") return { kind, hostPath: vol.hostPath!.path, readOnly: false };
    if (kind === "persistentVolumeClaim" || kind === "ephemeral") {
      const claim = this.claims.get(podUid(pod))?.get(vol.name);
      if (!claim) throw new Error(`volume ${JSON.stringify(vol.name)}: its claim is not bound to a volume on this node yet`);
      return { kind, hostPath: claim.path, readOnly: claim.readOnly };
    }
    if (kind === "csi") {
      if (!this.opts.csi) throw new Error("csi volumes are not supported by this node");
      return { kind, hostPath: this.opts.csi.mountPath(podUid(pod), vol.name), readOnly: vol.csi!.readOnly === true };
    }
    return { kind, hostPath: this.dirs.volume(podUid(pod), PLUGIN[kind], vol.name), readOnly: kind !== "emptyDir" };
  }

  async setupPod(pod: Pod): Promise<void> {
    const failures: VolumeFailure[] = [];
    const used = usedVolumeNames(pod);
    for (const vol of pod.spec.volumes ?? []) {
      // As upstream's desired state of world populator: an unused volume is neither set up nor waited for.
      if (!used.has(vol.name)) continue;
      try {
        await this.setupVolume(pod, vol);
        this.ready(pod).add(vol.name);
      } catch (err) {
        failures.push({ volume: vol.name, message: errorMessage(err), mounted: this.wasSetUp(pod, vol) });
      }
    }
    if (failures.length) throw new VolumeSetupError(failures);
  }

  private ready(pod: Pod): Set<string> {
    const uid = podUid(pod);
    let set = this.setUp.get(uid);
    if (!set) this.setUp.set(uid, (set = new Set()));
    return set;
  }

  /** Set up earlier by this process, or (after a restart) its content is on disk. */
  private wasSetUp(pod: Pod, vol: VolumeSpec): boolean {
    if (this.ready(pod).has(vol.name)) return true;
    try {
      const loc = this.locate(pod, vol);
      if (loc.kind === "csi") return this.opts.csi?.isPublished(podUid(pod), vol.name) === true;
      return loc.kind !== "hostPath" && loc.kind !== "emptyDir" && existsSync(`${loc.hostPath}/..data`);
    } catch {
      return false;
    }
  }

  private async setupVolume(pod: Pod, vol: VolumeSpec): Promise<void> {
    if (vol.persistentVolumeClaim || vol.ephemeral) {
      const uid = podUid(pod);
      const claim = await resolveClaim(this.opts.claims, pod, vol, this.opts.nodeIdentity ?? { name: pod.spec.nodeName ?? "", labels: {} });
      if (claim.csiPv) {
        if (!this.opts.csi) throw new Error(`PersistentVolume ${claim.pv}: csi volumes are not supported by this node`);
        claim.path = await this.opts.csi.setUpPersistent(pod, vol.name, claim.csiPv, claim.readOnly);
        // Node expansion once the resizer grew the volume; a failure is the VolumeResizeFailed event, not a failed mount.
        try {
          await this.opts.csi.expandIfNeeded(pod, vol.name, claim.csiPv, claim.csiPvc!, claim.readOnly);
        } catch (err) {
          this.opts.logger.warn("node expansion failed; tried again on the next sync", { pod: pod.metadata.name, volume: vol.name, err: errorMessage(err) });
        }
      }
      const known = this.claims.get(uid) ?? new Map<string, ClaimVolume>();
      if (!known.has(vol.name)) this.opts.logger.info("persistent volume ready", { pod: pod.metadata.name, volume: vol.name, claim: claim.claim, pv: claim.pv, path: claim.path });
      known.set(vol.name, claim);
      this.claims.set(uid, known);
    }
    const loc = this.locate(pod, vol);
    const { fsGroup, policy } = fsGroupOf(pod);
    switch (loc.kind) {
      case "hostPath":
        checkHostPathType(loc.hostPath, vol.hostPath!.type);
        return;
      case "persistentVolumeClaim":
      case "ephemeral":
        return; // resolved in setupVolume before locate
      case "csi":
        await this.opts.csi!.setUpInline(pod, vol);
        return;
      case "emptyDir": {
        const medium = vol.emptyDir!.medium ?? "";
        const made = this.ensureDir(loc.hostPath);
        const mounted = isHugePageMedium(medium)
          ? await this.ensureHugetlbfs(loc.hostPath, medium, pod)
          : medium === "Memory" && (await this.ensureTmpfs(loc.hostPath, memoryVolumeSize(pod, vol.emptyDir!.sizeLimit, this.opts.node.memoryBytes)));
        // A tmpfs root is world-writable as upstream's (1777); a hugetlbfs keeps its 0755, as upstream leaves it.
        if (mounted && medium === "Memory") chmodSync(loc.hostPath, 0o777);
        // Set up once: a restarted agent leaves an adopted pod's emptyDir as it is.
        if ((made || mounted) && fsGroup !== undefined) setVolumeOwnership(loc.hostPath, fsGroup, { readOnly: false, policy });
        return;
      }
      default: {
        const payload = await this.payloadOf(pod, vol, loc.kind);
        this.ensureDir(loc.hostPath);
        // Secrets and projected volumes (which may hold tokens) live in memory only, as upstream.
        if (loc.kind === "secret" || loc.kind === "projected") await this.ensureTmpfs(loc.hostPath, memoryVolumeSize(pod, undefined, this.opts.node.memoryBytes));
        const changed = writeAtomically(loc.hostPath, payload, {
          clock: this.opts.clock,
          ...(this.opts.random ? { random: this.opts.random } : {}),
          ...(fsGroup !== undefined ? { setPerms: (dir: string) => setVolumeOwnership(dir, fsGroup, { readOnly: true }) } : {}),
        });
        if (changed) this.opts.logger.v(2).info("volume content written", { pod: pod.metadata.name, volume: vol.name, kind: loc.kind });
        return;
      }
    }
  }

  private async payloadOf(pod: Pod, vol: VolumeSpec, kind: Kind): Promise<Payload> {
    const ns = pod.metadata.namespace ?? "default";
    const payload: Payload = new Map();
    const configMap = async (name: string, items: Parameters<typeof projectKeys>[2], mode: number, optional: boolean) => {
      const cm = await this.opts.objects.configMap(ns, name);
      if (!cm) {
        if (optional) return;
        throw new Error(`configmap ${JSON.stringify(name)} not found`);
      }
      projectKeys(payload, configMapBytes(cm), items, mode, optional, configMapMissingKey);
    };
    const secret = async (name: string, items: Parameters<typeof projectKeys>[2], mode: number, optional: boolean) => {
      const s = await this.opts.objects.secret(ns, name);
      if (!s) {
        if (optional) return;
        throw new Error(`secret ${JSON.stringify(name)} not found`);
      }
      projectKeys(payload, secretBytes(s), items, mode, optional, secretMissingKey);
    };
    switch (kind) {
      case "configMap": {
        const src = vol.configMap!;
        await configMap(src.name ?? "", src.items, src.defaultMode ?? DEFAULT_MODE, src.optional === true);
        break;
      }
      case "secret": {
        const src = vol.secret!;
        await secret(src.secretName ?? "", src.items, src.defaultMode ?? DEFAULT_MODE, src.optional === true);
        break;
      }
      case "downwardAPI": {
        const src = vol.downwardAPI!;
        projectDownwardAPI(payload, pod, src.items, src.defaultMode ?? DEFAULT_MODE, this.opts.node);
        break;
      }
      case "projected": {
        const src = vol.projected!;
        const mode = src.defaultMode ?? DEFAULT_MODE;
        const errors: string[] = [];
        for (const p of src.sources ?? []) {
          try {
            if (p.configMap) await configMap(p.configMap.name ?? "", p.configMap.items, mode, p.configMap.optional === true);
            else if (p.secret) await secret(p.secret.name ?? "", p.secret.items, mode, p.secret.optional === true);
            else if (p.downwardAPI) projectDownwardAPI(payload, pod, p.downwardAPI.items, mode, this.opts.node);
            // Both are off by default in v1.34 (feature gates ClusterTrustBundleProjection, PodCertificateRequest), where upstream's
            // no-op managers fail the volume rather than leave the file out; this agent implements neither.
            else if (p.clusterTrustBundle) {
              const ctb = p.clusterTrustBundle as { name?: unknown; signerName?: unknown };
              throw new Error(
                ctb.name != null || ctb.signerName != null
                  ? "ClusterTrustBundle projection is not supported in static kubelet mode"
                  : "ClusterTrustBundle projection requires either name or signerName to be set",
              );
            } else if (p.podCertificate) throw new Error("unimplemented");
            else if (p.serviceAccountToken) {
              const t = p.serviceAccountToken;
              if (!this.opts.tokens) throw new Error("service account tokens need an API server; this node runs standalone");
              const sa = (pod.spec as { serviceAccountName?: string }).serviceAccountName || "default";
              const token = await this.opts.tokens.token({
                namespace: ns,
                serviceAccount: sa,
                audiences: t.audience ? [t.audience] : [],
                expirationSeconds: t.expirationSeconds ?? 3600,
                pod: { name: pod.metadata.name ?? "", uid: podUid(pod) },
              });
              // Upstream projected collectData: a token only its user (or, once fsGroup ownership adds 0040, its group) reads.
              const fsUser = fsUserOf(pod);
              const ownerOnly = fsUser !== undefined || fsGroupOf(pod).fsGroup !== undefined;
              payload.set(t.path, { content: new TextEncoder().encode(token), mode: ownerOnly ? 0o600 : mode, ...(fsUser !== undefined ? { fsUser } : {}) });
            }
          } catch (err) {
            errors.push(errorMessage(err)); // upstream collects every source's error, then fails the volume
          }
        }
        // As upstream's utilerrors.NewAggregate: duplicates once, and more than one in brackets.
        const distinct = [...new Set(errors)];
        if (distinct.length) throw new Error(distinct.length === 1 ? distinct[0] : `[${distinct.join(", ")}]`);
        break;
      }
    }
    return payload;
  }

  /** Makes the volume directory (0777 past the umask, as upstream's emptyDir); true when it did not exist. */
  private ensureDir(dir: string): boolean {
    if (existsSync(dir)) return false;
    mkdirSync(dir, { recursive: true, mode: 0o750 });
    chmodSync(dir, 0o777);
    return true;
  }

  /** Mounts a tmpfs on `dir` unless one is there already; true when it mounted one. */
  /**
   * upstream setupHugepages: a hugetlbfs with the page size of the pod's
   * huge page requests; one already mounted (a restart) is kept when its page
   * size is the medium's, and an error otherwise.
   */
  private async ensureHugetlbfs(dir: string, medium: string, pod: Pod): Promise<boolean> {
    const mountedSize = await this.opts.mounter.hugetlbfsPageSize(dir);
    if (mountedSize !== undefined) {
      if (medium === "HugePages") return false;
      const wanted = hugePageVolumeSize(medium, pod);
      if (wanted !== mountedSize)
        throw new Error(
          `pod ${podUid(pod)}: mounted dir ${dir} pagesize '${hugetlbfsPageSizeOption(mountedSize)}' and requested medium size '${hugetlbfsPageSizeOption(wanted)}' differ`,
        );
      return false;
    }
    await this.opts.mounter.mountHugetlbfs(dir, hugetlbfsPageSizeOption(hugePageVolumeSize(medium, pod)));
    return true;
  }

  private async ensureTmpfs(dir: string, sizeBytes: number): Promise<boolean> {
    if (await this.opts.mounter.isDeviceMountPoint(dir)) return false;
    await this.opts.mounter.mountTmpfs(dir, sizeBytes > 0 ? sizeBytes : undefined);
    return true;
  }

  async mountsFor(pod: Pod, container: ContainerSpec): Promise<Mount[]> {
    const volumes = new Map((pod.spec.volumes ?? []).map((v) => [v.name, v]));
    const mounts: Mount[] = [];
    for (const [index, m] of (container.volumeMounts ?? []).entries()) {
      const vol = volumes.get(m.name);
      if (!vol) throw new VolumeMountError(`cannot find volume ${JSON.stringify(m.name)} to mount into container ${JSON.stringify(container.name)}`);
      let loc: Location;
      try {
        loc = this.locate(pod, vol);
      } catch (err) {
        throw new VolumeMountError(errorMessage(err));
      }
      let hostPath = loc.hostPath;
      const subPath = this.subPathOf(pod, container, m);
      if (subPath) {
        try {
          hostPath = await prepareSubPath({
            volumePath: loc.hostPath,
            subPath,
            target: this.dirs.subPath(podUid(pod), vol.name, container.name, index),
            mounter: this.opts.mounter,
            pid: this.opts.pid ?? process.pid,
          });
        } catch (err) {
          // Upstream keeps the detail out of the pod's status: it could describe the host's filesystem.
          this.opts.logger.warn("failed to prepare subPath for volumeMount", { pod: pod.metadata.name, container: container.name, volumeMount: m.name, err: errorMessage(err) });
          throw new VolumeMountError(`failed to prepare subPath for volumeMount ${JSON.stringify(m.name)} of container ${JSON.stringify(container.name)}`);
        }
      }
      mounts.push(
        Mount.create({
          containerPath: m.mountPath,
          hostPath,
          readonly: m.readOnly === true || loc.readOnly,
          propagation: this.propagationOf(container, m),
        }),
      );
    }
    return mounts;
  }

  private subPathOf(pod: Pod, container: ContainerSpec, m: VolumeMountSpec): string {
    if (m.subPath) return m.subPath;
    if (!m.subPathExpr) return "";
    const env = subPathEnv(pod, container);
    const expanded = expand(m.subPathExpr, (n) => env.get(n));
    if (expanded.startsWith("/") || expanded.split("/").includes("..")) {
      throw new VolumeMountError(`failed to prepare subPath for volumeMount ${JSON.stringify(m.name)} of container ${JSON.stringify(container.name)}`);
    }
    return expanded;
  }

  /** Upstream translateMountPropagation. */
  private propagationOf(container: ContainerSpec, m: VolumeMountSpec): MountPropagation {
    switch (m.mountPropagation ?? "None") {
      case "HostToContainer":
        return MountPropagation.PROPAGATION_HOST_TO_CONTAINER;
      case "Bidirectional": {
        const privileged = (container.securityContext as { privileged?: boolean } | undefined)?.privileged === true;
        if (!privileged) throw new VolumeMountError("Bidirectional mount propagation is available only to privileged containers");
        return MountPropagation.PROPAGATION_BIDIRECTIONAL;
      }
      default:
        return MountPropagation.PROPAGATION_PRIVATE;
    }
  }

  async teardownPod(uid: string): Promise<void> {
    if (!uid || uid.includes("/") || uid === "." || uid === "..") return;
    this.opts.tokens?.forgetPod(uid);
    const dir = this.dirs.pod(uid);
    // The drivers unpublish (and unstage) first: what they mounted is theirs to unmount. A failure keeps it all for the retry.
    await this.opts.csi?.tearDownPod(uid);
    this.setUp.delete(uid);
    this.claims.delete(uid);
    if (!existsSync(dir)) return;
    for (const m of await this.opts.mounter.mountsUnder(dir)) await this.opts.mounter.unmount(m);
    const left = await this.opts.mounter.mountsUnder(dir);
    // Never delete through a mount: that would remove a volume's (or the host's) files.
    if (left.length) throw new Error(`pod ${uid}: still mounted: ${left.join(", ")}`);
    rmSync(dir, { recursive: true, force: true }); // removes symlinks, never follows them
    this.opts.logger.v(2).info("pod volumes torn down", { uid });
  }

  claimVolumes(uid: string): ClaimedVolume[] {
    // Upstream: a local PV reports its file system (MetricsStatFS); a hostPath PV reports nothing (MetricsNil);
    // CSI volumes are measured by their driver (driverVolumeStats).
    return [...(this.claims.get(uid) ?? new Map<string, ClaimVolume>())]
      .filter(([, c]) => c.plugin === "kubernetes.io/local-volume")
      .map(([name, c]) => ({ name, path: c.path, pvcRef: { name: c.claim, namespace: c.namespace } }));
  }

  async driverVolumeStats(uid: string): Promise<MeasuredVolume[]> {
    if (!this.opts.csi) return [];
    const claims = this.claims.get(uid) ?? new Map<string, ClaimVolume>();
    // A PersistentVolume's directory is named after the PV (after the pod's volume when an earlier version published it).
    const byPv = new Map([...claims].map(([volume, c]) => [c.pv, volume]));
    return (await this.opts.csi.volumeStats(uid)).map((v) => {
      const volume = claims.has(v.name) ? v.name : (byPv.get(v.name) ?? v.name);
      const c = claims.get(volume);
      return c ? { ...v, name: volume, pvcRef: { name: c.claim, namespace: c.namespace } } : v;
    });
  }

  async cleanupOrphans(isKnown: (uid: string) => boolean): Promise<void> {
    let uids: string[];
    try {
      uids = readdirSync(this.dirs.podsRoot);
    } catch {
      return;
    }
    for (const uid of uids) {
      if (isKnown(uid)) continue;
      try {
        await this.teardownPod(uid);
        this.opts.logger.info("removed the directory of an orphaned pod", { uid });
      } catch (err) {
        this.opts.logger.warn("could not clean up an orphaned pod's volumes", { uid, err: errorMessage(err) });
      }
    }
  }
}
