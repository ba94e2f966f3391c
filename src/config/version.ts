/** The upstream release whose flags, config file and API this agent follows. */
export const KUBERNETES_VERSION = "v1.34.0";

/**
 * The --version line, `Kubernetes v1.34.0-bunlet+<build>` like upstream's
 * `Kubernetes v1.34.0`; the build script defines the build version, and a
 * run from source says "dev".
 */
export function kubeletVersion(buildVersion: string | undefined): string {
  const build = (buildVersion ?? "").replace(/[^0-9A-Za-z.-]/g, "-") || "dev";
  return `Kubernetes ${KUBERNETES_VERSION}-bunlet+${build}`;
}
