import { describe, expect, test } from "bun:test";
import { loadKubeletConfigFile } from "./load-file.ts";
import { findAnchorOrAlias } from "./yaml-anchors.ts";

const HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
const files = (content: Record<string, string | Buffer>) => ({
  readFile: (path: string) => {
    const c = content[path];
    if (c === undefined) throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: "ENOENT" });
    return c;
  },
});
const load = (text: string | Buffer, path = "/etc/kubelet.yaml") => loadKubeletConfigFile(path, files({ [path]: text }));
const refusal = (text: string | Buffer, path = "/etc/kubelet.yaml"): string => {
  try {
    load(text, path);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("expected the file to be refused");
};

describe("loading the config file", () => {
  test("YAML and JSON", () => {
    expect(load(`${HEAD}maxPods: 50\n`).maxPods).toBe(50);
    const json = JSON.stringify({ apiVersion: "kubelet.config.k8s.io/v1beta1", kind: "KubeletConfiguration", maxPods: 60, syncFrequency: "30s" });
    expect(load(json, "/etc/kubelet.json")).toMatchObject({ maxPods: 60, syncFrequency: 30_000 });
    expect(load(Buffer.from(`${HEAD}maxPods: 70\n`)).maxPods).toBe(70);
  });

  test("an empty value (null) leaves the field unset, as Go's decoder does", () => {
    expect(load(`${HEAD}staticPodPath:\nauthentication:\n  x509:\n`).staticPodPath).toBe("");
  });

  test("relative paths resolve against the file's directory; absolute and empty ones stay", () => {
    const k = load(
      `${HEAD}staticPodPath: manifests\ntlsCertFile: ../pki/kubelet.crt\nauthentication:\n  x509:\n    clientCAFile: /etc/ca.crt\nresolvConf: ""\n`,
      "/etc/kubernetes/kubelet.yaml",
    );
    expect(k.staticPodPath).toBe("/etc/kubernetes/manifests");
    expect(k.tlsCertFile).toBe("/etc/pki/kubelet.crt");
    expect(k.authentication.x509.clientCAFile).toBe("/etc/ca.crt");
    expect(k.resolvConf).toBe("");
  });

  test("a relative --config path resolves against the working directory first", () => {
    const k = loadKubeletConfigFile("conf/kubelet.yaml", { ...files({ "conf/kubelet.yaml": `${HEAD}staticPodPath: pods\n` }), cwd: "/srv" });
    expect(k.staticPodPath).toBe("/srv/conf/pods");
  });

  test("values such as `*` inside strings and comments are not aliases", () => {
    const k = load(`${HEAD}# &anchor in a comment\nallowedUnsafeSysctls: [kernel.msg*, "net.*"]\nstaticPodURLHeader:\n  X-Glob: ['*']\n`);
    expect(k.allowedUnsafeSysctls).toEqual(["kernel.msg*", "net.*"]);
  });
});

describe("refused files say which file and why", () => {
  const laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
  for (const n of "bcdefghi")
    laughs.push(`${n}: &${n} [*${String.fromCharCode(n.charCodeAt(0) - 1)},*${String.fromCharCode(n.charCodeAt(0) - 1)},*${String.fromCharCode(n.charCodeAt(0) - 1)}]`);
  test.each([
    ["an alias", `${HEAD}a: &x 1\nmaxPods: *x\n`, "line 3, column 4: YAML anchors are not allowed"],
    ["an alias of a collection", `${HEAD}clusterDNS: *dns\n`, "line 3, column 13: YAML aliases are not allowed"],
    ["a merge key", `${HEAD}authentication:\n  <<: *base\n`, "YAML aliases are not allowed"],
    ["billion laughs", laughs.join("\n"), "YAML anchors are not allowed"],
    ["an empty file", "", "is empty"],
    ["only comments", "# nothing\n", "is empty"],
    ["two documents", `${HEAD}---\n${HEAD}`, "holds 2 documents, expected a single KubeletConfiguration"],
    ["a list", "- a\n- b\n", "expected a KubeletConfiguration object, got a list"],
    ["a YAML syntax error", `${HEAD}maxPods: [1, 2\nport: }\n`, "invalid YAML at line 4, column 1: missed comma between flow collection entries"],
    ["a mis-indented field", `${HEAD}authentication:\n  anonymous:\n    enabled: false\n   webhook:\n`, "invalid YAML at line 6, column 4: bad indentation of a mapping entry"],
    ["bad JSON", '{"apiVersion": ', "invalid JSON"],
    ["no apiVersion", "kind: KubeletConfiguration\n", 'field "apiVersion": expected "kubelet.config.k8s.io/v1beta1", got nothing'],
    [
      "another apiVersion",
      "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\nfoo: 1\n",
      'field "apiVersion": expected "kubelet.config.k8s.io/v1beta1", got "kubelet.config.k8s.io/v1alpha1"',
    ],
    [
      "another kind",
      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\n",
      'field "kind": expected "KubeletConfiguration", got "CredentialProviderConfig"',
    ],
    ["an unknown field", `${HEAD}podInfraContainerImage: pause\n`, 'field "podInfraContainerImage": unknown field'],
    [
      "a bad quantity",
      `${HEAD}evictionHard:\n  memory.available: lots\n`,
      'field "evictionHard.memory.available": expected a quantity like "100Mi" or a percentage like "10%", got "lots"',
    ],
  ])("%s", (_name, text, message) => {
    const msg = refusal(text);
    expect(msg).toStartWith("config file /etc/kubelet.yaml: ");
    expect(msg).toContain(message);
  });

  test("a file over 1 MiB is refused before it is parsed", () => {
    const big = `${HEAD}staticPodPath: "${"x".repeat(1 << 20)}"\n`;
    expect(refusal(big)).toContain(`is ${Buffer.byteLength(big)} bytes, more than the limit of 1048576`);
    expect(refusal(Buffer.from(big))).toContain("more than the limit");
  });

  test("a missing or unreadable file names the path", () => {
    expect(() => loadKubeletConfigFile("/nope.yaml", files({}))).toThrow("config file /nope.yaml: no such file");
    const denied = {
      readFile: () => {
        throw Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" });
      },
    };
    expect(() => loadKubeletConfigFile("/root/k.yaml", denied)).toThrow("config file /root/k.yaml: cannot read it: EACCES: permission denied");
  });

  test("deeply nested input is refused, not a crash", () => {
    expect(refusal(`${HEAD}x: ${"[".repeat(50_000)}${"]".repeat(50_000)}\n`)).toContain("config file /etc/kubelet.yaml: invalid YAML");
    expect(refusal(`{"x":${"[".repeat(100_000)}${"]".repeat(100_000)}}`)).toBe("config file /etc/kubelet.yaml: nesting is deeper than 32 levels");
  });
});

describe("findAnchorOrAlias", () => {
  test.each([
    ["a: &x [1]\nb: *x\n", true],
    ["a: x*y\nb: a & b\n", false],
    ["a: \"*x\"\nb: '&y'\nc: 'it''s *not'\n", false],
    ["# &c\na: 1 # *x\n", false],
    ["a: |\n  * item\n  & more\nb: 2\n", false],
    ["a: |\n  text\nb: *x\n", true],
    ["l:\n  - |\n    * x\n  - *y\n", true],
    ["f: [a, *b]\n", true],
    ['f: {"k":*b}\n', true],
    ['f: ["a,b", c*d]\n', false],
    ["- - *a\n", true],
    ["a: !!str &a x\n", true],
    ["--- &a\nb: 1\n", true],
    ["*a : b\n", true],
    ['a: "multi\n  *line"\nb: 1\n', false],
    ["url: http://x/*\n", false],
  ])("%j -> %p", (text, found) => {
    expect(findAnchorOrAlias(text) !== null).toBe(found);
  });
});
