import { describe, expect, test } from "bun:test";
import { FakePodObjects } from "../api/objects.ts";
import type { Pod } from "../pods/schema.ts";
import { dockerConfigOf, Keyring, keyMatchesImage, keyringKey, podKeyring, repositoryOf } from "./pull-secrets.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const jsonSecret = (auths: Record<string, unknown>) => ({ type: "kubernetes.io/dockerconfigjson", data: { ".dockerconfigjson": b64(JSON.stringify({ auths })) } });

describe("pull secrets keyring", () => {
  test("keys: scheme and /v1/ or /v2/ dropped, paths kept", () => {
    expect(keyringKey("https://index.docker.io/v1/")).toBe("index.docker.io");
    expect(keyringKey("registry.example.com:5000")).toBe("registry.example.com:5000");
    expect(keyringKey("http://quay.io/coreos")).toBe("quay.io/coreos");
    expect(keyringKey("gcr.io/v2/team")).toBe("gcr.io/team");
  });

  test("matching: same number of host parts with globs, same port, path prefix", () => {
    expect(keyMatchesImage("*.example.com", "reg.example.com/app")).toBe(true);
    expect(keyMatchesImage("*.example.com", "a.reg.example.com/app")).toBe(false);
    expect(keyMatchesImage("reg.example.com:5000", "reg.example.com/app")).toBe(false);
    expect(keyMatchesImage("reg.example.com/team", "reg.example.com/team/app")).toBe(true);
    expect(keyMatchesImage("reg.example.com/team", "reg.example.com/other/app")).toBe(false);
    expect(repositoryOf("busybox")).toBe("docker.io/library/busybox");
    expect(repositoryOf("reg.example.com:5000/app:1.0@sha256:abc")).toBe("reg.example.com:5000/app");
  });

  test("lookup: the most specific key first, Docker Hub images use the index.docker.io entry, others pull anonymously", () => {
    const k = new Keyring();
    k.add({ "quay.io": { username: "broad", password: "1" }, "quay.io/coreos": { auth: b64("narrow:2") }, "https://index.docker.io/v1/": { username: "hub", password: "3" } });
    expect(k.lookup("quay.io/coreos/etcd:v3")).toEqual([
      { username: "narrow", password: "2" },
      { username: "broad", password: "1" },
    ]);
    expect(k.lookup("nginx:1.25")).toEqual([{ username: "hub", password: "3" }]);
    expect(k.lookup("ghcr.io/x/y")).toEqual([]);
  });

  test("secrets: dockerconfigjson and dockercfg are read; only secrets that cannot be retrieved are missing (another type adds no credentials), as upstream getPullSecretsForPod", async () => {
    expect(dockerConfigOf({ type: "kubernetes.io/dockercfg", data: { ".dockercfg": b64(JSON.stringify({ "reg.io": { username: "u", password: "p" } })) } })).toEqual({
      "reg.io": { username: "u", password: "p" },
    });
    expect(dockerConfigOf({ type: "Opaque", data: {} })).toBeUndefined();
    expect(dockerConfigOf({ type: "kubernetes.io/dockerconfigjson", data: { ".dockerconfigjson": b64("{not json") } })).toBeUndefined();
    const objects = new FakePodObjects();
    objects.secrets.set("ns/regcred", jsonSecret({ "reg.io": { username: "u", password: "p" } }));
    objects.secrets.set("ns/opaque", { type: "Opaque", data: {} });
    const pod = {
      metadata: { name: "p", namespace: "ns" },
      spec: { containers: [], imagePullSecrets: [{ name: "regcred" }, { name: "gone" }, { name: "opaque" }] },
    } as unknown as Pod;
    const { keyring, missing } = await podKeyring(pod, objects);
    expect(missing).toEqual(["gone"]);
    expect(keyring.lookup("reg.io/app:1")).toEqual([{ username: "u", password: "p" }]);
  });
});
