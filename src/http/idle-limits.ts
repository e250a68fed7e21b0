/**
 * How long a connection may stay silent. Bun closes it after the servers' `idleTimeout`, whose
 * maximum is 255 s; an upload's own deadline (`upload_idle_timeout_seconds`, answered with 408)
 * must come before that, or the client only sees the connection drop. At 120 s, any setting
 * above ~118 s ended that way.
 */
export const CONNECTION_IDLE_SECONDS = 255;

/** The longest upload idle deadline that still answers 408: a few seconds under the connection's limit. */
export const MAX_UPLOAD_IDLE_SECONDS = 250;

/** `upload_idle_timeout_seconds` as the deadline an upload body is read under, in ms. */
export const uploadIdleMs = (settingSeconds: number) => Math.min(settingSeconds, MAX_UPLOAD_IDLE_SECONDS) * 1000;
