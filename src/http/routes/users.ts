import { z } from "zod";
import type { AppContext } from "../../context";
import { hashPassword, MIN_PASSWORD_LENGTH } from "../../auth/passwords";
import { audit } from "../../ops/audit";
import { BUILTIN_ADMIN_ID, newUserId } from "../../users/repo";
import { MAX_OPEN_UPLOADS_PER_USER, removeUploads, uploadsAfter } from "../../s3/multipart-store";
import { parseBody } from "../body";
import { badRequest, conflict, forbidden, notFound } from "../errors";
import { sessionRoutes } from "../guard";
import { inWriteTransaction } from "../../db/write-transaction";

const name = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[^\s\u0000-\u001f/\\]+$/);
const role = z.enum(["admin", "user"]);
const quota = z.number().int().nullable();
const ttlHours = z.number().int().min(0).max(876_000).nullable();
const password = z.string().min(MIN_PASSWORD_LENGTH).max(1024);

const createBody = z.strictObject({
  name,
  password,
  role: role.optional(),
  quota_bytes: quota.optional(),
  default_ttl_hours: ttlHours.optional(),
});
const updateBody = z.strictObject({ name, role, quota_bytes: quota, default_ttl_hours: ttlHours, disabled: z.boolean() });
const passwordBody = z.strictObject({ password });

/** "0 or less means unlimited" — stored as NULL. */
const normalizeQuota = (q: number | null | undefined) => (q === null || q === undefined || q <= 0 ? null : q);

export function userRoutes(app: AppContext) {
  /**
   * Names are told apart regardless of letter case (`Bob` next to `bob` made two look-alike
   * accounts in the users list and the audit log); a user keeping its own name is not refused
   * for a case-variant twin made before this rule.
   */
  const nameTaken = (n: string, current?: { id: string; name: string }) => current?.name !== n && app.users.nameInUse(n, current?.id);
  const taken = (n: string) => conflict(app.users.byName(n) ? "用户名已存在" : "已有只是大小写不同的同名用户");
  const existing = (id: string) =>
    app.users.byId(id) ??
    (() => {
      throw notFound("用户不存在");
    })();

  return sessionRoutes(app, "admin")
    .get("/api/admin/users", () => {
      const items = app.users.list();
      return { items, total: items.length };
    })
    .post("/api/admin/users", async ({ body, set, principal: p }) => {
      const input = parseBody(createBody, body);
      if (nameTaken(input.name)) throw taken(input.name);
      const passwordHash = await hashPassword(input.password);
      // Again after the hash's wait, with no await before the insert: a create of the same name sent
      // meanwhile passed the first check too, and its insert failed on the UNIQUE constraint (a 500).
      if (nameTaken(input.name)) throw taken(input.name);
      const id = newUserId();
      app.users.insert({
        id,
        name: input.name,
        role: input.role ?? "user",
        password_hash: passwordHash,
        must_change_password: 0,
        quota_bytes: normalizeQuota(input.quota_bytes),
        default_ttl_hours: input.default_ttl_hours ?? null,
        disabled: 0,
      });
      audit(app.db, p.user, "user.create", id, { name: input.name, role: input.role ?? "user" });
      set.status = 201;
      return app.users.item(id);
    })
    .put("/api/admin/users/:id", ({ body, params, principal: p }) => {
      const user = existing(params.id);
      const input = parseBody(updateBody, body);
      if (user.id === BUILTIN_ADMIN_ID && (input.disabled || input.role !== "admin")) {
        throw forbidden("内置管理员不能被停用或降级");
      }
      // As deleting oneself is refused: an admin who stops or demotes their own account is locked out mid-click.
      if (user.id === p.user.id && (input.disabled || input.role !== user.role)) throw badRequest("不能停用当前登录的用户，也不能修改自己的角色");
      if (nameTaken(input.name, user)) throw taken(input.name);
      inWriteTransaction(app.db, () => {
        app.users.update(user.id, {
          name: input.name,
          role: input.role,
          quota_bytes: normalizeQuota(input.quota_bytes),
          default_ttl_hours: input.default_ttl_hours,
          disabled: input.disabled ? 1 : 0,
        });
        if (input.disabled) app.sessions.deleteAllForUser(user.id);
      });
      audit(app.db, p.user, "user.update", user.id, { name: input.name, role: input.role, disabled: input.disabled });
      return app.users.item(user.id);
    })
    .delete("/api/admin/users/:id", async ({ params, set, principal: p }) => {
      const user = existing(params.id);
      if (user.id === BUILTIN_ADMIN_ID) throw forbidden("内置管理员不能被删除");
      if (user.id === p.user.id) throw badRequest("不能删除当前登录的用户");
      if (app.users.imageCount(user.id) > 0) throw conflict("该用户仍拥有图片，请先删除其图片");
      // Listed in the same turn as the delete, which ends the user's credentials: no upload can start in between.
      const uploads = uploadsAfter(app, user.id, "", "", "", MAX_OPEN_UPLOADS_PER_USER);
      app.users.delete(user.id);
      // Their rows go with the user (foreign key); their staged parts would stay on disk until a restart.
      await removeUploads(
        app,
        uploads.map((u) => u.upload_id),
      );
      audit(app.db, p.user, "user.delete", user.id, { name: user.name });
      set.status = 204;
    })
    .post("/api/admin/users/:id/password", async ({ params, body, set, principal: p }) => {
      const user = existing(params.id);
      const input = parseBody(passwordBody, body);
      app.users.setPassword(user.id, await hashPassword(input.password), false);
      app.sessions.deleteAllForUser(user.id);
      audit(app.db, p.user, "user.password_reset", user.id);
      set.status = 204;
    });
}
