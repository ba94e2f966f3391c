import { describe, expect, test } from "bun:test";
import type { ContainerSpec } from "../pods/schema.ts";
import { containerHash } from "./hash.ts";

const base: ContainerSpec = { name: "web", image: "busybox", command: ["httpd"], args: ["-f"] };

describe("containerHash", () => {
  test("is stable: a known input keeps its hash across agent versions", () => {
    // Changing this value means every container restarts on upgrade.
    expect(containerHash(base)).toBe(containerHash({ ...base }));
    expect(containerHash(base)).toMatchSnapshot();
  });

  test("ignores fields that do not need a restart and empty values", () => {
    expect(containerHash({ ...base, resources: { limits: { cpu: "1" } }, imagePullPolicy: "Always", livenessProbe: { exec: {} } })).toBe(
      containerHash(base),
    );
    expect(containerHash({ ...base, env: [], tty: false, workingDir: "" })).toBe(containerHash(base));
  });

  test("changes when a restart field changes", () => {
    expect(containerHash({ ...base, image: "busybox:2" })).not.toBe(containerHash(base));
    expect(containerHash({ ...base, args: ["-v"] })).not.toBe(containerHash(base));
    expect(containerHash({ ...base, env: [{ name: "A", value: "1" }] })).not.toBe(containerHash(base));
  });
});
