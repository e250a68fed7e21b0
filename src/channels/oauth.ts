/**
 * The OAuth authorization flow for cloud-drive channels (spec 4.7):
 *
 *   start    → builds the provider's consent URL (authorization code + PKCE)
 *              with redirect_uri = <base_url>/api/admin/channel-oauth/callback
 *   callback → the browser returns here with `code`; it is exchanged for a
 *              token at the provider's token endpoint, kept server-side
 *   result   → the console takes the token JSON (rclone's form) once and puts
 *              it into the channel form's `token` field
 *
 * A self-built app is required (client_id / client_secret): rclone's own app
 * only accepts rclone's localhost redirect, not this server's callback.
 */
import { Invalid, NotFound } from "../errors";
import { createHash, randomBytes } from "node:crypto";
import { z } from "zod";
import type { AppContext } from "../context";
import type { UserRow } from "../users/repo";
import { isSensitiveTemplateInput, restoreSentinels, SentinelMisuseError } from "./masking";
import { callbackPage } from "./oauth/callback-page";
import { OAuthError, safeCode } from "./oauth/errors";
import { FlowStore } from "./oauth/flow-store";
import { checkEndpointUrl, isOAuthDriver, providerEndpoints } from "./oauth/providers";
import { serializeToken, tokenFromResponse } from "./oauth/token";
import { callTokenEndpoint } from "./oauth/token-source";
import { sourceFields } from "./source";
import { findTemplate } from "./templates";
import { getOrCreate } from "../shared/get-or-create";

export const CALLBACK_PATH = "/api/admin/channel-oauth/callback";

const stores = new WeakMap<AppContext, FlowStore>();
function flows(app: AppContext): FlowStore {
  return getOrCreate(stores, app, () => new FlowStore());
}

export const startAuthorizationBody = z.strictObject({
  template: z.string().min(1).max(64),
  inputs: sourceFields.inputs,
  channel_id: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});

export type StartAuthorizationInput = z.infer<typeof startAuthorizationBody>;

/** POST /api/admin/channel-oauth/start → { auth_url, state }. */
export function startAuthorization(app: AppContext, user: UserRow, input: StartAuthorizationInput): { auth_url: string; state: string } {
  const template = findTemplate(input.template);
  if (!template) throw new Invalid(`未知的渠道模板: ${input.template}`);
  const kind = template.driver;
  if (!template.requiresOauth || !isOAuthDriver(kind)) throw new Invalid(`模板 ${template.id} 不需要授权`);
  const base = app.settings.get().base_url;
  if (!base) throw new Invalid(`请先在系统设置中填写 base_url：授权回调地址 <base_url>${CALLBACK_PATH} 由它生成`);

  const submitted = { ...(input.inputs ?? {}) };
  for (const key of Object.keys(submitted)) {
    if (!template.fields.some((f) => f.key === key)) throw new Invalid(`模板 ${template.id} 不支持字段 ${key}`);
  }
  // The token field plays no part in obtaining a new one.
  delete submitted.token;
  // A sentinel is only meaningful when editing a channel; anywhere else it is refused (spec 4.7 rule 6).
  const values = restoreStored(app, input.channel_id, template.id, kind, submitted);

  const clientId = values.client_id?.trim() ?? "";
  if (clientId === "") throw new Invalid(`授权需要自建应用的 client_id 和 client_secret，应用的回调地址填写 ${base}${CALLBACK_PATH}`);
  let endpoints: ReturnType<typeof providerEndpoints>;
  let authUrl: URL;
  let tokenUrl: string;
  try {
    endpoints = providerEndpoints(kind, values);
    authUrl = new URL(checkEndpointUrl(endpoints.authUrl, "auth_url"));
    tokenUrl = checkEndpointUrl(endpoints.tokenUrl, "token_url");
  } catch (err) {
    throw new Invalid((err as Error).message);
  }

  const redirectUri = `${base}${CALLBACK_PATH}`;
  const verifier = randomBytes(32).toString("base64url");
  const state = flows(app).add({
    userId: user.id,
    label: endpoints.label,
    app: { clientId, clientSecret: values.client_secret ?? "", tokenUrl },
    redirectUri,
    verifier,
  });
  const params = {
    client_id: clientId,
    redirect_uri: redirectUri,
    response_type: "code",
    scope: endpoints.scopes.join(" "),
    state,
    code_challenge: createHash("sha256").update(verifier).digest("base64url"),
    code_challenge_method: "S256",
    ...endpoints.authParams,
  };
  for (const [k, v] of Object.entries(params)) authUrl.searchParams.set(k, v);
  return { auth_url: authUrl.href, state };
}

/** Editing a channel: sentinels in the form stand for its stored values (its inputs, or its config when custom). */
function restoreStored(app: AppContext, channelId: number | undefined, templateId: string, driver: string, submitted: Record<string, string>) {
  let stored: Record<string, string> | undefined;
  if (channelId) {
    const row = app.channels.repo.byId(channelId);
    if (!row) throw new NotFound("存储渠道不存在");
    const secrets = app.channels.repo.secrets(row);
    stored = row.template === templateId ? secrets.inputs : row.driver === driver ? secrets.config : undefined;
  }
  try {
    return restoreSentinels(submitted, stored, (k) => isSensitiveTemplateInput(templateId, k));
  } catch (err) {
    if (err instanceof SentinelMisuseError) throw new Invalid(err.message);
    throw err;
  }
}

/** GET /api/admin/channel-oauth/callback: exchanges the code; answers an HTML page without the token. */
export async function finishAuthorization(app: AppContext, user: UserRow, query: Record<string, string | undefined>): Promise<Response> {
  const state = query.state ?? "";
  if (state === "") throw new Invalid("缺少参数 state");
  const store = flows(app);
  const flow = store.get(state, user.id);
  if (!flow) throw new Invalid("授权请求不存在或已过期，请回到管理后台重新发起授权");
  if (flow.outcome) throw new Invalid("该授权请求已经完成，请回到管理后台继续操作");
  const fail = (error: string) => {
    store.finish(state, { error });
    app.log.warn("存储渠道 OAuth 授权失败", { provider: flow.label, err: error });
    return callbackPage(false, error);
  };
  if (query.error) return fail(`${flow.label} 拒绝了授权或授权出错${safeCode(query.error) ? ` (${safeCode(query.error)})` : ""}`);
  if (!query.code) return fail(`${flow.label} 的回调缺少授权码 (code)`);
  try {
    const body = await callTokenEndpoint(
      flow.app,
      { grant_type: "authorization_code", code: query.code, redirect_uri: flow.redirectUri, code_verifier: flow.verifier },
      flow.label,
      fetch,
    );
    const token = tokenFromResponse(body, "", flow.label);
    store.finish(state, { token: serializeToken(token) });
  } catch (err) {
    return fail(err instanceof OAuthError ? err.message : `${flow.label} 令牌接口请求失败`);
  }
  app.log.info("存储渠道 OAuth 授权完成", { provider: flow.label });
  return callbackPage(true, `已获得 ${flow.label} 的授权。`);
}

/** GET /api/admin/channel-oauth/result: { pending } until the callback ran, then the token or error — once. */
export function takeAuthorizationResult(app: AppContext, user: UserRow, query: Record<string, string | undefined>) {
  const state = query.state ?? "";
  if (state === "") throw new Invalid("缺少参数 state");
  const store = flows(app);
  const flow = store.get(state, user.id);
  if (!flow) throw new NotFound("授权请求不存在、已过期或结果已被取走");
  if (!flow.outcome) return { pending: true };
  store.delete(state);
  return "token" in flow.outcome ? { pending: false, token: flow.outcome.token } : { pending: false, error: flow.outcome.error };
}
