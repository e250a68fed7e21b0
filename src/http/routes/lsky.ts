// Lsky Pro V2 compatible API (/api/v1/*) on upload tokens, for picgo-plugin-lankong, PicList's
// Lsky uploader and the many scripts written against Lsky. Uploads go through the one upload
// pipeline (limits, quota, rate limits, idempotency, metrics); only the shapes differ.
import { Elysia } from "elysia";
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { authenticateUploadTokenText, TokenRepo, type TokenPrincipal } from "../../auth/tokens";
import { compatImage, storedDigests } from "../../compat/common";
import { lskyListItem, lskyResponse, lskyUploaded } from "../../compat/lsky";
import { laravelPage, lskyPage, phpIntIsNonZero } from "../../compat/lsky-page";
import type { AppContext } from "../../context";
import { sqlTime } from "../../db/time";
import { deleteReference } from "../../images/delete";
import type { ImageOrder } from "../../images/repo";
import { blobDigests, ownDigests } from "../../images/repos/blob-md5";
import { listUserImages } from "../../images/repos/user-list";
import { receiveMultipart } from "../../images/upload/receive";
import { runUpload } from "../../images/upload/service";
import { audit } from "../../ops/audit";
import { parseBody } from "../body";
import { answerableError, logCrash } from "../disk-full";
import { ApiError, badRequest, forbidden } from "../errors";
import { publicOrigin, requestInfo } from "../request-info";
import { uploadBodyLimits } from "../upload-input";
import { searchTermOf } from "../../images/repos/file-name-index";
import { checkPassword, logFailedLogin, unchangedSince } from "./auth";

/** Live tokens one user may hold from POST /api/v1/tokens. */
const MAX_LSKY_TOKENS = 100;

/** Lsky pages its lists by 40. */
const PER_PAGE = 40;
const STRATEGY = { id: 1, name: "Kura" };

/** A Map, not an object literal: `order=constructor` must not find an inherited member. */
/** Lsky's `order` values; anything else lists newest first. */
const ORDERS = new Map<string, ImageOrder>([
  ["newest", "newest"],
  ["earliest", "earliest"],
  ["utmost", "largest"],
  ["least", "smallest"],
]);

/** Lsky's TokenController takes `email`; Kura accounts have names, and either key is accepted. */
const tokenBody = z.object({
  name: z.string().min(1).max(256).optional(),
  email: z.string().min(1).max(256).optional(),
  password: z.string().min(1).max(1024),
});

/** The token request's fields Laravel's `$request->validate` also finds in the query string. */
const TOKEN_FIELDS = ["name", "email", "password"];

const isJson = (type: string) => type.startsWith("application/json");
const isForm = (type: string) => type.startsWith("application/x-www-form-urlencoded") || type.startsWith("multipart/form-data");

/** A JSON, urlencoded or multipart body as a plain object (Laravel reads all three), or a 400 in Lsky's shape. */
async function readBody(request: Request, type: string): Promise<unknown> {
  try {
    if (isJson(type)) {
      // An empty JSON body adds nothing, as in Laravel: the query string may still carry the fields.
      const text = await request.text();
      return text.trim() === "" ? {} : JSON.parse(text);
    }
    if (isForm(type)) {
      const form = await request.formData();
      return Object.fromEntries([...form.entries()].filter(([, v]) => typeof v === "string"));
    }
  } catch {
    throw badRequest("请求体格式无效");
  }
  throw badRequest("请求体必须是 JSON 或表单");
}

/**
 * The token request's input as Laravel's `$request->input()` sees it: the body's fields over
 * the query string's, so `POST /api/v1/tokens?email=…&password=…` without a body works too.
 */
async function readForm(request: Request): Promise<unknown> {
  const type = (request.headers.get("content-type") ?? "").toLowerCase();
  // PHP keeps the last of repeated query names, as Object.fromEntries does.
  const query = Object.fromEntries([...new URL(request.url).searchParams].filter(([name]) => TOKEN_FIELDS.includes(name)));
  // No body, or one Laravel cannot read (it adds nothing to the input): the query alone.
  if (!isJson(type) && !isForm(type) && Object.keys(query).length > 0) return query;
  const body = await readBody(request, type);
  return body !== null && typeof body === "object" && !Array.isArray(body) ? { ...query, ...body } : body;
}

/**
 * `Authorization: Bearer <token>`; the bare token is accepted too, because the lankong
 * plugin sends its "token" setting verbatim and users paste just the token.
 */
function tokenFrom(app: AppContext, request: Request): TokenPrincipal {
  const header = (request.headers.get("authorization") ?? "").trim();
  const plaintext = header.replace(/^Bearer[ \t]+/i, "");
  return authenticateUploadTokenText(app, plaintext);
}

/**
 * The HTTP status of a refusal on this surface. Lsky answers its own refusals through
 * Result::fail, which never sets a status (200, app/Http/Result.php); only a failed
 * authentication (401) and the throttle (429) get theirs (app/Exceptions/Handler.php).
 * Clients rely on it: PicGo, PicList and Twikoo use axios, which rejects any non-2xx answer
 * before the plugin can show `message`. Lsky's upload also catches every Throwable into a
 * 200 (ImageController::upload), so there a server error is one too (`catchesAll`).
 */
export function lskyFailureStatus(status: number, catchesAll: boolean): number {
  if (status === 401 || status === 429) return status;
  if (status >= 500 && !catchesAll) return status;
  return 200;
}

/** Runs a handler and turns its ApiError or domain error (or a crash) into Lsky's error shape and status. */
async function lsky(app: AppContext, request: Request, handler: () => Promise<Response> | Response, catchesAll = false): Promise<Response> {
  try {
    return await handler();
  } catch (caught) {
    const err = answerableError(app.log, request, caught);
    // Headers stay: Retry-After, WWW-Authenticate, and `Connection: close` for a body left unread.
    if (err) return lskyResponse(lskyFailureStatus(err.status, catchesAll), false, err.message, {}, err.headers);
    logCrash(app.log, request, caught);
    return lskyResponse(lskyFailureStatus(500, catchesAll), false, "服务器内部错误");
  }
}

const ok = (message: string, data: unknown = {}) => lskyResponse(200, true, message, data);

export function lskyRoutes(app: AppContext) {
  const origin = (request: Request) => publicOrigin(request, app.settings.get().base_url);

  const upload = async (request: Request) => {
    // Without Authorization, Lsky takes the upload as a guest's and refuses it with a 200 when
    // guests may not upload (ImageService::store); only a token that fails is a 401.
    if (!request.headers.has("authorization")) throw badRequest("本站不接受游客上传：请在 Authorization 中填写上传令牌");
    const t = tokenFrom(app, request);
    const outcome = await runUpload(app, app.uploadGate, {
      userId: t.user.id,
      tokenId: t.token.id,
      idempotencyKey: request.headers.get("idempotency-key"),
      digests: true,
      // strategy_id, album_id and permission have no meaning here: one strategy, no albums, links are public.
      receive: async () => ({ file: (await receiveMultipart(request, app.paths.tmp, uploadBodyLimits(app), [])).file, options: {} }),
    });
    const view = app.images.view(outcome.id)!;
    const digests = outcome.md5 && outcome.sha1 ? { md5: outcome.md5, sha1: outcome.sha1 } : await storedDigests(app, view);
    return ok("上传成功", lskyUploaded(compatImage(app, view, origin(request)), digests));
  };

  const list = async (request: Request) => {
    const t = tokenFrom(app, request);
    const query = new URL(request.url).searchParams;
    // PHP keeps the last of repeated query names.
    const param = (name: string) => query.getAll(name).at(-1);
    const page = laravelPage(param("page"));
    const path = `${origin(request)}/api/v1/images`;
    // Page URLs keep the request's query, as Lsky's ->withQueryString(): page 2 of a filtered list.
    const answer = (items: unknown[], total: number) => ok("success", lskyPage(items, total, page, PER_PAGE, path, query));
    // There are no albums: asking for one (Lsky's `(int) album_id` non-zero) gives its (empty) content, as for an empty album.
    if (phpIntIsNonZero(param("album_id"))) return answer([], 0);
    // Every Kura image is public (anyone with its link sees it): Lsky's `permission=private` filter finds none.
    if (param("permission") === "private") return answer([], 0);
    // In steps with turns of the loop between, from the user's own indexes (user-list.ts).
    const { rows, total } = await listUserImages(app.db, t.user.id, searchTermOf(param("keyword")), ORDERS.get(param("order") ?? "") ?? "newest", {
      limit: PER_PAGE,
      offset: Math.min((page - 1) * PER_PAGE, Number.MAX_SAFE_INTEGER),
    });
    const base = origin(request);
    // The digests stored with the blobs: one primary-key read each, never the bytes. Each image shows
    // only those its own upload computed: the blob's are shared by every reference to the same bytes,
    // and another account's upload may have stored them (audit LOW-2).
    const digests = blobDigests(
      app.db,
      rows.filter((v) => v.own_digests).map((v) => v.blob_id),
    );
    return answer(
      rows.map((v) => lskyListItem(compatImage(app, v, base), ownDigests(v.own_digests, digests.get(v.blob_id)))),
      total,
    );
  };

  /** Own images only; an unknown key is still "删除成功", as in Lsky (deleteImages ignores it). */
  const remove = (request: Request, key: string) => {
    const t = tokenFrom(app, request);
    const view = app.images.view(key);
    if (view && view.user_id === t.user.id && deleteReference(app, view.id)) {
      if (view.object_key) app.lookups.forgetAlias(view.user_id, view.object_key);
      audit(app.db, t.user, "image.delete", view.id, { via: "lsky" });
    }
    return ok("删除成功");
  };

  /** The capacity reported for a user without a quota: the largest byte count a JSON number holds exactly. */
  const NO_QUOTA_CAPACITY_BYTES = Number.MAX_SAFE_INTEGER;

  const profile = (request: Request) => {
    const t = tokenFrom(app, request);
    return ok("success", {
      name: t.user.name,
      avatar: "",
      email: "",
      // KiB like Lsky. In Lsky 0 means no room at all (its upload refuses anything past capacity), so a
      // user without a quota gets a capacity no upload reaches, not 0 (a client would show none left).
      capacity: (t.user.quota_bytes ?? NO_QUOTA_CAPACITY_BYTES) / 1024,
      used_capacity: app.images.usedBytes(t.user.id) / 1024,
      url: "",
      image_num: app.users.imageCount(t.user.id),
      album_num: 0,
      registered_ip: "",
    });
  };

  /** Name (or Lsky's `email`) and password → a new upload token, under the login rate limit. */
  const issueToken = async (request: Request) => {
    const input = parseBody(tokenBody, await readForm(request));
    const name = input.name ?? input.email;
    if (!name) throw new ApiError(400, "字段 name 缺失或类型错误");
    const user = app.users.byName(name);
    const client = requestInfo(request).client;
    const verified = await checkPassword(app.loginLimiter.admitLogin(client, name), input.password, user?.password_hash);
    const account = verified && user ? unchangedSince(app, user) : undefined;
    // A refusal of the credentials in the body, not a failed authentication of the request:
    // Lsky answers it through fail(), a 200 (TokenController::store).
    if (!account) {
      logFailedLogin(app, client, name, "lsky");
      throw badRequest("用户名或密码错误");
    }
    if (account.disabled) throw forbidden("该账号已被停用");
    if (account.must_change_password) throw forbidden("请先在控制台修改出厂默认密码");
    const tokens = new TokenRepo(app.db);
    // Each call makes a permanent token (as Lsky's does): a client looping it grew the list without end.
    if (tokens.liveIssuedVia(account.id, "lsky") >= MAX_LSKY_TOKENS) {
      throw badRequest(`通过此接口签发且仍有效的令牌已有 ${MAX_LSKY_TOKENS} 个：请先调用 DELETE /api/v1/tokens 清除，或在控制台吊销不用的令牌`);
    }
    const tokenName = `lsky-${sqlTime().replace(/\D/g, "")}-${randomBytes(3).toString("hex")}`;
    const issued = tokens.issue(account.id, tokenName, 0, Date.now(), "lsky");
    audit(app.db, account, "token.create", issued.id, { name: issued.name, expires_in_hours: 0, via: "lsky" });
    return lskyResponse(200, true, "success", { token: issued.token }, { "cache-control": "no-store" });
  };

  /**
   * Lsky's "clear tokens" (TokenController::clear, `$user->tokens()->delete()`: log out
   * everywhere). In Lsky every API token comes from POST /api/v1/tokens; Kura's upload tokens are
   * also made in the console for S3 clients, ShareX and other tools, which a PicGo logout must not
   * cut off. So this revokes the calling token and the user's tokens issued by POST
   * /api/v1/tokens, and nothing else: no console-made token (nor its S3 credential), no console
   * session. Revoked, not deleted, as in the console: images keep naming their token, and the
   * token list shows what happened.
   */
  const clearTokens = (request: Request) => {
    const t = tokenFrom(app, request);
    for (const revoked of new TokenRepo(app.db).revokeIssuedVia(t.user.id, "lsky", t.token.id)) {
      audit(app.db, t.user, "token.revoke", revoked.id, { name: revoked.name, owner: t.user.id, via: "lsky" });
    }
    return ok("success");
  };

  return (
    new Elysia()
      .post("/api/v1/upload", ({ request }) => lsky(app, request, () => upload(request), true), { parse: "none" })
      .get("/api/v1/images", ({ request }) => lsky(app, request, () => list(request)))
      .delete("/api/v1/images/:key", ({ request, params }) => lsky(app, request, () => remove(request, params.key)))
      .get("/api/v1/profile", ({ request }) => lsky(app, request, () => profile(request)))
      // Outside auth:sanctum in Lsky, which lists the guest group's strategies without a token;
      // Kura has the one strategy for everyone, so a token (even a wrong one) changes nothing.
      .get("/api/v1/strategies", ({ request }) => lsky(app, request, () => ok("success", { strategies: [STRATEGY] })))
      .get("/api/v1/albums", ({ request, query }) =>
        lsky(app, request, () => {
          tokenFrom(app, request);
          // AlbumController pages without withQueryString(): its URLs carry only `page`.
          return ok("success", lskyPage([], 0, laravelPage(query.page), PER_PAGE, `${origin(request)}/api/v1/albums`));
        }),
      )
      // There are no albums: deleting one is the success Lsky gives for an id the user has none of (AlbumController::destroy).
      .delete("/api/v1/albums/:id", ({ request }) =>
        lsky(app, request, () => {
          tokenFrom(app, request);
          return ok("删除成功");
        }),
      )
      .post("/api/v1/tokens", ({ request }) => lsky(app, request, () => issueToken(request)), { parse: "none" })
      .delete("/api/v1/tokens", ({ request }) => lsky(app, request, () => clearTokens(request)))
  );
}
