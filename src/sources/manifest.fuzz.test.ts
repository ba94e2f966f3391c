/**
 * Fuzz: the static pod manifest parser (file source) on thousands of
 * generated and mutated documents. It must never throw, and every rejection
 * must say what is wrong: a field, or what is wrong with the document.
 */
import { expect, test } from "bun:test";
import { arbitraryJson, forAll, keysOf, mutateText, mutateValue, type Rng } from "../util/fuzz.ts";
import { parseManifest } from "./file.ts";
import { podsFromBody } from "./url.ts";

const SEEDS: unknown[] = [
  {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "kube-system", labels: { app: "web" }, annotations: { a: "b" } },
    spec: {
      hostNetwork: false,
      restartPolicy: "Always",
      terminationGracePeriodSeconds: 30,
      initContainers: [{ name: "init", image: "busybox", command: ["sh", "-c", "true"] }],
      containers: [
        {
          name: "c",
          image: "busybox:1.36",
          imagePullPolicy: "IfNotPresent",
          args: ["httpd", "-f"],
          env: [
            { name: "A", value: "1" },
            { name: "B", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
          ],
          ports: [{ containerPort: 8080, protocol: "TCP", hostPort: 80 }],
          resources: { requests: { cpu: "100m", memory: "64Mi" }, limits: { memory: "128Mi" } },
          volumeMounts: [{ name: "data", mountPath: "/data", readOnly: true }],
          livenessProbe: { httpGet: { path: "/", port: 8080 }, periodSeconds: 5 },
          securityContext: { runAsUser: 1000, capabilities: { add: ["NET_ADMIN"] } },
        },
      ],
      volumes: [{ name: "data", hostPath: { path: "/srv" } }],
      tolerations: [{ operator: "Exists" }],
    },
  },
  { apiVersion: "v1", kind: "Pod", metadata: { name: "tiny" }, spec: { containers: [{ name: "c", image: "busybox" }] } },
];
const KEYS = [...keysOf(SEEDS), "uid", "nodeName", "deletionTimestamp", "hostPID", "priority", "sidecar"];

const toYaml = (value: unknown, indent = ""): string => {
  if (Array.isArray(value)) return value.length ? value.map((v) => `\n${indent}- ${toYaml(v, indent + "  ").trimStart()}`).join("") : "[]";
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    return entries.length ? entries.map(([k, v]) => `\n${indent}${JSON.stringify(k)}: ${toYaml(v, indent + "  ")}`).join("") : "{}";
  }
  return JSON.stringify(value) ?? "null";
};

/** Document-level problems (not a single field): decoding, size, count, emptiness. */
const DOCUMENT_ERROR = /^(document: |file is empty|expected one Pod( or PodList)? document|invalid JSON|invalid YAML|YAML anchors|document is \d+ bytes)/;
/** The API server's validation, as upstream prints its field errors (resource-validation.ts). */
const VALIDATION_ERROR = /^invalid pod: \[spec\.(initContainers|containers)\[\d+\]\.resources/;

const outcomes = { accepted: 0, rejected: 0 };

function check(text: string): void {
  const result = parseManifest(text, { file: "/etc/kubernetes/manifests/fuzz.yaml", nodeName: "n1" });
  outcomes[result.ok ? "accepted" : "rejected"]++;
  if (result.ok) {
    expect(result.pod.metadata.uid).toBeString();
    expect(result.pod.metadata.name).toEndWith("-n1");
    return;
  }
  expect(result.error.length).toBeGreaterThan(0);
  for (const part of result.error.split("; ")) {
    if (!DOCUMENT_ERROR.test(part) && !VALIDATION_ERROR.test(part) && !part.startsWith('field "')) throw new Error(`rejection without a field: ${JSON.stringify(part)}`);
  }
}

function generate(rng: Rng, i: number): string {
  const seed = rng.pick(SEEDS);
  switch (i % 4) {
    case 0:
      return JSON.stringify(mutateValue(rng, seed, KEYS));
    case 1:
      return toYaml(mutateValue(rng, mutateValue(rng, seed, KEYS), KEYS));
    case 2:
      return mutateText(rng, rng.bool() ? JSON.stringify(seed, null, 2) : toYaml(seed));
    default:
      return JSON.stringify(arbitraryJson(rng, KEYS, 4));
  }
}

test("the seeds themselves parse", () => {
  for (const seed of SEEDS) {
    expect(parseManifest(JSON.stringify(seed), { file: "f", nodeName: "n1" }).ok).toBe(true);
    expect(parseManifest(toYaml(seed), { file: "f", nodeName: "n1" }).ok).toBe(true);
  }
});

test("4000 generated and mutated manifests: no throw, every rejection names a field or the document's problem", () => {
  forAll({ seed: 0x5eed_0001, count: 4000 }, generate, check);
  // Both sides were exercised: mutations that still parse, and rejections.
  expect(outcomes.accepted).toBeGreaterThan(200);
  expect(outcomes.rejected).toBeGreaterThan(2000);
}, 60_000); // thousands of cases: a loaded machine must not time them out

test("2000 generated and mutated staticPodURL bodies (Pods and PodLists): no throw, every rejection names the item and field", () => {
  let accepted = 0;
  forAll(
    { seed: 0x5eed_0002, count: 2000 },
    (rng, i) => {
      if (i % 2 === 0) return generate(rng, i);
      const list = { apiVersion: "v1", kind: "PodList", items: SEEDS.map((seed, n) => ({ ...(seed as object), metadata: { name: `p${n}` } })) };
      return i % 4 === 1 ? JSON.stringify(mutateValue(rng, list, [...KEYS, "items"])) : mutateText(rng, JSON.stringify(list));
    },
    (body) => {
      const result = podsFromBody(body, { url: "http://config.local/pods", nodeName: "n1" });
      if (result.ok) {
        accepted++;
        return;
      }
      for (const part of result.error.replace(/^items\[\d+\]: /, "").split("; ")) {
        if (!DOCUMENT_ERROR.test(part) && !VALIDATION_ERROR.test(part) && !part.startsWith('field "') && !part.startsWith("duplicate pod"))
          throw new Error(`rejection without a field: ${JSON.stringify(part)}`);
      }
    },
  );
  expect(accepted).toBeGreaterThan(100);
}, 60_000); // thousands of cases: a loaded machine must not time them out
