import { afterAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { cpuTicks, parseStat, ticksOfCommands } from "./proc.ts";

// A name of this process's own, so that no other process (another test run's) counts or exits in between.
const ownName = readFileSync("/proc/self/comm", "utf8").trim();
const testName = `proc-test-${process.pid}`.slice(0, 15);
writeFileSync("/proc/self/comm", testName);
afterAll(() => writeFileSync("/proc/self/comm", ownName));

test("ticksOfCommands counts the CPU of the processes of that name", () => {
  // The process's own ticks read just before and just after bound the scan's (the clock ticks on meanwhile).
  const scan = () => {
    const low = cpuTicks(process.pid);
    const ticks = ticksOfCommands([testName]);
    const high = cpuTicks(process.pid);
    expect(ticks).toBeGreaterThanOrEqual(low);
    expect(ticks).toBeLessThanOrEqual(high);
    return ticks;
  };
  const before = scan();
  const until = performance.now() + 120;
  let x = 0;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  expect(x).toBeGreaterThan(0);
  expect(scan()).toBeGreaterThan(before);
});

test("ticksOfCommands is 0 for a name no process has", () => {
  expect(ticksOfCommands(["no-such-command"])).toBe(0);
});

test("parseStat reads a command name holding spaces and parentheses, and utime + stime after it", () => {
  const stat = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 3 2 20 0 6 0 1000 2000000 3000 18446744073709551615";
  expect(parseStat(stat)).toEqual({ comm: "a) b (c)", ticks: 22 });
});
