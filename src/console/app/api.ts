// The one place that talks to /api/admin: session cookie (sent by the browser), CSRF header
// on every write, and the `{"error": "中文"}` envelope turned into ApiError.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let csrfToken = "";
let onSessionLost: (() => void) | undefined;
/** What a re-read of who is logged in found after a 403 (see onForbidden). */
export type Recheck = "renewed" | "switched" | "unchanged";
let onRefused: (() => Promise<Recheck>) | undefined;

export function setCsrf(token: string): void {
  csrfToken = token;
}

export function currentCsrf(): string {
  return csrfToken;
}

/** Called on any 401 from an authenticated call (expired or revoked session). */
export function onUnauthorized(handler: () => void): void {
  onSessionLost = handler;
}

/**
 * Called on any 403. The cookie is shared by every tab of the browser: a login in another tab
 * replaces the session, so this tab's CSRF token (derived from the old session) or even its user
 * may be stale. The handler re-reads who is logged in: "renewed" when only the token was stale (a
 * refused write had no effect, so it is sent once more), "switched" when another user or role is
 * logged in now (the page is being rebuilt; the refusal is explained instead of "CSRF 校验失败").
 */
export function onForbidden(handler: () => Promise<Recheck>): void {
  onRefused = handler;
}

function errorMessage(status: number, body: unknown, retryAfter: string | null = null): string {
  const message =
    body && typeof body === "object" && typeof (body as { error?: unknown }).error === "string"
      ? (body as { error: string }).error
      : `请求失败（HTTP ${status}）`;
  return status === 429 ? withWait(message, retryAfter) : message;
}

/** A 429's Retry-After (seconds) in its message, so people know how long to wait: "请 58 秒后再试". */
function withWait(message: string, retryAfter: string | null): string {
  const seconds = /^\d+$/.test(retryAfter?.trim() ?? "") ? Number(retryAfter) : undefined;
  if (seconds === undefined || seconds <= 0) return message;
  const wait = seconds >= 120 ? `${Math.ceil(seconds / 60)} 分钟` : `${seconds} 秒`;
  return message.includes("请稍后再试") ? message.replace("请稍后再试", `请 ${wait}后再试`) : `${message}（请 ${wait}后再试）`;
}

const SWITCHED = "此浏览器已在其他标签页切换了登录账号，刚才的操作没有执行";

/** After a 403: send again (a write, the first time, token renewed), explain a switch, or keep the answer. */
async function afterRefusal(method: string, retried: boolean): Promise<"retry" | ApiError | null> {
  const found = onRefused ? await onRefused() : "unchanged";
  if (found === "switched") return new ApiError(403, SWITCHED);
  return found === "renewed" && method !== "GET" && !retried ? "retry" : null;
}

/**
 * A fresh Idempotency-Key for one upload and all its retries: if an answer is lost after the
 * server stored the image, the retry gets that image back instead of storing it twice.
 * getRandomValues, not randomUUID: the console is often reached over plain http on a LAN
 * address, where randomUUID (secure contexts only) is missing.
 */
export function newIdempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export async function api<T = unknown>(
  method: string,
  path: string,
  body?: unknown,
  opts: { quiet401?: boolean; retried?: boolean; quiet403?: boolean; idempotencyKey?: string } = {},
): Promise<T> {
  const headers: Record<string, string> = {};
  if (method !== "GET") headers["x-csrf-token"] = csrfToken;
  if (opts.idempotencyKey) headers["idempotency-key"] = opts.idempotencyKey;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await send(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 403 && !opts.quiet403) {
    const next = await afterRefusal(method, opts.retried ?? false);
    if (next === "retry") return api<T>(method, path, body, { ...opts, retried: true });
    if (next) throw next;
  }
  const data = await jsonOf(res);
  if (!res.ok) throw failure(res, data, opts.quiet401);
  return data as T;
}

/** fetch with the session cookie; a network failure as the console's Chinese ApiError. */
async function send(path: string, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(path, { ...init, credentials: "same-origin" });
  } catch {
    throw new ApiError(0, "无法连接服务器，请检查网络");
  }
}

/** An answer's JSON body; undefined when it has none or it is not JSON. */
async function jsonOf(res: Response): Promise<unknown> {
  const text = await res.text();
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** An error answer as an ApiError with the server's message; a 401 tells the page its session is gone (unless `quiet401`). */
function failure(res: Response, data: unknown, quiet401 = false): ApiError {
  if (res.status === 401 && !quiet401) onSessionLost?.();
  return new ApiError(res.status, errorMessage(res.status, data, res.headers.get("retry-after")));
}

/**
 * Multipart upload through XMLHttpRequest, because fetch() cannot report upload progress.
 * `onProgress` gets a fraction in [0, 1]. `idempotencyKey` (see newIdempotencyKey) is sent on
 * this attempt and on the resend after a renewed CSRF token alike.
 */
export function uploadFile<T>(
  path: string,
  form: FormData,
  onProgress: (fraction: number) => void,
  opts: { idempotencyKey?: string; retried?: boolean } = {},
): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    xhr.setRequestHeader("x-csrf-token", csrfToken);
    if (opts.idempotencyKey) xhr.setRequestHeader("idempotency-key", opts.idempotencyKey);
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.onerror = () => reject(new ApiError(0, "上传中断：无法连接服务器"));
    xhr.onload = () => {
      let data: unknown;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = undefined;
      }
      if (xhr.status >= 200 && xhr.status < 300) return resolve(data as T);
      if (xhr.status === 401) onSessionLost?.();
      const error = new ApiError(xhr.status, errorMessage(xhr.status, data, xhr.getResponseHeader("retry-after")));
      if (xhr.status !== 403) return reject(error);
      afterRefusal("POST", opts.retried ?? false).then(
        (next) => (next === "retry" ? uploadFile<T>(path, form, onProgress, { ...opts, retried: true }).then(resolve, reject) : reject(next ?? error)),
        () => reject(error),
      );
    };
    xhr.send(form);
  });
}

/** The file name a Content-Disposition header gives (`filename*=UTF-8''…` first), or undefined. */
function attachmentName(header: string | null): string | undefined {
  const star = /filename\*=UTF-8''([^;]+)/i.exec(header ?? "");
  if (star) {
    try {
      return decodeURIComponent(star[1]!.trim());
    } catch {
      // fall back to the plain parameter
    }
  }
  return /filename="([^"]+)"/i.exec(header ?? "")?.[1];
}

/**
 * Saves an attachment the server builds on request (a snapshot, the metadata export, an rclone
 * config). A plain `<a download>` is cancelled without a word when the answer is an error, so the
 * file is fetched first (the session cookie goes along; these are GETs, no CSRF header) and saved from
 * a blob URL; an error answer throws an ApiError with the server's message. Not a HEAD probe followed
 * by the link: the server answers HEAD by running the GET handler, which writes an audit entry and
 * reads the snapshot from a channel, so every download would happen twice. Chromium keeps a large
 * blob on disk rather than in memory, so a big snapshot or export fits.
 */
export async function download(path: string, fallbackName: string): Promise<void> {
  const res = await send(path);
  if (!res.ok) {
    if (res.status === 403) {
      const next = await afterRefusal("GET", true);
      if (next instanceof ApiError) throw next;
    }
    throw failure(res, await jsonOf(res));
  }
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = attachmentName(res.headers.get("content-disposition")) ?? fallbackName;
  document.body.append(a);
  a.click();
  a.remove();
  // The download has its bytes once started; the URL is only needed until then.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** Query string from defined, non-empty values. */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}
