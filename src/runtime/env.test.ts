import { describe, expect, test } from "bun:test";
import type { Pod } from "../pods/schema.ts";
import { containerEnv, expand, expandCommand } from "./env.ts";

describe("env", () => {
  test("expand follows upstream rules", () => {
    const vars = new Map([["A", "1"], ["B", "two"]]);
    const look = (n: string) => vars.get(n);
    expect(expand("$(A)-$(B)", look)).toBe("1-two");
    expect(expand("$$(A)", look)).toBe("$(A)");
    expect(expand("$(MISSING)", look)).toBe("$(MISSING)");
    expect(expand("$A $(A", look)).toBe("$A $(A");
  });

  test("values reference earlier variables and fieldRefs resolve", () => {
    const pod: Pod = {
      metadata: { name: "web", namespace: "ns", uid: "u", labels: { app: "x" } },
      spec: {
        nodeName: "n1",
        containers: [
          {
            name: "c",
            image: "i",
            env: [
              { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
              { name: "GREETING", value: "hi $(POD) on $(NODE)" },
              { name: "NODE", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
              { name: "APP", valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
              { name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
            ],
          },
        ],
      },
    };
    const env = containerEnv(pod, pod.spec.containers[0]!, { podIP: "10.0.0.9" });
    expect(env).toEqual([
      { key: "POD", value: "web" },
      { key: "GREETING", value: "hi web on $(NODE)" },
      { key: "NODE", value: "n1" },
      { key: "APP", value: "x" },
      { key: "IP", value: "10.0.0.9" },
    ]);
    expect(expandCommand(["echo", "$(POD)"], env)).toEqual(["echo", "web"]);
  });

  test("unsupported sources are errors that name the variable", () => {
    const pod: Pod = { metadata: { name: "p" }, spec: { containers: [{ name: "c", image: "i", env: [{ name: "S", valueFrom: { secretKeyRef: {} } }] }] } };
    expect(() => containerEnv(pod, pod.spec.containers[0]!, {})).toThrow('env "S"');
  });
});
