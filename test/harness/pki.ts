// Certificates for tests, made with openssl (the product itself never needs
// it): a leaf signed by a CA directory holding ca.crt and ca.key (the test
// control plane's pki/, or a foreign CA a test makes), ECDSA P-256, two days.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export function openssl(...args: string[]): void {
  const r = Bun.spawnSync(["openssl", ...args], { stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr}`);
}

/**
 * `<outDir>/<name>.crt` and `.key` for `subject` (an openssl -subj string),
 * for client or server authentication, with DNS/IP SANs when given.
 */
export function issueCertificate(opts: { caDir: string; outDir: string; name: string; subject: string; usage: "clientAuth" | "serverAuth"; altNames?: string }): {
  cert: string;
  key: string;
} {
  const { caDir, outDir, name } = opts;
  const at = (ext: string) => join(outDir, `${name}.${ext}`);
  openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", at("key"), "-subj", opts.subject, "-out", at("csr"));
  writeFileSync(at("ext"), `${opts.altNames ? `subjectAltName=${opts.altNames}\n` : ""}extendedKeyUsage=${opts.usage}\n`);
  openssl(
    "x509",
    "-req",
    "-in",
    at("csr"),
    "-CA",
    join(caDir, "ca.crt"),
    "-CAkey",
    join(caDir, "ca.key"),
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    at("ext"),
    "-out",
    at("crt"),
  );
  return { cert: at("crt"), key: at("key") };
}
