/**
 * A backup interrupted by a crash (kill -9, power loss) is taken again at the next start
 * instead of waiting a whole `backup_interval_hours`: a marker file next to the database says
 * a snapshot was in progress. A file, not a row: the snapshot copies the database, and a
 * restored snapshot must not carry the marker along.
 */
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const MARKER = "backup.in-progress";

export const markerPath = (dataDir: string) => join(dataDir, MARKER);

export function markBackupStarted(dataDir: string, name: string): void {
  writeFileSync(markerPath(dataDir), `${name}\n`);
}

export function markBackupEnded(dataDir: string): void {
  rmSync(markerPath(dataDir), { force: true });
}

export function backupWasInterrupted(dataDir: string): boolean {
  return existsSync(markerPath(dataDir));
}
