import { expect, test } from "bun:test";
import { Served } from "./served.ts";

class Counter extends Served<{ count(): number }> {
  constructor() {
    super("the counter");
  }
  count(): number {
    return this.ask((c) => c.count(), 0);
  }
}

test("a served view answers `before` until its server serves it, then the server's answer; a second server is refused", () => {
  const view = new Counter();
  expect(view.count()).toBe(0);
  view.serve({ count: () => 7 });
  expect(view.count()).toBe(7);
  expect(() => view.serve({ count: () => 1 })).toThrow("the counter is already served");
  expect(view.count()).toBe(7);
});
