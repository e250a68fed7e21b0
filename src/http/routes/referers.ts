import { z } from "zod";
import type { AppContext } from "../../context";
import { InvalidRefererPatternError, validateRefererPattern } from "../../delivery/referer";
import { audit } from "../../ops/audit";
import { idParam, parseBody } from "../body";
import { badRequest, conflict, notFound } from "../errors";
import { sessionRoutes } from "../guard";

const ruleBody = z.strictObject({ pattern: z.string().min(1).max(253) });

export function refererRoutes(app: AppContext) {
  return sessionRoutes(app, "admin")
    .get("/api/admin/referer-whitelist", () => {
      const items = app.referers.list();
      return { items, total: items.length };
    })
    .post("/api/admin/referer-whitelist", ({ body, set, principal: p }) => {
      const input = parseBody(ruleBody, body);
      let pattern: string;
      try {
        pattern = validateRefererPattern(input.pattern);
      } catch (err) {
        if (err instanceof InvalidRefererPatternError) throw badRequest(err.message);
        throw err;
      }
      const rule = app.referers.add(pattern);
      if (!rule) throw conflict("该规则已存在");
      audit(app.db, p.user, "referer.create", rule.id, { pattern });
      set.status = 201;
      return rule;
    })
    .delete("/api/admin/referer-whitelist/:id", ({ params, set, principal: p }) => {
      const id = idParam(params.id);
      if (id === undefined || !app.referers.remove(id)) throw notFound("规则不存在");
      audit(app.db, p.user, "referer.delete", id);
      set.status = 204;
    });
}
