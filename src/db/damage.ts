/**
 * SQLite found the file damaged, or no database at all: by its error code, or by its words when an
 * error was re-wrapped on the way and lost the code. One test for every place that turns such an
 * error into the advice to restore a snapshot (start, commands, `kura check`, the lock file).
 */
export function isSqliteDamage(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return /^SQLITE_(CORRUPT|NOTADB)/.test(String(code ?? "")) || /malformed|not a database/i.test((err as Error | undefined)?.message ?? "");
}
