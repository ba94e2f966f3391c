// cpuManagerPolicyOptions as upstream 1.34's NewStaticPolicyOptions checks them (cpumanager/policy_options.go).
import { describe, expect, test } from "bun:test";
import { alignBySocketConfigError, CpuPolicyOptionsError, parseStaticPolicyOptions } from "./cpu-policy-options.ts";

describe("parseStaticPolicyOptions (upstream NewStaticPolicyOptions, 1.34)", () => {
  const gates = { alpha: false, beta: true };
  const error = (o: Record<string, string>, g = gates) => {
    try {
      parseStaticPolicyOptions(o, g);
      return "parsed";
    } catch (err) {
      expect(err).toBeInstanceOf(CpuPolicyOptionsError);
      return (err as Error).message;
    }
  };

  test("full-pcpus-only (stable) and distribute-cpus-across-numa (beta, on by default) are acted on, values as Go booleans", () => {
    expect(parseStaticPolicyOptions({ "full-pcpus-only": "true", "distribute-cpus-across-numa": "1" }, gates)).toEqual({
      fullPcpusOnly: true,
      distributeCpusAcrossNuma: true,
      alignBySocket: false,
    });
    expect(parseStaticPolicyOptions({ "distribute-cpus-across-numa": "False" }, gates)).toEqual({ fullPcpusOnly: false, distributeCpusAcrossNuma: false, alignBySocket: false });
    expect(parseStaticPolicyOptions({ "full-pcpus-only": "true" }, { alpha: false, beta: false }).fullPcpusOnly).toBe(true);
    expect(error({ "distribute-cpus-across-numa": "yes" })).toBe('bad value for option "distribute-cpus-across-numa": strconv.ParseBool: parsing "yes": invalid syntax');
  });

  test("the beta option needs CPUManagerPolicyBetaOptions, alpha ones CPUManagerPolicyAlphaOptions; unknown ones are refused", () => {
    expect(error({ "distribute-cpus-across-numa": "true" }, { alpha: true, beta: false })).toBe(
      'CPU Manager Policy Beta-level Options not enabled, but option "distribute-cpus-across-numa" provided',
    );
    expect(error({ "align-by-socket": "true" })).toBe('CPU Manager Policy Alpha-level Options not enabled, but option "align-by-socket" provided');
    expect(error({ "spread-everything": "true" })).toBe('unknown CPU Manager Policy option: "spread-everything"');
  });

  test("upstream's incompatible pairs, then every option this agent does not implement, are refused by name", () => {
    expect(error({ "distribute-cpus-across-numa": "true", "distribute-cpus-across-cores": "true" }, { alpha: true, beta: true })).toBe(
      "static policy options distribute-cpus-across-numa and distribute-cpus-across-cores can not be used at the same time",
    );
    expect(error({ "distribute-cpus-across-numa": "true", "prefer-align-cpus-by-uncorecache": "true" })).toBe(
      "static policy options prefer-align-cpus-by-uncorecache and distribute-cpus-across-numa can not be used at the same time",
    );
    for (const name of ["distribute-cpus-across-cores", "strict-cpu-reservation", "prefer-align-cpus-by-uncorecache"])
      expect(error({ [name]: "false" }, { alpha: true, beta: true })).toContain(`"${name}": this CPU manager policy option is not implemented by this agent`);
  });

  test("align-by-socket (alpha) with CPUManagerPolicyAlphaOptions; not with the single-numa-node topology manager policy (upstream TestValidateStaticPolicyOptions)", () => {
    const opts = parseStaticPolicyOptions({ "align-by-socket": "true" }, { alpha: true, beta: true });
    expect(opts).toEqual({ fullPcpusOnly: false, distributeCpusAcrossNuma: false, alignBySocket: true });
    expect(alignBySocketConfigError(opts, "single-numa-node")).toBe("Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option");
    for (const policy of ["none", "best-effort", "restricted"]) expect(alignBySocketConfigError(opts, policy)).toBeUndefined();
    expect(alignBySocketConfigError(parseStaticPolicyOptions({ "full-pcpus-only": "true" }, gates), "single-numa-node")).toBeUndefined();
  });
});
