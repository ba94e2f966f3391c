/**
 * Mirror pods (upstream mirror_client.go): each static pod gets an API copy
 * so `kubectl get pods` shows it, annotated with the static pod's hash and
 * owned by the Node (NodeRestriction requires both). A mirror whose hash no
 * longer matches is deleted and created again; one whose static pod is gone
 * is deleted; a mirror someone deleted (or marked for deletion) is deleted
 * for good and created again on the next sync.
 */
import { isApiReason, type ApiObject, type KubeApi } from "../api/index.ts";
import { errorMessage } from "../util/errors.ts";
import type { Logger } from "../util/log.ts";
import type { Pod } from "../pods/schema.ts";
import { podFullName, podUid } from "../pods/identity.ts";
import { ConfigHashAnnotation, ConfigMirrorAnnotation, ConfigSourceAnnotation } from "../pods/source.ts";
import type { NodeUid } from "../node/registration.ts";
import type { MirrorPodsObserver } from "../sources/apiserver.ts";

export interface MirrorPodsOptions {
  api: Pick<KubeApi, "createPod" | "deletePod">;
  nodeName: string;
  /** The Node's UID once registered; mirrors wait for it (their owner reference needs it). */
  node: NodeUid;
  logger: Logger;
}

/** A static pod's mirror pod as the API server has it (its status goes there). */
export interface MirrorOf {
  mirrorOf(staticPod: Pod): Pod | undefined;
}

/** Whether the API server's mirror pods were heard of yet: before that, mirrorOf's undefined says nothing. */
export interface MirrorsListed {
  /** Undefined once the API source delivered its first list; until then, a promise that resolves then. */
  whenListed(): Promise<void> | undefined;
}

export class MirrorPods implements MirrorOf, MirrorsListed, MirrorPodsObserver {
  private mirrors = new Map<string, Pod>();
  private syncing: Promise<void> | undefined;
  private readonly listed = Promise.withResolvers<void>();
  private heard = false;

  constructor(private readonly opts: MirrorPodsOptions) {}

  /** The mirror pods the API server currently has, from the API source. */
  mirrorPodsChanged(mirrors: Pod[]): void {
    this.mirrors = new Map(mirrors.map((p) => [podFullName(p), p]));
    this.heard = true;
    this.listed.resolve();
  }

  whenListed(): Promise<void> | undefined {
    return this.heard ? undefined : this.listed.promise;
  }

  mirrorOf(staticPod: Pod): Pod | undefined {
    return this.mirrors.get(podFullName(staticPod));
  }

  /** Converges mirrors toward `staticPods`; one pass at a time, errors logged and retried next pass. */
  sync(staticPods: Pod[]): Promise<void> {
    this.syncing ??= this.pass(staticPods).finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  private async pass(staticPods: Pod[]): Promise<void> {
    const nodeUid = this.opts.node.uid();
    if (!nodeUid) return;
    const wanted = new Map(staticPods.map((p) => [podFullName(p), p]));
    for (const [fullName, mirror] of this.mirrors) {
      const staticPod = wanted.get(fullName);
      // Someone deleting a mirror (kubectl delete) only marks it; the agent finishes the delete and makes a new one.
      const stale =
        !staticPod || !!mirror.metadata.deletionTimestamp || mirror.metadata.annotations?.[ConfigMirrorAnnotation] !== staticPod.metadata.annotations?.[ConfigHashAnnotation];
      if (stale) await this.attempt("delete", fullName, () => this.delete(mirror));
    }
    for (const [fullName, staticPod] of wanted) {
      const mirror = this.mirrors.get(fullName);
      if (mirror && mirror.metadata.annotations?.[ConfigMirrorAnnotation] === staticPod.metadata.annotations?.[ConfigHashAnnotation]) continue;
      if (mirror) continue; // the stale one is being deleted; create once it is gone
      await this.attempt("create", fullName, async () => {
        const created = await this.opts.api.createPod(staticPod.metadata.namespace ?? "default", this.mirrorFor(staticPod, nodeUid));
        this.mirrors.set(fullName, created as unknown as Pod);
      });
    }
  }

  private async delete(mirror: Pod): Promise<void> {
    await this.opts.api.deletePod(mirror.metadata.namespace ?? "default", mirror.metadata.name ?? "", { uid: podUid(mirror), gracePeriodSeconds: 0 });
    this.mirrors.delete(podFullName(mirror));
  }

  private async attempt(what: string, fullName: string, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
      this.opts.logger.info(`mirror pod ${what}d`, { pod: fullName });
    } catch (err) {
      if (what === "create" && isApiReason(err, "AlreadyExists")) return; // the watch will show it
      this.opts.logger.warn(`mirror pod ${what} failed; will retry`, { pod: fullName, err: errorMessage(err) });
    }
  }

  private mirrorFor(staticPod: Pod, nodeUid: string): ApiObject {
    const annotations: Record<string, string> = { ...staticPod.metadata.annotations, [ConfigMirrorAnnotation]: staticPod.metadata.annotations?.[ConfigHashAnnotation] ?? "" };
    delete annotations[ConfigSourceAnnotation];
    const { uid: _uid, resourceVersion: _rv, ...metadata } = staticPod.metadata;
    return {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { ...metadata, annotations, ownerReferences: [{ apiVersion: "v1", kind: "Node", name: this.opts.nodeName, uid: nodeUid, controller: true }] },
      spec: staticPod.spec,
    };
  }
}
