/**
 * An image name checked and given its default tag as upstream's
 * applyDefaultImageTag (pkg/kubelet/images/image_manager.go:359) through
 * parsers.ParseImageName and github.com/distribution/reference v0.6.0's
 * ParseNormalizedNamed, with their error words: a name the kubelet cannot
 * parse waits with InvalidImageName instead of reaching the runtime.
 */

const alphanumeric = "[a-z0-9]+";
const separator = "(?:[._]|__|[-]+)";
const domainNameComponent = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const host = `(?:${domainNameComponent}(?:\\.${domainNameComponent})*|\\[(?:[a-fA-F0-9:]+)\\])`;
const domainAndPort = `${host}(?::[0-9]+)?`;
const pathComponent = `${alphanumeric}(?:${separator}${alphanumeric})*`;
const remoteName = `${pathComponent}(?:/${pathComponent})*`;
const tag = "[\\w][\\w.-]{0,127}";
const digest = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}";
const REFERENCE = new RegExp(`^((?:${domainAndPort}/)?${remoteName})(?::(${tag}))?(?:@(${digest}))?$`);
const NAME = new RegExp(`^(?:(${domainAndPort})/)?(${remoteName})$`);
const IDENTIFIER = /^[a-f0-9]{64}$/;
const REPOSITORY_NAME_MAX = 255;
/** go-digest's registered algorithms (the kubelet imports sha256 and sha512) and their hex lengths. */
const DIGEST_HEX_LENGTH: Readonly<Record<string, number>> = { sha256: 64, sha384: 96, sha512: 128 };

export class InvalidImageNameError extends Error {
  override readonly name = "InvalidImageNameError";
}

/** reference.splitDockerDomain: the domain and the rest ("docker.io", "library/busybox:1"). */
function splitDockerDomain(name: string): { domain: string; remainder: string } {
  const slash = name.indexOf("/");
  if (slash < 0) return { domain: "docker.io", remainder: `library/${name}` };
  const first = name.slice(0, slash);
  const rest = name.slice(slash + 1);
  let domain = "docker.io";
  let remainder = name;
  if (first === "localhost" || /[.:]/.test(first) || first.toLowerCase() !== first) [domain, remainder] = [first, rest];
  else if (first === "index.docker.io") remainder = rest;
  if (domain === "docker.io" && !remainder.includes("/")) remainder = `library/${remainder}`;
  return { domain, remainder };
}

/** go-digest Parse's checks, with its words. */
function digestProblem(d: string): string | undefined {
  const colon = d.indexOf(":");
  const algorithm = d.slice(0, colon);
  const hex = d.slice(colon + 1);
  const length = DIGEST_HEX_LENGTH[algorithm];
  if (length === undefined) return "unsupported digest algorithm";
  if (hex.length !== length) return "invalid checksum digest length";
  if (!/^[a-f0-9]+$/.test(hex)) return "invalid checksum digest format";
  return undefined;
}

/** reference.ParseNormalizedNamed's error for a name, or undefined when it parses; and its tag and digest. */
function parseNormalizedNamed(s: string): { error: string } | { tag: string; digest: string } {
  if (IDENTIFIER.test(s)) return { error: `invalid repository name (${s}), cannot specify 64-byte hexadecimal strings` };
  const { domain, remainder } = splitDockerDomain(s);
  const tagSep = remainder.indexOf(":");
  const remote = tagSep > -1 ? remainder.slice(0, tagSep) : remainder;
  if (remote.toLowerCase() !== remote) return { error: `invalid reference format: repository name (${remote}) must be lowercase` };
  const full = `${domain}/${remainder}`;
  const m = REFERENCE.exec(full);
  if (!m) return { error: REFERENCE.test(full.toLowerCase()) ? "repository name must be lowercase" : "invalid reference format" };
  const path = NAME.exec(m[1]!)?.[2] ?? m[1]!;
  if (path.length > REPOSITORY_NAME_MAX) return { error: `repository name must not be more than ${REPOSITORY_NAME_MAX} characters` };
  const problem = m[3] ? digestProblem(m[3]) : undefined;
  if (problem) return { error: problem };
  return { tag: m[2] ?? "", digest: m[3] ?? "" };
}

/**
 * Upstream applyDefaultImageTag: the name with ":latest" when it has neither
 * tag nor digest; an InvalidImageNameError with upstream's message
 * ("Failed to apply default image tag ...") when it does not parse.
 */
export function withDefaultTag(image: string): string {
  const parsed = parseNormalizedNamed(image);
  if ("error" in parsed) throw new InvalidImageNameError(`Failed to apply default image tag "${image}": couldn't parse image name "${image}": ${parsed.error}`);
  const tagOrDefault = parsed.tag || (parsed.digest ? "" : "latest");
  return !parsed.digest && tagOrDefault && !image.endsWith(`:${tagOrDefault}`) ? `${image}:${tagOrDefault}` : image;
}
