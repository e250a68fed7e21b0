/**
 * The process's file descriptor limit, checked at start-up. Every connection, upload temp file,
 * channel file and SQLite file takes one; at the limit, new connections wait unaccepted, uploads
 * fail, and Bun's listener spins on `accept()` (oven-sh/bun#32705: a core busy until a descriptor
 * frees). Bun raises the soft limit to the hard one when it starts, so what is left is the hard
 * limit the service manager gave (systemd's LimitNOFILE=, 65536 in deploy/kura.service).
 */
import { readFileSync } from "node:fs";
import type { Logger } from "./log";

/** Below this many descriptors a public instance can be starved by a few hundred slow connections. */
export const LOW_OPEN_FILE_LIMIT = 8192;
/** What deploy/kura.service sets. */
const RECOMMENDED_OPEN_FILE_LIMIT = 65536;

/** The soft "Max open files" of a /proc/<pid>/limits text; undefined when absent, Infinity when unlimited. */
export function openFileLimit(limits: string): number | undefined {
  const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
  if (soft === undefined) return undefined;
  if (soft === "unlimited") return Number.POSITIVE_INFINITY;
  const n = Number(soft);
  return Number.isInteger(n) ? n : undefined;
}

/** Warns once at start-up when the limit is low (nothing on systems without /proc). */
export function warnIfFewFileDescriptors(log: Pick<Logger, "warn">, readLimits = () => readFileSync("/proc/self/limits", "utf8")) {
  let limit: number | undefined;
  try {
    limit = openFileLimit(readLimits());
  } catch {
    return;
  }
  if (limit === undefined || limit >= LOW_OPEN_FILE_LIMIT) return;
  log.warn(
    `进程的文件描述符上限偏低：连接和上传较多时会耗尽，新连接将无法接入、上传失败，请提高上限（systemd 单元的 LimitNOFILE=，建议 ${RECOMMENDED_OPEN_FILE_LIMIT}）`,
    {
      limit,
      recommended: RECOMMENDED_OPEN_FILE_LIMIT,
    },
  );
}
