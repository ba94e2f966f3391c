/**
 * Image pulls for container starts: the pull policy, the pod's pull secrets,
 * the node-wide pull queue, and the per-pod, per-image backoff after a
 * failed pull (ImagePullBackOff), as upstream's EnsureImageExists.
 */
import type { PodObjects } from "../api/objects.ts";
import type { CriService, PodSandboxConfig } from "../cri/index.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Backoff } from "./backoff.ts";
import type { PullQueue } from "./pull-queue.ts";
import { pullWithSecrets } from "./pull-secrets.ts";

export interface ImagePullerOptions {
  cri: CriService;
  clock: Clock;
  recorder: EventRecorder;
  /** Failed pulls, keyed by pod UID and image (ImagePullBackOff). */
  backoff: Backoff;
  pullQueue: PullQueue;
  /** The pods' pull secrets. */
  podObjects: PodObjects;
}

export class ImagePuller {
  constructor(private readonly opts: ImagePullerOptions) {}

  /** The image present for a container: pulled as its policy says (events Pulling, Pulled, BackOff, Failed), or an ImageError with when to try again. */
  async ensure(pod: Pod, container: string, image: string, policy: "Always" | "IfNotPresent" | "Never", sandbox: PodSandboxConfig): Promise<ImageInfo> {
    const { cri, clock } = this.opts;
    const ref = podEventRef(pod, container);
    const present = await cri.imageStatus({ image, annotations: {}, userSpecifiedImage: image, runtimeHandler: "" });
    if (present && policy !== "Always") {
      this.opts.recorder.event(ref, "Normal", "Pulled", `Container image "${image}" already present on machine`);
      return imageInfo(present);
    }
    if (policy === "Never") throw new ImageError("ErrImageNeverPull", `Container image "${image}" is not present with pull policy of Never`);
    const key = `${pod.metadata.uid}/${image}`;
    const wait = this.opts.backoff.remaining(key);
    if (wait > 0) {
      this.opts.recorder.event(ref, "Normal", "BackOff", `Back-off pulling image "${image}"`);
      throw new ImageError("ImagePullBackOff", `Back-off pulling image "${image}"`, wait);
    }
    try {
      this.opts.recorder.event(ref, "Normal", "Pulling", `Pulling image "${image}"`);
      const started = clock.now();
      const pulled = await this.pull(pod, image, sandbox);
      this.opts.recorder.event(ref, "Normal", "Pulled", `Successfully pulled image "${image}" in ${clock.now() - started}ms`);
      const status = await cri.imageStatus({ image: pulled, annotations: {}, userSpecifiedImage: image, runtimeHandler: "" });
      return status ? imageInfo(status) : { ref: pulled, username: "" };
    } catch (err) {
      this.opts.recorder.event(ref, "Warning", "Failed", `Failed to pull image "${image}": ${errorMessage(err)}`);
      // Upstream EnsureImageExists: with policy Always a failed pull is ErrImagePull even when a
      // local copy exists (the copy may be stale, or not one the pod's credentials may use).
      this.opts.backoff.next(key, this.opts.clock.now());
      throw new ImageError("ErrImagePull", errorMessage(err), this.opts.backoff.remaining(key));
    }
  }
  /** One pull through the node-wide queue with the pod's pull secrets; a secret that cannot be read is an event, as upstream. */
  private async pull(pod: Pod, image: string, sandbox: PodSandboxConfig): Promise<string> {
    return pullWithSecrets({
      cri: this.opts.cri,
      queue: this.opts.pullQueue,
      objects: this.opts.podObjects,
      pod,
      image,
      sandbox,
      warn: (reason, message) => this.opts.recorder.event(podEventRef(pod), "Warning", reason, message),
    });
  }

  /** Forgets the pod's pull backoffs (it was removed). */
  forgetPod(uid: string): void {
    this.opts.backoff.forgetPrefix(`${uid}/`);
  }
}

/** An image's reference and the user its config runs as (for runAsNonRoot). */
export interface ImageInfo {
  ref: string;
  uid?: number;
  username: string;
}

const imageInfo = (image: { id: string; uid?: { value: bigint }; username: string }): ImageInfo => ({
  ref: image.id,
  ...(image.uid ? { uid: Number(image.uid.value) } : {}),
  username: image.username,
});

export class ImageError extends Error {
  constructor(
    readonly reason: "ErrImagePull" | "ImagePullBackOff" | "ErrImageNeverPull",
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}
