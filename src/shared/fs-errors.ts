/**
 * A file-system error (Node's `EEXIST: file already exists, mkdir '…'`) in Chinese for the
 * operator: what is wrong with which path. The caller adds what to do. Undefined when the error
 * is not one of these, so the caller can word it otherwise.
 */
export function fsProblem(err: unknown): string | undefined {
  const e = err as NodeJS.ErrnoException | null;
  const code = typeof e?.code === "string" ? e.code : undefined;
  if (!code) return undefined;
  const named = (p: unknown) => (typeof p === "string" && p !== "" ? p : undefined);
  // A rename or copy onto a directory (or an existing name) is about its destination.
  const dest = (code === "EISDIR" || code === "EEXIST" || code === "ENOTEMPTY") && named((e as { dest?: unknown }).dest);
  const path = dest || named(e?.path) || "文件";
  switch (code) {
    case "EEXIST":
      return e?.syscall === "mkdir" ? `${path} 已存在，但不是目录` : `${path} 已存在`;
    case "ENOTDIR":
      return `${path} 路径中有一级不是目录`;
    case "EISDIR":
    case "ENOTEMPTY":
      return `${path} 是一个目录，不是文件`;
    case "ENOENT":
      return `${path} 不存在`;
    case "EACCES":
    case "EPERM":
      return `没有权限访问 ${path}`;
    case "ENOSPC":
    case "EDQUOT":
      return `磁盘已满：${path} 所在的文件系统没有剩余空间`;
    case "EROFS":
      return `文件系统只读：${path}`;
    case "ENAMETOOLONG":
      return `路径过长：${path}`;
    case "ELOOP":
      return `${path} 的符号链接层数过多（可能指向自身）`;
    case "EMFILE":
    case "ENFILE":
      return "打开的文件过多：请提高进程的文件描述符上限（systemd 单元的 LimitNOFILE=）";
    case "EIO":
      return `读写 ${path} 时发生磁盘 I/O 错误`;
  }
  return undefined;
}
