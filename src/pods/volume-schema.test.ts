import { describe, expect, test } from "bun:test";
import { parsePod } from "./schema.ts";

const withVolumes = (volumes: unknown[], mounts: unknown[] = []) =>
  parsePod({ metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "i", volumeMounts: mounts }], volumes } });
const error = (r: ReturnType<typeof parsePod>) => (r.ok ? "" : r.error);

describe("volume validation names the field", () => {
  test("supported sources parse", () => {
    const r = withVolumes(
      [
        { name: "a", emptyDir: { medium: "Memory", sizeLimit: "1Gi" } },
        { name: "h", emptyDir: { medium: "HugePages" } },
        { name: "h2", emptyDir: { medium: "HugePages-2Mi" } },
        { name: "b", hostPath: { path: "/var/log", type: "Directory" } },
        { name: "c", configMap: { name: "x", items: [{ key: "k", path: "dir/f", mode: 0o400 }], defaultMode: 0o644, optional: true } },
        { name: "d", projected: { sources: [{ serviceAccountToken: { path: "token", expirationSeconds: 3607 } }] } },
      ],
      [{ name: "a", mountPath: "/a", subPath: "x/y", mountPropagation: "HostToContainer" }],
    );
    expect(error(r)).toBe("");
  });

  test.each([
    [[{ name: "a", configMap: { name: "x", items: [{ key: "k", path: "../up" }] } }], [], "field \"spec.volumes[0].configMap.items[0].path\": must not contain '..'"],
    [
      [{ name: "a", secret: { secretName: "x", defaultMode: 0o1000 } }],
      [],
      'field "spec.volumes[0].secret.defaultMode": must be a number between 0 and 0777 (octal), both inclusive',
    ],
    [[{ name: "a", hostPath: { path: "/x", type: "Dir" } }], [], 'field "spec.volumes[0].hostPath.type": must be one of'],
    [[{ name: "a", emptyDir: { medium: "HugePages-big" } }], [], 'field "spec.volumes[0].emptyDir.medium": must be "", "Memory", "HugePages" or "HugePages-<size>"'],
    [[{ name: "a", projected: { sources: [{ serviceAccountToken: { path: "t", expirationSeconds: 60 } }] } }], [], "may not specify a duration less than 10 minutes"],
    [[{ name: "a", emptyDir: {}, hostPath: { path: "/x" } }], [], 'field "spec.volumes[0]": may not specify more than 1 volume type'],
    [
      [
        { name: "a", emptyDir: {} },
        { name: "a", emptyDir: {} },
      ],
      [],
      'field "spec.volumes[1].name": duplicate volume name "a"',
    ],
    [[{ name: "a", emptyDir: {} }], [{ name: "b", mountPath: "/b" }], 'field "spec.containers[0].volumeMounts[0].name": volume "b" not found'],
    [[{ name: "a", emptyDir: {} }], [{ name: "a", mountPath: "/a", subPath: "/etc" }], 'field "spec.containers[0].volumeMounts[0].subPath": must be a relative path'],
    [[{ name: "a", emptyDir: {} }], [{ name: "a", mountPath: "/a", subPath: "x", subPathExpr: "y" }], "subPathExpr and subPath are mutually exclusive"],
    [[{ name: "a", emptyDir: {} }], [{ name: "a", mountPath: "/a", mountPropagation: "Shared" }], 'field "spec.containers[0].volumeMounts[0].mountPropagation"'],
  ])("%j %j: %s", (volumes, mounts, message) => {
    expect(error(withVolumes(volumes, mounts))).toContain(message);
  });
});
