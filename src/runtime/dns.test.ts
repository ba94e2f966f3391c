import { expect, test } from "bun:test";
import { parseResolvConf } from "./dns.ts";

test("parseResolvConf keeps three servers, the last search line and options", () => {
  const text = "# comment\nnameserver 1.1.1.1\nnameserver 8.8.8.8 ; x\nnameserver 9.9.9.9\nnameserver 4.4.4.4\nsearch a.com\nsearch b.com c.com\noptions ndots:2 edns0\n";
  expect(parseResolvConf(text)).toEqual({ servers: ["1.1.1.1", "8.8.8.8", "9.9.9.9"], searches: ["b.com", "c.com"], options: ["ndots:2", "edns0"] });
});
