/** Rewrites the generated settings table in docs/configuration.md from src/config/settings.ts. */
import { readFileSync, writeFileSync } from "node:fs";
import { settingsMarkdown } from "../src/config/settings.ts";

const path = new URL("../docs/configuration.md", import.meta.url);
const doc = readFileSync(path, "utf8");
const re = /(<!-- BEGIN GENERATED SETTINGS[^\n]*-->\n)[\s\S]*?(<!-- END GENERATED SETTINGS -->)/;
if (!re.test(doc)) throw new Error("docs/configuration.md has no generated settings markers");
writeFileSync(
  path,
  doc.replace(re, (_m, begin: string, end: string) => begin + settingsMarkdown() + end),
);
