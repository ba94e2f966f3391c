/**
 * hostPath type checks as upstream's hostPathTypeChecker
 * (pkg/volume/hostpath/host_path.go checkTypeInternal), with its messages:
 * "" checks nothing, the *OrCreate types create what is missing (0755
 * directories, 0644 files), the others require that kind of file.
 */
import { closeSync, mkdirSync, openSync, statSync, type Stats } from "node:fs";
import type { HostPathTypes } from "../pods/volume-schema.ts";

export type HostPathType = (typeof HostPathTypes)[number];

export class HostPathTypeError extends Error {
  override readonly name = "HostPathTypeError";
}

function stat(path: string): Stats | undefined {
  try {
    return statSync(path); // follows symlinks, as os.Stat upstream
  } catch {
    return undefined;
  }
}

export function checkHostPathType(path: string, type: HostPathType | null | undefined): void {
  const fail = (what: string) => {
    throw new HostPathTypeError(`hostPath type check failed: ${path} is not a ${what}`);
  };
  switch (type ?? "") {
    case "":
      return;
    case "DirectoryOrCreate":
      if (!stat(path)) {
        mkdirSync(path, { recursive: true, mode: 0o755 });
        return;
      }
      if (!stat(path)!.isDirectory()) fail("directory");
      return;
    case "Directory":
      if (!stat(path)?.isDirectory()) fail("directory");
      return;
    case "FileOrCreate":
      if (!stat(path)) {
        closeSync(openSync(path, "a", 0o644));
        return;
      }
      if (!stat(path)!.isFile()) fail("file");
      return;
    case "File":
      if (!stat(path)?.isFile()) fail("file");
      return;
    case "Socket":
      if (!stat(path)?.isSocket()) fail("socket file");
      return;
    case "CharDevice":
      if (!stat(path)?.isCharacterDevice()) fail("character device");
      return;
    case "BlockDevice":
      if (!stat(path)?.isBlockDevice()) fail("block device");
      return;
    default:
      throw new HostPathTypeError(`${type} is an invalid volume type`);
  }
}
