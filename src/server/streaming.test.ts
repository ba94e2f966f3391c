import { describe, expect, test } from "bun:test";
import { FakeCri } from "../cri/fake.ts";
import { ExecRequest } from "../cri/index.ts";
import type { Pod } from "../pods/schema.ts";
import { podLabels } from "../runtime/labels.ts";
import { FakeClock } from "../util/clock.ts";
import { HttpError } from "./errors.ts";
import { allowedMethods, parsePorts, parseStreamOptions, parseStreamingPath, streamingResolver } from "./streaming.ts";

describe("streaming paths (upstream's routes, with and without {uid})", () => {
  test.each([
    ["/exec/ns/p/c", { kind: "exec", namespace: "ns", pod: "p", container: "c" }],
    ["/exec/ns/p/u1/c", { kind: "exec", namespace: "ns", pod: "p", uid: "u1", container: "c" }],
    ["/attach/ns/p/c", { kind: "attach", namespace: "ns", pod: "p", container: "c" }],
    ["/attach/ns/p/u1/c", { kind: "attach", namespace: "ns", pod: "p", uid: "u1", container: "c" }],
    ["/portForward/ns/p", { kind: "portForward", namespace: "ns", pod: "p" }],
    ["/portForward/ns/p/u1", { kind: "portForward", namespace: "ns", pod: "p", uid: "u1" }],
    ["/run/ns/p/c", { kind: "run", namespace: "ns", pod: "p", container: "c" }],
    ["/run/ns/p/u1/c", { kind: "run", namespace: "ns", pod: "p", uid: "u1", container: "c" }],
    ["/exec/ns/my%20pod/c", { kind: "exec", namespace: "ns", pod: "my pod", container: "c" }],
  ])("%s", (path, target) => {
    expect(parseStreamingPath(path)).toEqual(target as never);
  });

  test.each(["/exec/ns/p", "/exec/ns/p/u/c/x", "/portForward/ns", "/portForward/ns/p/u/x", "/exec/ns//c", "/pods", "/execx/ns/p/c", "/exec/ns/%zz/c"])(
    "%s is not a streaming path",
    (path) => {
      expect(parseStreamingPath(path)).toBeUndefined();
    },
  );

  test("run is POST only; the streams take GET and POST", () => {
    expect(allowedMethods("run")).toEqual(["POST"]);
    expect(allowedMethods("exec")).toEqual(["GET", "POST"]);
    expect(allowedMethods("portForward")).toEqual(["GET", "POST"]);
  });
});

describe("stream options (core/v1 parameter names)", () => {
  const q = (s: string) => new URLSearchParams(s);
  test("input/output/error/tty; a tty drops stderr as upstream", () => {
    expect(parseStreamOptions(q("input=1&output=1&error=1"))).toEqual({ stdin: true, stdout: true, stderr: true, tty: false });
    expect(parseStreamOptions(q("input=1&output=1&error=1&tty=1"))).toEqual({ stdin: true, stdout: true, stderr: false, tty: true });
    expect(parseStreamOptions(q("output=true"))).toEqual({ stdin: false, stdout: true, stderr: false, tty: false });
  });
  test("no stream at all is a 400", () => {
    expect(() => parseStreamOptions(q("tty=1&error=1"))).toThrow("you must specify at least 1 of stdin, stdout, stderr");
  });
  test("ports for WebSocket port forwarding; a bad one is a 400 naming it", () => {
    expect(parsePorts(q("port=80&port=8080,9090"))).toEqual([80, 8080, 9090]);
    expect(parsePorts(q(""))).toEqual([]);
    for (const bad of ["0", "65536", "http", "-1"]) expect(() => parsePorts(q(`port=${bad}`))).toThrow(`unable to parse "${bad}" as a port`);
  });
});

describe("streamingResolver against the fake runtime", () => {
  const BUSYBOX = "localhost/bunlet/busybox:1.0";
  const podOf = (name: string, uid: string): Pod =>
    ({
      metadata: { name, namespace: "default", uid },
      spec: {
        containers: [
          { name: "main", image: BUSYBOX },
          { name: "side", image: BUSYBOX },
        ],
      },
    }) as unknown as Pod;

  async function setup() {
    const clock = new FakeClock();
    const cri = new FakeCri({ clock, images: [BUSYBOX] });
    const sandboxConfig = { metadata: { name: "web", namespace: "default", uid: "u1", attempt: 0 }, labels: podLabels({ name: "web", namespace: "default", uid: "u1" }) };
    const sb = await cri.runPodSandbox(sandboxConfig);
    const start = async (name: string, attempt: number) => {
      const id = await cri.createContainer(
        sb,
        {
          metadata: { name, attempt },
          image: { image: BUSYBOX },
          labels: { ...podLabels({ name: "web", namespace: "default", uid: "u1" }), "io.kubernetes.container.name": name },
        },
        sandboxConfig,
      );
      await cri.startContainer(id);
      return id;
    };
    const old = await start("main", 0);
    cri.exitContainer(old, 1);
    clock.advance(1000);
    const main = await start("main", 1);
    await cri.createContainer(
      sb,
      { metadata: { name: "side" }, image: { image: BUSYBOX }, labels: { ...podLabels({ name: "web", namespace: "default", uid: "u1" }), "io.kubernetes.container.name": "side" } },
      sandboxConfig,
    );
    const resolver = streamingResolver({ pods: { list: () => [{ pod: podOf("web", "u1") }] }, cri });
    return { cri, sb, main, resolver };
  }

  const fails = async (p: Promise<unknown>, status: number, message: string) => {
    try {
      await p;
    } catch (err) {
      expect(err).toBeInstanceOf(HttpError);
      expect((err as HttpError).status).toBe(status as never);
      expect((err as HttpError).message).toBe(message);
      return;
    }
    throw new Error("expected a rejection");
  };

  test("exec goes to the running container of that name with the command and streams", async () => {
    const { cri, main, resolver } = await setup();
    const url = await resolver.streamUrl(
      { kind: "exec", namespace: "default", pod: "web", container: "main" },
      new URLSearchParams("command=sh&command=-c&command=id&input=1&output=1&tty=1"),
    );
    expect(url).toStartWith("http://127.0.0.1:10010/exec/");
    expect(cri.callsOf("exec")).toEqual([[ExecRequest.create({ containerId: main, cmd: ["sh", "-c", "id"], stdin: true, stdout: true, stderr: false, tty: true })]]);
  });

  test("the uid in the path must match; unknown pods and containers are 404s naming them", async () => {
    const { resolver } = await setup();
    const q = new URLSearchParams("command=id&output=1");
    expect(await resolver.streamUrl({ kind: "attach", namespace: "default", pod: "web", uid: "u1", container: "main" }, q)).toStartWith("http://");
    await fails(resolver.streamUrl({ kind: "exec", namespace: "default", pod: "web", uid: "other", container: "main" }, q), 404, 'pod "default/web" with uid other does not exist');
    await fails(resolver.streamUrl({ kind: "exec", namespace: "other", pod: "web", container: "main" }, q), 404, 'pod "other/web" does not exist');
    await fails(resolver.streamUrl({ kind: "exec", namespace: "default", pod: "web", container: "nope" }, q), 404, 'container "nope" not found in pod "default/web"');
    await fails(resolver.streamUrl({ kind: "exec", namespace: "default", pod: "web", container: "side" }, q), 404, 'container "side" in pod "default/web" is not running');
    await fails(resolver.streamUrl({ kind: "exec", namespace: "default", pod: "web", container: "main" }, new URLSearchParams("output=1")), 400, "you must specify a command");
  });

  test("portForward goes to the pod's ready sandbox with the ?port= list", async () => {
    const { cri, sb, resolver } = await setup();
    expect(await resolver.streamUrl({ kind: "portForward", namespace: "default", pod: "web" }, new URLSearchParams("port=8080"))).toStartWith(
      "http://127.0.0.1:10010/portforward/",
    );
    expect(cri.callsOf("portForward")).toEqual([[sb, [8080]]]);
    await cri.stopPodSandbox(sb);
    await fails(resolver.streamUrl({ kind: "portForward", namespace: "default", pod: "web" }, new URLSearchParams()), 404, 'pod "default/web" has no running sandbox');
  });

  test("run answers stdout then stderr; a non-zero exit is a 500 with upstream's message", async () => {
    const { cri, main, resolver } = await setup();
    cri.setExecHandler((id, cmd) => (cmd[0] === "fail" ? { stderr: "boom", exitCode: 3 } : { stdout: `${id === main ? "main" : "?"}:${cmd.join(",")}\n`, stderr: "warn\n" }));
    const t = { kind: "run" as const, namespace: "default", pod: "web", container: "main" };
    expect(new TextDecoder().decode(await resolver.run(t, ["ls", "-l"]))).toBe("main:ls,-l\nwarn\n");
    await fails(resolver.run(t, ["fail", "now"]), 500, "command 'fail now' exited with 3: boom");
  });
});
