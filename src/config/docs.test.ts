/** docs/configuration.md is the reference operators read: it must name every field and flag. */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { FLAGS } from "./flag-table.ts";
import { KubeletConfigurationFileSchema } from "./kubelet-config.ts";

const doc = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8");

test("every config file field is in docs/configuration.md", () => {
  const missing = Object.keys(KubeletConfigurationFileSchema.entries).filter((f) => !doc.includes(`\`${f}`));
  expect(missing).toEqual([]);
});

test("every flag is in docs/configuration.md", () => {
  const missing = FLAGS.filter((f) => !doc.includes(`--${f.name}`) && !(f.short && doc.includes(`-${f.short}`))).map((f) => f.name);
  expect(missing).toEqual([]);
});
