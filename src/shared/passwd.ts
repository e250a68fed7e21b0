import { readFileSync } from "node:fs";

/**
 * The account name /etc/passwd gives `uid`, if any: Bun's os.userInfo() reports "unknown" as the
 * name, and a minimal container may have no passwd file at all (then undefined).
 */
export function userNameOf(uid: number | undefined): string | undefined {
  if (uid === undefined) return undefined;
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const [name, , id] = line.split(":");
      if (name && id === String(uid)) return name;
    }
  } catch {
    // No readable passwd file.
  }
  return undefined;
}
