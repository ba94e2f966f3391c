/**
 * `tlsMinVersion` and `tlsCipherSuites` (--tls-min-version,
 * --tls-cipher-suites) in upstream's Go names, mapped to what node:tls takes
 * (OpenSSL names), as component-base's cliflag.TLSVersion and
 * TLSCipherSuites accept them.
 *
 * As in Go, the TLS 1.3 suites are accepted and have no effect: TLS 1.3
 * suites are not configurable there, and Bun's TLS (BoringSSL) keeps its
 * TLS 1.3 suites whatever `ciphers` says, so a list of TLS 1.2 suites only
 * narrows TLS 1.2 (measured: a TLS 1.3 client still connects).
 */

export const TLS_VERSIONS: Readonly<Record<string, "TLSv1" | "TLSv1.1" | "TLSv1.2" | "TLSv1.3">> = {
  VersionTLS10: "TLSv1",
  VersionTLS11: "TLSv1.1",
  VersionTLS12: "TLSv1.2",
  VersionTLS13: "TLSv1.3",
};

/** Go's crypto/tls names (secure and insecure suites, and cliflag's legacy aliases) to OpenSSL's. */
export const TLS12_CIPHER_SUITES: Readonly<Record<string, string>> = {
  TLS_RSA_WITH_RC4_128_SHA: "RC4-SHA",
  TLS_RSA_WITH_3DES_EDE_CBC_SHA: "DES-CBC3-SHA",
  TLS_RSA_WITH_AES_128_CBC_SHA: "AES128-SHA",
  TLS_RSA_WITH_AES_256_CBC_SHA: "AES256-SHA",
  TLS_RSA_WITH_AES_128_CBC_SHA256: "AES128-SHA256",
  TLS_RSA_WITH_AES_128_GCM_SHA256: "AES128-GCM-SHA256",
  TLS_RSA_WITH_AES_256_GCM_SHA384: "AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_RC4_128_SHA: "ECDHE-ECDSA-RC4-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: "ECDHE-ECDSA-AES128-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: "ECDHE-ECDSA-AES256-SHA",
  TLS_ECDHE_RSA_WITH_RC4_128_SHA: "ECDHE-RSA-RC4-SHA",
  TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA: "ECDHE-RSA-DES-CBC3-SHA",
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: "ECDHE-RSA-AES128-SHA",
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: "ECDHE-RSA-AES256-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256: "ECDHE-ECDSA-AES128-SHA256",
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: "ECDHE-RSA-AES128-SHA256",
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: "ECDHE-RSA-AES128-GCM-SHA256",
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: "ECDHE-ECDSA-AES128-GCM-SHA256",
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: "ECDHE-RSA-AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: "ECDHE-ECDSA-AES256-GCM-SHA384",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-RSA-CHACHA20-POLY1305",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: "ECDHE-RSA-CHACHA20-POLY1305",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: "ECDHE-ECDSA-CHACHA20-POLY1305",
};

const TLS13_CIPHER_SUITES = new Set(["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]);

/** What is wrong with the two fields, one message per problem naming the field and flag; empty when they are usable. */
export function tlsOptionProblems(minVersion: string, cipherSuites: readonly string[]): string[] {
  const problems: string[] = [];
  if (minVersion !== "" && !(minVersion in TLS_VERSIONS)) {
    problems.push(`field "tlsMinVersion" (--tls-min-version): unknown TLS version ${JSON.stringify(minVersion)}; one of ${Object.keys(TLS_VERSIONS).join(", ")}`);
  }
  cipherSuites.forEach((name, i) => {
    if (!(name in TLS12_CIPHER_SUITES) && !TLS13_CIPHER_SUITES.has(name)) {
      problems.push(`field "tlsCipherSuites[${i}]" (--tls-cipher-suites): unknown cipher suite ${JSON.stringify(name)}`);
    }
  });
  // Upstream's ValidateKubeletConfiguration: TLS 1.3 suites cannot be chosen, so a list with a TLS 1.3 minimum means nothing.
  if (minVersion === "VersionTLS13" && cipherSuites.length > 0) {
    problems.push(`field "tlsCipherSuites" (--tls-cipher-suites): cannot be set when tlsMinVersion (--tls-min-version) is VersionTLS13`);
  }
  return problems;
}

export class TlsOptionsError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid TLS options: ${problems.join("; ")}`);
    this.name = "TlsOptionsError";
  }
}

/** The node:tls options for the fields; empty fields leave the runtime's defaults (TLS 1.2 and up). Throws TlsOptionsError. */
export function tlsServerOptions(minVersion: string, cipherSuites: readonly string[]): { minVersion?: "TLSv1" | "TLSv1.1" | "TLSv1.2" | "TLSv1.3"; ciphers?: string } {
  const problems = tlsOptionProblems(minVersion, cipherSuites);
  if (problems.length) throw new TlsOptionsError(problems);
  const tls12 = cipherSuites.filter((n) => n in TLS12_CIPHER_SUITES).map((n) => TLS12_CIPHER_SUITES[n]!);
  return {
    ...(minVersion ? { minVersion: TLS_VERSIONS[minVersion]! } : {}),
    ...(tls12.length ? { ciphers: [...new Set(tls12)].join(":") } : {}),
  };
}
