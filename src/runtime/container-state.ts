import { ContainerState as CriContainerState } from "../cri/index.ts";
import type { ContainerState } from "./types.ts";

/** A CRI container state as the observed pod and the PLEG records name it. */
export function containerStateOf(s: CriContainerState): ContainerState {
  switch (s) {
    case CriContainerState.CONTAINER_CREATED:
      return "created";
    case CriContainerState.CONTAINER_RUNNING:
      return "running";
    case CriContainerState.CONTAINER_EXITED:
      return "exited";
    default:
      return "unknown";
  }
}
