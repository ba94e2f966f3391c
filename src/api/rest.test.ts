import { afterAll, expect, test } from "bun:test";
import { realClock } from "../util/clock.ts";
import { createRestClient } from "./rest.ts";

let concurrent = 0;
let maxConcurrent = 0;
const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    await Bun.sleep(20);
    concurrent--;
    return Response.json({ path: new URL(req.url).pathname });
  },
});
afterAll(() => server.stop(true));

test("no more than maxInFlight requests reach the server at once; all are answered", async () => {
  const rest = createRestClient({
    credentials: { server: `http://127.0.0.1:${server.port}`, headers: {}, insecureSkipVerify: false },
    qps: 0,
    burst: 0,
    clock: realClock,
    userAgent: "test",
    maxInFlight: 2,
  });
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => rest.request<{ path: string }>("GET", `/api/v1/namespaces/ns${i}`)));
  expect(answers.map((a) => a.path)).toEqual(Array.from({ length: 6 }, (_, i) => `/api/v1/namespaces/ns${i}`));
  expect(maxConcurrent).toBe(2);
});
