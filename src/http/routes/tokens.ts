import { z } from "zod";
import type { AppContext } from "../../context";
import { s3SecretFor, TokenNameTakenError, TokenRepo, tokenState, type TokenRow } from "../../auth/tokens";
import { audit } from "../../ops/audit";
import { idParam, pagination, parseBody } from "../body";
import { conflict, forbidden, notFound } from "../errors";
import { sessionRoutes, type Principal } from "../guard";
import { publicOrigin } from "../request-info";

/** At most 64 characters, counted as code points like JSON Schema's maxLength. */
const tokenName = z
  .string()
  .trim()
  .min(1)
  .refine((s) => [...s].length <= 64)
  .refine((s) => !/[\u0000-\u001f\u007f]/.test(s));
const issueBody = z.strictObject({
  name: tokenName,
  expires_in_hours: z.number().int().min(0).max(876_000).optional(),
});

/** Credentials in a response must not land in any cache. */
const NO_STORE = "no-store";

/** Spec 2.5: regions are not distinguished and there is no bucket concept; these are client placeholders. */
const S3_REGION = "us-east-1";
const S3_BUCKET = "kura";

export function tokenRoutes(app: AppContext) {
  const repo = new TokenRepo(app.db);

  /**
   * The token if the caller may act on it. Owner-only actions (rotate, S3
   * credential) hide other users' tokens even from admins: 404, as for a
   * token that does not exist (spec 7: "not visible to the caller").
   */
  const visible = (p: Principal, rawId: string | undefined, ownerOnly: boolean): TokenRow => {
    const id = idParam(rawId);
    const row = id === undefined ? undefined : repo.byId(id);
    const allowed = row && (row.user_id === p.user.id || (!ownerOnly && p.user.role === "admin"));
    if (!row || !allowed) throw notFound("令牌不存在");
    return row;
  };
  const requireActive = (row: TokenRow, message: string) => {
    if (tokenState(row) !== "active") throw conflict(message);
  };

  return sessionRoutes(app, "user")
    .get("/api/admin/tokens", ({ query, principal: p }) => {
      const { pageSize, offset } = pagination(query);
      const userId = query.user_id || p.user.id;
      if (userId !== p.user.id) {
        if (p.user.role !== "admin") throw forbidden("只有管理员可以查看其他用户的令牌");
        if (!app.users.byId(userId)) throw notFound("用户不存在");
      }
      return repo.listForUser(userId, pageSize, offset);
    })
    .post("/api/admin/tokens", ({ body, set, principal: p }) => {
      const input = parseBody(issueBody, body);
      let issued;
      try {
        issued = repo.issue(p.user.id, input.name, input.expires_in_hours ?? 0);
      } catch (err) {
        if (err instanceof TokenNameTakenError) throw conflict("已存在同名令牌");
        throw err;
      }
      audit(app.db, p.user, "token.create", issued.id, { name: issued.name, expires_in_hours: input.expires_in_hours ?? 0 });
      set.status = 201;
      set.headers["cache-control"] = NO_STORE;
      return issued;
    })
    .delete("/api/admin/tokens/:id", ({ params, set, principal: p }) => {
      const row = visible(p, params.id, false);
      if (tokenState(row) === "active") throw conflict("令牌仍然有效，请先吊销");
      repo.delete(row.id);
      audit(app.db, p.user, "token.delete", row.id, { name: row.name, owner: row.user_id });
      set.status = 204;
    })
    .post("/api/admin/tokens/:id/revoke", ({ params, set, principal: p }) => {
      const row = visible(p, params.id, false);
      // Idempotent: revoking again succeeds and keeps the first revoked_at.
      if (repo.revoke(row.id)) audit(app.db, p.user, "token.revoke", row.id, { name: row.name, owner: row.user_id });
      set.status = 204;
    })
    .post("/api/admin/tokens/:id/rotate", ({ params, set, principal: p }) => {
      const row = visible(p, params.id, true);
      requireActive(row, "只能轮换有效的令牌");
      // The UPDATE re-checks the state, so a concurrent revoke cannot be undone by rotation.
      const issued = repo.rotate(row.id);
      if (!issued) throw conflict("只能轮换有效的令牌");
      audit(app.db, p.user, "token.rotate", row.id, { name: row.name });
      set.headers["cache-control"] = NO_STORE;
      return issued;
    })
    .post("/api/admin/tokens/:id/s3-credential", ({ request, params, set, principal: p }) => {
      const row = visible(p, params.id, true);
      requireActive(row, "令牌已吊销或已过期，无法获取 S3 凭据");
      const origin = publicOrigin(request, app.settings.get().base_url);
      audit(app.db, p.user, "token.s3_credential", row.id, { name: row.name });
      set.headers["cache-control"] = NO_STORE;
      return {
        access_key_id: row.prefix,
        secret_access_key: s3SecretFor(app.key, row),
        endpoint: `${origin}/s3`,
        region: S3_REGION,
        bucket: S3_BUCKET,
        url_prefix: `${origin}/o/${encodeURIComponent(row.user_id)}/`,
      };
    });
}
