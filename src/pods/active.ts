import type { Pod } from "./schema.ts";

/** The pods this node runs now (admitted, not terminating), as the pod workers know them. */
export interface ActivePods {
  activePods(): Pod[];
  activePod(uid: string): Pod | undefined;
}
