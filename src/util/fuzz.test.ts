import { expect, test } from "bun:test";
import { arbitraryJson, forAll, mutateText, mutateValue, Rng } from "./fuzz.ts";

test("the same seed gives the same inputs (failures replay)", () => {
  const draw = (seed: number) => {
    const rng = new Rng(seed);
    return [arbitraryJson(rng, ["a", "b"]), mutateText(rng, "key: value\nlist: [1, 2]\n"), mutateValue(rng, { a: [1, { b: 2 }] })];
  };
  expect(JSON.stringify(draw(42))).toBe(JSON.stringify(draw(42)));
  expect(JSON.stringify(draw(42))).not.toBe(JSON.stringify(draw(43)));
});

test("mutateValue leaves its input alone and changes the copy", () => {
  const doc = { a: [1, { b: 2 }], c: "x" };
  const rng = new Rng(7);
  let changed = 0;
  for (let i = 0; i < 200; i++) if (JSON.stringify(mutateValue(rng, doc)) !== JSON.stringify(doc)) changed++;
  expect(doc).toEqual({ a: [1, { b: 2 }], c: "x" });
  expect(changed).toBeGreaterThan(150);
});

test("forAll names the seed, the case and the input of a failure", () => {
  expect(() =>
    forAll(
      { seed: 1, count: 10 },
      (_rng, i) => i,
      (i) => expect(i).toBeLessThan(3),
    ),
  ).toThrow(/fuzz case 3 \(seed 1\) failed: .*\ninput: 3/s);
});
