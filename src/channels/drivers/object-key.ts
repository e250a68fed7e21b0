/**
 * Validation of the '/'-separated relative keys every driver receives. Rejecting
 * odd shapes up front (rather than per backend) means a key that is valid on one
 * channel is valid on all of them, and no key can climb out of a driver's base.
 */
export function assertSafeKey(key: string): void {
  const reason = unsafeKeyReason(key);
  if (reason) throw new Error(`非法对象键 (${reason}): ${JSON.stringify(key)}`);
}

function unsafeKeyReason(key: string): string | null {
  if (key === "") return "为空";
  if (key.includes("\0")) return "包含 NUL";
  if (key.includes("\\")) return "包含反斜杠";
  if (key.startsWith("/")) return "不能是绝对路径";
  for (const segment of key.split("/")) {
    if (segment === "") return "包含空路径段";
    if (segment === "." || segment === "..") return "包含 . 或 .. 路径段";
  }
  return null;
}

/**
 * A channel's configured `path` (already trimmed of leading and trailing '/') must follow the key
 * rules too; a bad one is refused saying why, never echoing the value (spec 6.3).
 */
export function assertSafeRootPath(root: string, label: string, fail: (message: string) => Error = (m) => new Error(m)): void {
  const reason = unsafeKeyReason(root);
  if (reason) throw fail(`${label} path 无效（${reason}）`);
}

/** Prefixes may be empty or end with '/', but otherwise follow key rules. */
export function assertSafePrefix(prefix: string): void {
  if (prefix === "") return;
  assertSafeKey(prefix.endsWith("/") ? prefix.slice(0, -1) : prefix);
}

/** How many folder levels below a channel's root `dirKey` lies ("" is the root: 0). Listing walks bound it. */
export function keyDepth(dirKey: string): number {
  return dirKey === "" ? 0 : dirKey.split("/").length;
}
