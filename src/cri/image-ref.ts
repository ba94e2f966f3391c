/**
 * Normalizes an image reference the way containerd's CRI plugin (via the
 * docker reference library) does: `busybox` -> `docker.io/library/busybox:latest`.
 * Image ids (`sha256:...`) are returned unchanged.
 */
export function normalizeImageRef(ref: string): string {
  if (/^sha256:[0-9a-f]+$/.test(ref)) return ref;
  let name = ref;
  let suffix = "";
  const at = name.indexOf("@");
  if (at >= 0) {
    suffix = name.slice(at);
    name = name.slice(0, at);
  }
  const lastSlash = name.lastIndexOf("/");
  const colon = name.lastIndexOf(":");
  if (colon > lastSlash) {
    suffix = name.slice(colon) + suffix;
    name = name.slice(0, colon);
  } else if (!suffix) {
    suffix = ":latest";
  }
  const first = name.split("/")[0] ?? "";
  const hasDomain = name.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost");
  if (!hasDomain) name = "docker.io/" + (name.includes("/") ? name : "library/" + name);
  return name + suffix;
}
