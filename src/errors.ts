/**
 * Domain errors: what went wrong in the service's own terms, with a Chinese message
 * that is safe to show to users. Domain code throws these; each surface maps them to
 * its protocol in one place (JSON statuses in src/http/errors.ts, S3 codes in
 * src/s3/errors.ts), so no domain module knows about HTTP or XML.
 */
export abstract class DomainError extends Error {
  abstract readonly kind: DomainErrorKind;
}

export type DomainErrorKind = "invalid" | "unauthenticated" | "forbidden" | "not_found" | "conflict" | "quota_exceeded" | "too_many" | "unavailable";

/**
 * What exactly was wrong with the input: the surfaces tell these apart (413, 415, 422 in HTTP).
 * `stalled`: the body stopped arriving (no bytes within the upload idle timeout), 408 in HTTP.
 */
export type InvalidProblem = "malformed" | "too_large" | "unsupported_type" | "unprocessable" | "stalled";

/** The request's input is wrong; repeating it unchanged fails again. */
export class Invalid extends DomainError {
  readonly kind = "invalid";
  constructor(
    message: string,
    readonly problem: InvalidProblem = "malformed",
  ) {
    super(message);
    this.name = "Invalid";
  }
}

/** No valid credentials; `challenge` is the scheme to offer (a WWW-Authenticate value). */
export class Unauthenticated extends DomainError {
  readonly kind = "unauthenticated";
  constructor(
    message: string,
    readonly challenge?: string,
  ) {
    super(message);
    this.name = "Unauthenticated";
  }
}

/** Known caller, not allowed; `challenge` names a missing scope when there is one. */
export class Forbidden extends DomainError {
  readonly kind = "forbidden";
  constructor(
    message: string,
    readonly challenge?: string,
  ) {
    super(message);
    this.name = "Forbidden";
  }
}

export class NotFound extends DomainError {
  readonly kind = "not_found";
  constructor(message = "目标不存在") {
    super(message);
    this.name = "NotFound";
  }
}

/** The target's current state forbids the change (a duplicate name, a sole copy, already decided). */
export class Conflict extends DomainError {
  readonly kind = "conflict";
  constructor(message: string) {
    super(message);
    this.name = "Conflict";
  }
}

/** The owner's storage quota would be exceeded. */
export class QuotaExceeded extends DomainError {
  readonly kind = "quota_exceeded";
  constructor(message = "存储配额已满") {
    super(message);
    this.name = "QuotaExceeded";
  }
}

/** Too many requests for now; retry after `retryAfterSeconds`. */
export class TooMany extends DomainError {
  readonly kind = "too_many";
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
    this.name = "TooMany";
  }
}

/** A dependency (storage channels, disk) cannot serve now; worth retrying later. */
export class Unavailable extends DomainError {
  readonly kind = "unavailable";
  constructor(
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = "Unavailable";
  }
}

/**
 * True when an error means the client's request was refused (a 4xx of any surface),
 * false for faults of the service or its dependencies. Surface errors carry a numeric
 * `status`; this reads it without importing them.
 */
export function isClientRejection(err: unknown): boolean {
  if (err instanceof DomainError) return err.kind !== "unavailable";
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === "number" && status >= 400 && status < 500;
}

/**
 * A full file system (or quota) under the data dir, whoever hit it: a temp file (ENOSPC/EDQUOT)
 * or SQLite ("database or disk is full"). It is a temporary condition of the server, not a bug
 * in the request, so it is answered as one clear 503 instead of an internal error.
 */
export function isDiskFull(err: unknown): boolean {
  return faultAt(err, DISK_FULL, 0);
}

/**
 * The process out of file descriptors (EMFILE) or the system out of open files (ENFILE): a
 * temporary condition of the server (too many connections at once, a limit set too low).
 */
export function isOutOfFileDescriptors(err: unknown): boolean {
  return faultAt(err, OUT_OF_DESCRIPTORS, 0);
}

/**
 * The database locked by another process for longer than the busy timeout (an operator's
 * `sqlite3 kura.db` left inside a write transaction, a backup tool taking a write lock): the
 * server's temporary condition, not a bug in the request.
 */
export function isDatabaseLocked(err: unknown): boolean {
  return faultAt(err, DATABASE_LOCKED, 0);
}

/**
 * The data dir's file system refusing writes: remounted read-only after disk errors (ext4's
 * `errors=remount-ro`, the default on most VPS images), or the disk answering I/O errors. SQLite
 * reports it as "disk I/O error" (SQLITE_IOERR_WRITE) on a file it opened writable, or as a
 * read-only database; files as EROFS or EIO. Nothing the client can change, and nothing that ends
 * by itself: the operator has to repair the disk.
 */
export function isStorageFailing(err: unknown): boolean {
  return faultAt(err, STORAGE_FAILING, 0);
}

interface Fault {
  /** Error codes, each also with SQLite's extended suffixes (`SQLITE_IOERR` matches `SQLITE_IOERR_WRITE`). */
  codes: string[];
  message: RegExp;
}
const DISK_FULL: Fault = { codes: ["ENOSPC", "EDQUOT", "SQLITE_FULL"], message: /database or disk is full|no space left on device|ENOSPC/i };
const OUT_OF_DESCRIPTORS: Fault = { codes: ["EMFILE", "ENFILE"], message: /too many open files|EMFILE|ENFILE/i };
const DATABASE_LOCKED: Fault = { codes: ["SQLITE_BUSY"], message: /^database is locked$/ };
const STORAGE_FAILING: Fault = {
  codes: ["EROFS", "EIO", "SQLITE_IOERR", "SQLITE_READONLY"],
  message: /^disk I\/O error$|^attempt to write a readonly database$|read-only file system|^EROFS\b|^EIO\b/i,
};

function faultAt(err: unknown, fault: Fault, depth: number): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === "string" && fault.codes.some((c) => code === c || code.startsWith(`${c}_`))) return true;
  if (typeof message === "string" && fault.message.test(message)) return true;
  // A driver's Chinese wrapper keeps the file-system error as its cause.
  return depth < 4 && err instanceof Error && faultAt(err.cause, fault, depth + 1);
}
