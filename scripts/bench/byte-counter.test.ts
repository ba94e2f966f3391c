import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startByteCounter } from "./byte-counter.ts";

// An echo server that answers each chunk twice, so the two directions differ.
const echo = createServer((s) => s.on("data", (d) => s.write(Buffer.concat([d, d]))));
await new Promise<void>((res) => echo.listen(0, "127.0.0.1", () => res()));
afterAll(() => void echo.close());

test("bytes each way are counted, and the kubeconfig copy points at the counter", async () => {
  const counter = await startByteCounter(`https://127.0.0.1:${(echo.address() as { port: number }).port}`);
  const answer = await new Promise<string>((res) => {
    const c = connect(counter.port, "127.0.0.1", () => c.write("hello"));
    let got = "";
    c.on("data", (d) => {
      got += d.toString();
      if (got.length === 10) {
        c.end();
        res(got);
      }
    });
  });
  expect(answer).toBe("hellohello");
  expect({ sent: counter.sent(), received: counter.received() }).toEqual({ sent: 5, received: 10 });
  const dir = mkdtempSync(join(tmpdir(), "byte-counter-"));
  writeFileSync(join(dir, "in"), "clusters:\n- cluster:\n    certificate-authority: ca.crt\n    server: https://127.0.0.1:6443\n  name: c\n");
  expect(readFileSync(counter.kubeconfig(join(dir, "in"), join(dir, "out")), "utf8")).toContain(`server: https://127.0.0.1:${counter.port}\n`);
  await counter.close();
});
