import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { authenticateUploadToken, authenticateUploadTokenText, tokenState, TokenRepo } from "../../src/auth/tokens";
import type { AppContext } from "../../src/context";
import { Unauthenticated } from "../../src/errors";
import type { UserRow } from "../../src/users/repo";
import { serviceContext, thrown } from "./harness";

const bearer = (token: string) => new Request("http://127.0.0.1/api/upload", { method: "POST", headers: { authorization: `Bearer ${token}` } });

describe("upload tokens, in process", () => {
  let app: AppContext;
  let admin: UserRow;
  let dispose: () => void;
  let repo: TokenRepo;
  beforeAll(async () => {
    ({ app, admin, dispose } = await serviceContext());
    repo = new TokenRepo(app.db);
  });
  afterAll(() => dispose());

  test("an issued token authenticates its owner, by header and by bare text", () => {
    const issued = repo.issue(admin.id, "laptop", 0);
    expect(issued.token).toStartWith("kura_");
    const byHeader = authenticateUploadToken(app, bearer(issued.token));
    expect(byHeader.user.id).toBe(admin.id);
    expect(byHeader.token.id).toBe(issued.id);
    expect(authenticateUploadTokenText(app, issued.token).token.id).toBe(issued.id);
  });

  test("a wrong secret or a missing header is Unauthenticated with a Bearer challenge", async () => {
    const issued = repo.issue(admin.id, "phone", 1);
    const wrong = issued.token.slice(0, -4) + (issued.token.endsWith("AAAA") ? "BBBB" : "AAAA");
    for (const request of [bearer(wrong), new Request("http://127.0.0.1/api/upload", { method: "POST" })]) {
      const err = await thrown(() => authenticateUploadToken(app, request));
      expect(err).toBeInstanceOf(Unauthenticated);
      expect((err as Unauthenticated).challenge).toStartWith("Bearer");
    }
  });

  test("revocation and expiry take effect at once", async () => {
    const revoked = repo.issue(admin.id, "old", 0);
    expect(repo.revoke(revoked.id)).toBe(true);
    expect(tokenState(repo.byId(revoked.id)!)).toBe("revoked");
    expect(await thrown(() => authenticateUploadTokenText(app, revoked.token))).toBeInstanceOf(Unauthenticated);

    const expiring = repo.issue(admin.id, "hour", 1);
    const later = Date.now() + 2 * 3_600_000;
    expect(await thrown(() => authenticateUploadTokenText(app, expiring.token, later))).toBeInstanceOf(Unauthenticated);
    expect(authenticateUploadTokenText(app, expiring.token).token.id).toBe(expiring.id);
  });

  test("rotation replaces the secret: the old text stops working, the new one works", async () => {
    const first = repo.issue(admin.id, "rotating", 0);
    const rotated = repo.rotate(first.id)!;
    expect(rotated.token).not.toBe(first.token);
    expect(await thrown(() => authenticateUploadTokenText(app, first.token))).toBeInstanceOf(Unauthenticated);
    expect(authenticateUploadTokenText(app, rotated.token).user.id).toBe(admin.id);
  });
});
