/**
 * The API server's validation of a container's resources where it concerns
 * resources that cannot be overcommitted (huge pages, extended resources),
 * for the pods no API server validated: upstream's kubelet runs
 * ValidatePodCreate on every static pod it decodes (config/common.go) and
 * skips a manifest that fails it ("invalid pod: [...]"); the file and URL
 * sources do the same with these errors. The rules are upstream's
 * validateResourceRequirements (pkg/apis/core/validation), after v1
 * defaulting gave each limit without a request that request:
 * - a request of a resource that cannot be overcommitted equals its limit
 *   ("must be equal to <name> limit of <q>"), and has one ("Limit must be
 *   set for non overcommitable resources");
 * - a huge page amount is a whole number of its pages ("<q> is not positive
 *   integer multiple of <name>");
 * - huge pages need cpu or memory in the same container ("HugePages require
 *   cpu or memory").
 * Each error reads as upstream's field.Error prints it. Upstream walks Go maps,
 * so its order varies; here resources are taken by name. Pod-level
 * `spec.resources` is not checked: the kubelet validates static pods with
 * zero PodValidationOptions, whose PodLevelResourcesEnabled is false, so
 * upstream skips validatePodResources for them too.
 */
import { parseQuantity } from "../config/quantity.ts";
import { exactQuantity, HUGEPAGES_PREFIX, isHugePageResourceName } from "../pods/resource-names.ts";
import type { Pod } from "../pods/schema.ts";

type Quantities = Readonly<Record<string, string | number>>;
type Requirements = { limits?: Quantities; requests?: Quantities } | undefined;

/** upstream IsNativeResource: no domain, or a kubernetes.io one. */
const isNativeResource = (name: string): boolean => {
  const slash = name.indexOf("/");
  if (slash < 0) return true;
  const domain = name.slice(0, slash);
  return domain === "kubernetes.io" || domain.endsWith(".kubernetes.io");
};

/** upstream IsOvercommitAllowed: native resources other than huge pages. */
export const isOvercommitAllowed = (name: string): boolean => isNativeResource(name) && !isHugePageResourceName(name);

const quantityValue = (q: string | number): number | undefined => {
  try {
    return parseQuantity(String(q));
  } catch {
    return undefined; // the schema reports quantities that do not parse
  }
};

/** resource.Quantity's String(): canonical, in the manifest's format (binary suffixes stay binary). */
export function quantityString(q: string | number): string {
  const text = String(q);
  const value = quantityValue(text);
  if (value === undefined || !Number.isInteger(value)) return text;
  return exactQuantity(value, /[KMGTPE]i$/.test(text));
}

const invalid = (path: string, value: string, detail: string) => `${path}: Invalid value: ${JSON.stringify(value)}: ${detail}`;

/** upstream validateResourceRequirements for one container's resources (requests defaulted from limits), at `path`. */
export function resourceRequirementErrors(resources: Requirements, path: string): string[] {
  const limits = resources?.limits ?? {};
  const requests = { ...limits, ...(resources?.requests ?? {}) };
  const errors: string[] = [];
  const byName = (o: Quantities) => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const pageMultiple = (name: string, q: string | number, at: string) => {
    if (!isHugePageResourceName(name)) return;
    const value = quantityValue(q);
    const page = quantityValue(name.slice(HUGEPAGES_PREFIX.length));
    if (value === undefined || page === undefined || page <= 0) return;
    if (!(value > 0 && Number.isInteger(value / page))) errors.push(invalid(at, quantityString(q), `${quantityString(q)} is not positive integer multiple of ${name}`));
  };
  for (const [name, q] of byName(limits)) pageMultiple(name, q, `${path}.limits[${name}]`);
  for (const [name, q] of byName(requests)) {
    const limit = limits[name];
    if (limit !== undefined) {
      const [r, l] = [quantityValue(q), quantityValue(limit)];
      if (r !== undefined && l !== undefined && r !== l && !isOvercommitAllowed(name))
        errors.push(invalid(`${path}.requests`, quantityString(q), `must be equal to ${name} limit of ${quantityString(limit)}`));
    } else if (!isOvercommitAllowed(name)) errors.push(`${path}.limits: Required value: Limit must be set for non overcommitable resources`);
    pageMultiple(name, q, `${path}.requests[${name}]`);
  }
  const names = [...Object.keys(limits), ...Object.keys(requests)];
  if (names.some(isHugePageResourceName) && !names.some((n) => n === "cpu" || n === "memory")) errors.push(`${path}: Forbidden: HugePages require cpu or memory`);
  return errors;
}

/** The errors of every container and init container of `pod`; empty when the API server would take it. */
export function podResourceErrors(pod: Pod): string[] {
  return [
    ...(pod.spec.initContainers ?? []).flatMap((c, i) => resourceRequirementErrors(c.resources, `spec.initContainers[${i}].resources`)),
    ...pod.spec.containers.flatMap((c, i) => resourceRequirementErrors(c.resources, `spec.containers[${i}].resources`)),
  ];
}

/** upstream's decode error for a static pod that fails validation. */
export const invalidPodMessage = (errors: readonly string[]): string => `invalid pod: [${errors.join(" ")}]`;
