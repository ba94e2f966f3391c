/**
 * The CRI user namespace of a pod (upstream GetOrCreateUserNamespaceMappings):
 * with the UserNamespacesSupport gate on, a pod that leaves hostUsers unset
 * or true gets mode NODE; `hostUsers: false` gets mode POD with the pod's
 * slot from the manager, when the runtime handler reports user namespace
 * support in the CRI Status (runtime_handlers[].features.user_namespaces),
 * and upstream's error otherwise (the sandbox is not created:
 * FailedCreatePodSandBox). With the gate off, nothing is sent.
 */
import { type CriService, NamespaceMode, type UserNamespace } from "../cri/index.ts";
import { podUid } from "../pods/identity.ts";
import type { Pod } from "../pods/schema.ts";
import { type UserNamespaceManager, UserNamespaceError } from "./manager.ts";

export { DEFAULT_RANGE, hostIdFiles, kubeletMappings, type IdFiles, MAPPINGS_FILE, USERNS_UNIT, UserNamespaceError, UserNamespaceManager, type IdMapping } from "./manager.ts";

export class PodUserNamespaces {
  /** `manager` undefined: the UserNamespacesSupport gate is off. */
  constructor(
    private readonly manager: UserNamespaceManager | undefined,
    private readonly cri: Pick<CriService, "status">,
  ) {}

  /** The sandbox's and its containers' userns_options; throws UserNamespaceError with upstream's message. */
  async forPod(pod: Pod, runtimeHandler: string): Promise<UserNamespace | undefined> {
    const hostUsers = (pod.spec as { hostUsers?: boolean }).hostUsers;
    if (!this.manager) {
      if (hostUsers === undefined || hostUsers === null) return undefined;
      throw new UserNamespaceError('the feature gate "UserNamespacesSupport" is disabled: can\'t set spec.HostUsers');
    }
    if (hostUsers !== false) return { mode: NamespaceMode.NODE, uids: [], gids: [] };
    await this.checkHandler(runtimeHandler);
    const { uids, gids } = this.manager.mappingsFor(podUid(pod));
    return { mode: NamespaceMode.POD, uids, gids };
  }

  /** Frees the pod's slot once it is torn down (upstream: SyncTerminatedPod). */
  release(uid: string): void {
    this.manager?.release(uid);
  }

  /** Releases the slots of pods that are gone (upstream CleanupOrphanedPodUsernsAllocations; nothing with the gate off). */
  cleanupOrphans(known: (uid: string) => boolean): string[] {
    return this.manager?.cleanupOrphans(known) ?? [];
  }

  /** Upstream HandlerSupportsUserNamespaces: no handlers reported (an older runtime) means no support. */
  private async checkHandler(runtimeHandler: string): Promise<void> {
    const msg =
      runtimeHandler === ""
        ? "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
        : `can't set \`spec.hostUsers: false\`, RuntimeClass handler "${runtimeHandler}" does not support user namespaces`;
    let handlers;
    try {
      handlers = (await this.cri.status(false)).runtimeHandlers;
    } catch (err) {
      throw new UserNamespaceError(`${msg}: ${(err as Error).message}`);
    }
    if (handlers.length === 0) throw new UserNamespaceError(msg);
    const h = handlers.find((x) => x.name === runtimeHandler);
    if (!h) throw new UserNamespaceError(`${msg}: the handler "${runtimeHandler}" is not known`);
    if (!h.features?.userNamespaces) throw new UserNamespaceError(msg);
  }
}
