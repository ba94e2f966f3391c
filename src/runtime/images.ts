/**
 * Image pulls for container starts: the pull policy, the pod's pull secrets,
 * the node-wide pull queue, and the per-pod, per-image backoff after a
 * failed pull (ImagePullBackOff), as upstream's EnsureImageExists, with its
 * events, reasons and messages.
 */
import type { PodObjects } from "../api/objects.ts";
import { formatDuration } from "../config/duration.ts";
import { goRpcError, type CriService, type PodSandboxConfig } from "../cri/index.ts";
import { podEventRef, type EventRecorder } from "../events/recorder.ts";
import type { Pod } from "../pods/schema.ts";
import type { Clock } from "../util/clock.ts";
import { errorMessage } from "../util/errors.ts";
import type { Backoff } from "./backoff.ts";
import { throwIfAgentStopping } from "./cancel.ts";
import type { PullQueue } from "./pull-queue.ts";
import { withDefaultTag } from "./image-name.ts";
import { missingPullSecretsWarning, podImageSpec, pullWithSecrets, type PulledImage } from "./pull-secrets.ts";

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
  /** The last failed pull's reason and message by backoff key, for the back-off's message (upstream prevPullErrMsg). */
  private readonly lastPullError = new Map<string, string>();

  constructor(private readonly opts: ImagePullerOptions) {}

  /**
   * The image present for a container, pulled as its policy says, or an
   * ImageError with upstream's reason and message; the events are
   * upstream EnsureImageExists's (pkg/kubelet/images/image_manager.go:151-324).
   * A failed pull is tried again at the pod's next sync once its back-off
   * (10 s doubling to 300 s per pod and image) is over; syncs within it
   * wait with ImagePullBackOff. The pull runs under the step's `signal`, as
   * upstream's under the sync's context: aborted, it is no longer waited on
   * and its CRI call is cancelled; it then fails as upstream's cancelled pull
   * does (Canceled), or, when the agent stops, throws the signal's reason
   * with no event and no back-off.
   */
  async ensure(pod: Pod, container: string, image: string, policy: "Always" | "IfNotPresent" | "Never", sandbox: PodSandboxConfig, signal?: AbortSignal): Promise<ImageInfo> {
    const { cri, clock, recorder } = this.opts;
    const ref = podEventRef(pod, container);
    let tagged: string;
    try {
      tagged = withDefaultTag(image);
    } catch (err) {
      recorder.event(ref, "Warning", "InspectFailed", errorMessage(err));
      throw new ImageError("InvalidImageName", errorMessage(err));
    }
    const spec = podImageSpec(pod, tagged);
    // Upstream imagePullPrecheck: policy Always pulls without looking for a local copy.
    if (policy !== "Always") {
      let present;
      try {
        present = await cri.imageStatus(spec);
      } catch (err) {
        // Upstream prints the image ref GetImageRef returned with its error, which is always empty.
        const message = `Failed to inspect image "": ${goRpcError(err)}`;
        recorder.event(ref, "Warning", "InspectFailed", message);
        throw new ImageError("ImageInspectError", message);
      }
      if (present) {
        recorder.event(ref, "Normal", "Pulled", `Container image "${image}" already present on machine`);
        return imageInfo(present);
      }
      if (policy === "Never") {
        const message = `Container image "${image}" is not present with pull policy of Never`;
        recorder.event(ref, "Warning", "ErrImageNeverPull", message);
        throw new ImageError("ErrImageNeverPull", message);
      }
    }
    const key = `${pod.metadata.uid}/${image}`;
    if (this.opts.backoff.remaining(key) > 0) {
      const message = `Back-off pulling image "${image}"`;
      recorder.event(ref, "Normal", "BackOff", message);
      const previous = this.lastPullError.get(key);
      throw new ImageError("ImagePullBackOff", previous ? `${message}: ${previous}` : message);
    }
    this.lastPullError.delete(key);
    recorder.event(ref, "Normal", "Pulling", `Pulling image "${image}"`);
    const started = clock.now();
    let pulled: PulledImage;
    try {
      pulled = await this.pull(pod, tagged, sandbox, signal);
    } catch (err) {
      throwIfAgentStopping(signal);
      recorder.event(ref, "Warning", "Failed", `Failed to pull image "${image}": ${errorMessage(err)}`);
      // Upstream EnsureImageExists: with policy Always a failed pull is ErrImagePull even when a
      // local copy exists (the copy may be stale, or not one the pod's credentials may use).
      this.opts.backoff.next(key, clock.now());
      const failure = pullFailure(image, errorMessage(err));
      this.lastPullError.set(key, `${failure.reason}: ${failure.message}`);
      throw failure;
    }
    // Go's Duration.Truncate(time.Millisecond) and %v (images/image_manager.go:315-317).
    const waitedMs = Math.floor(clock.now() - started);
    recorder.event(
      ref,
      "Normal",
      "Pulled",
      `Successfully pulled image "${image}" in ${formatDuration(Math.floor(pulled.pullMs))} (${formatDuration(waitedMs)} including waiting). Image size: ${pulled.size} bytes.`,
    );
    this.opts.backoff.gc();
    return pulled.status ? { ...imageInfo(pulled.status), ref: pulled.ref } : { ref: pulled.ref, username: "" };
  }
  /** One pull through the node-wide queue with the pod's pull secrets. */
  private async pull(pod: Pod, image: string, sandbox: PodSandboxConfig, signal: AbortSignal | undefined): Promise<PulledImage> {
    return pullWithSecrets({
      ...(signal ? { signal } : {}),
      cri: this.opts.cri,
      queue: this.opts.pullQueue,
      objects: this.opts.podObjects,
      clock: this.opts.clock,
      pod,
      image,
      sandbox,
    });
  }

  /** Each sync's warning about the pod's pull secrets that cannot be retrieved, as upstream's SyncPod. */
  async warnMissingPullSecrets(pod: Pod): Promise<void> {
    const warning = await missingPullSecretsWarning(pod, this.opts.podObjects);
    if (warning) this.opts.recorder.event(podEventRef(pod), "Warning", "FailedToRetrieveImagePullSecret", warning);
  }

  /** Forgets the pod's pull backoffs (it was removed). */
  forgetPod(uid: string): void {
    this.opts.backoff.forgetPrefix(`${uid}/`);
    for (const key of this.lastPullError.keys()) if (key.startsWith(`${uid}/`)) this.lastPullError.delete(key);
  }
}

/**
 * Upstream evalCRIPullErr (images/image_manager.go:326): a runtime's
 * RegistryUnavailable or SignatureValidationFailed is its own reason with
 * its own words; any other failure is ErrImagePull with the error as it is.
 */
function pullFailure(image: string, message: string): ImageError {
  for (const [reason, words] of [
    ["RegistryUnavailable", "the registry is unavailable"],
    ["SignatureValidationFailed", "the signature validation failed"],
  ] as const) {
    if (message.startsWith(reason)) return new ImageError(reason, `image pull failed for ${image} because ${words}${message.slice(reason.length)}`);
  }
  return new ImageError("ErrImagePull", message);
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

/** Upstream's image errors (images/types.go, cri-api errors): the reason a container waits with. */
export type ImageErrorReason =
  | "ErrImagePull"
  | "ImagePullBackOff"
  | "ErrImageNeverPull"
  | "ImageInspectError"
  | "InvalidImageName"
  | "RegistryUnavailable"
  | "SignatureValidationFailed";

export class ImageError extends Error {
  constructor(
    readonly reason: ImageErrorReason,
    message: string,
  ) {
    super(message);
  }
}
