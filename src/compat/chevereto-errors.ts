// Which HTTP status and `error.code` a refusal of the Chevereto API v1 surface gets.
//
// Chevereto answers every error of its API route with HTTP 400, `status_code: 400` and its own
// `error.code` (json_error() in app/src/Legacy/G/functions.php of chevereto/chevereto and
// lib/G/functions.php of Chevereto-Free; the codes in app/legacy/routes/api.php): 100 no or invalid
// key, 110 API version, 120 API action or invalid base64, 130 empty upload source. Kura gives those
// refusals exactly that answer, so a script that branches on `error.code == 130` or on
// `status_code == 400` works unchanged.
//
// Every other refusal keeps Kura's own status, as HTTP status, `status_code` and `error.code`
// alike: 429 and 503 (with Retry-After: a client waits and retries instead of giving up), 413 and
// 408 (the rest of the body is left unread and the connection closed, which proxies and HTTP
// clients understand from the status), 415, 422, 403, 500. Chevereto has no such states at the
// route (its upload class's internal codes have no counterpart here), and the clients that matter
// read no status anyway: ShareX's Chevereto uploader reads only `url`, `url_viewer` and `thumb.url`
// from a 200 and shows the body of anything else, and the axios-based PicGo plugins reject every
// non-2xx answer before looking at it.
import { Invalid } from "../errors";
import type { ApiError } from "../http/errors";

/** Chevereto's codes (app/legacy/routes/api.php). */
export const CHEVERETO_CODE = {
  /** "No key provided" / "Invalid API key." */
  key: 100,
  /** "Invalid API action" (only `upload` exists); also "Invalid base64 string". */
  action: 120,
  base64: 120,
  /** "Empty upload source" / "Empty source". */
  source: 130,
} as const;

/** A refusal Chevereto's API route itself makes: answered with HTTP 400 and Chevereto's code. */
export class CheveretoRefusal extends Invalid {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
    this.name = "CheveretoRefusal";
  }
}

export interface CheveretoFailure {
  status: number;
  code: number;
  headers: Record<string, string>;
}

/**
 * The answer to a refusal on /api/1/upload: `err` as the JSON surfaces map it, `caught` as thrown.
 * A failed key (401 elsewhere in Kura) becomes Chevereto's 400 with code 100, without the
 * WWW-Authenticate challenge that belongs to a 401.
 */
export function cheveretoFailure(err: ApiError, caught: unknown): CheveretoFailure {
  if (err.status === 401) {
    const headers = Object.fromEntries(Object.entries(err.headers).filter(([name]) => name !== "www-authenticate"));
    return { status: 400, code: CHEVERETO_CODE.key, headers };
  }
  if (caught instanceof CheveretoRefusal) return { status: 400, code: caught.code, headers: err.headers };
  return { status: err.status, code: err.status, headers: err.headers };
}
