import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { criSecurityContext, DEFAULT_MASKED_PATHS, effectiveSecurityContext, verifyRunAsNonRoot } from "./security.ts";

const pod = (podSc: Record<string, unknown>, containerSc: Record<string, unknown>): Pod => ({
  metadata: { name: "p" },
  spec: { securityContext: podSc, containers: [{ name: "c", image: "i", securityContext: containerSc }] },
});
const opts = { seccompProfileRoot: "/var/lib/kubelet/seccomp", seccompDefault: false };

describe("security context", () => {
  test("the container overrides the pod; fsGroup joins the supplemental groups", () => {
    const p = pod({ runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000], fsGroup: 2000 }, { runAsUser: 1001, readOnlyRootFilesystem: true });
    expect(effectiveSecurityContext(p, p.spec.containers[0]!)).toEqual({ runAsUser: 1001, runAsGroup: 3000, readOnlyRootFilesystem: true, supplementalGroups: [4000, 2000] });
  });

  test("to the CRI: masked paths unless privileged or Unmasked; no_new_privs only when escalation is denied; capability names as given", () => {
    const plain = criSecurityContext({ supplementalGroups: [] }, opts);
    expect(plain).toMatchObject({ privileged: false, noNewPrivs: false, maskedPaths: DEFAULT_MASKED_PATHS, seccomp: { type: "Unconfined" } });
    const hardened = criSecurityContext({ supplementalGroups: [], allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"], add: ["net_bind_service"] } }, opts);
    expect(hardened).toMatchObject({ noNewPrivs: true, capabilities: { add: ["net_bind_service"], drop: ["ALL"] } });
    expect(criSecurityContext({ supplementalGroups: [], privileged: true }, opts)).toMatchObject({ privileged: true, maskedPaths: [], readonlyPaths: [] });
    expect(criSecurityContext({ supplementalGroups: [], procMount: "Unmasked" }, opts).maskedPaths).toEqual([]);
  });

  test("seccomp profiles", () => {
    expect(criSecurityContext({ supplementalGroups: [], seccompProfile: { type: "RuntimeDefault" } }, opts).seccomp).toEqual({ type: "RuntimeDefault", localhostRef: "" });
    expect(criSecurityContext({ supplementalGroups: [], seccompProfile: { type: "Localhost", localhostProfile: "audit.json" } }, opts).seccomp).toEqual({
      type: "Localhost",
      localhostRef: "/var/lib/kubelet/seccomp/audit.json",
    });
    expect(criSecurityContext({ supplementalGroups: [] }, { ...opts, seccompDefault: true }).seccomp.type).toBe("RuntimeDefault");
  });

  test.each([
    [{ runAsNonRoot: true, runAsUser: 0 }, { username: "" }, "container's runAsUser breaks non-root policy"],
    [{ runAsNonRoot: true }, { uid: 0, username: "" }, "container has runAsNonRoot and image will run as root"],
    [{ runAsNonRoot: true }, { username: "nobody" }, "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root"],
    [{ runAsNonRoot: true }, { username: "" }, "container has runAsNonRoot and image will run as root"],
  ] as const)("runAsNonRoot %j with image %j: %s", (sc, image, message) => {
    expect(() => verifyRunAsNonRoot({ ...sc, supplementalGroups: [] }, image)).toThrow(message);
  });

  test("runAsNonRoot passes with a non-zero user from the spec or the image", () => {
    expect(() => verifyRunAsNonRoot({ runAsNonRoot: true, runAsUser: 65534, supplementalGroups: [] }, { username: "" })).not.toThrow();
    expect(() => verifyRunAsNonRoot({ runAsNonRoot: true, supplementalGroups: [] }, { uid: 1000, username: "" })).not.toThrow();
  });
});
