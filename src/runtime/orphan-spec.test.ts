import { describe, expect, test } from "bun:test";
import { ContainerPreStopHandlerAnnotation, orphanSpecAnnotations, restoreOrphanSpec } from "./orphan-spec.ts";

describe("orphan spec annotations", () => {
  test("written as upstream writes them (JSON of lifecycle.preStop and ports) and restored into a container spec", () => {
    const preStop = { httpGet: { path: "/quit", port: "http" } };
    const annotations = orphanSpecAnnotations({ name: "app", image: "busybox", lifecycle: { preStop }, ports: [{ name: "http", containerPort: 8080 }] } as never);
    expect(annotations).toEqual({
      [ContainerPreStopHandlerAnnotation]: '{"httpGet":{"path":"/quit","port":"http"}}',
      "io.kubernetes.container.ports": '[{"name":"http","containerPort":8080}]',
    });
    expect(restoreOrphanSpec("app", annotations)).toEqual({
      ok: true,
      container: { name: "app", image: "", ports: [{ name: "http", containerPort: 8080 }], lifecycle: { preStop } },
    });
  });

  test("nothing to write or restore without a preStop or ports", () => {
    expect(orphanSpecAnnotations({ name: "app", image: "busybox" })).toEqual({});
    expect(restoreOrphanSpec("app", {})).toEqual({ ok: true, container: { name: "app", image: "" } });
  });

  test("an annotation that does not parse is an error naming it", () => {
    const bad = restoreOrphanSpec("app", { [ContainerPreStopHandlerAnnotation]: "{not json" });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toStartWith(`${ContainerPreStopHandlerAnnotation}: `);
    const wrong = restoreOrphanSpec("app", { [ContainerPreStopHandlerAnnotation]: '{"exec":{"command":"echo"}}' });
    expect(wrong.ok).toBe(false);
  });
});
