import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { AppContext } from "../../src/context";
import { Invalid, QuotaExceeded, TooMany } from "../../src/errors";
import type { UploadOptions } from "../../src/images/upload/service";
import type { UserRow } from "../../src/users/repo";
import { makeJpeg } from "../helpers/images";
import { serviceContext, thrown, uploadBytes } from "./harness";

describe("upload pipeline, in process", () => {
  let app: AppContext;
  let admin: UserRow;
  let dispose: () => void;
  beforeAll(async () => ({ app, admin, dispose } = await serviceContext()));
  afterAll(() => dispose());

  const upload = (userId: string, bytes: Buffer, options: UploadOptions = {}, idempotencyKey?: string) =>
    uploadBytes(app, userId, bytes, options, idempotencyKey);

  test("an image is stored once, on the default channel, with its owner and lifetime", async () => {
    const bytes = await makeJpeg(80, 60, 11);
    const outcome = await upload(admin.id, bytes, { ttl: "3600" });
    expect(outcome.replayed).toBe(false);
    const view = app.images.view(outcome.id)!;
    expect(view).toMatchObject({ user_id: admin.id, file_name: "photo.jpg", mime: "image/jpeg", width: 80, height: 60 });
    expect(view.ttl_seconds).toBe(3600);
    expect(app.images.doneChannelIds(view.blob_id).length).toBe(1);
    // The same bytes again: a second reference to the one stored blob.
    const again = await upload(admin.id, bytes);
    expect(again.id).not.toBe(outcome.id);
    expect(app.images.view(again.id)!.blob_id).toBe(view.blob_id);
  });

  test("the same Idempotency-Key answers with the first image", async () => {
    const bytes = await makeJpeg(40, 40, 12);
    const first = await upload(admin.id, bytes, {}, "key-1");
    const second = await upload(admin.id, await makeJpeg(40, 40, 13), {}, "key-1");
    expect(second).toEqual({ id: first.id, replayed: true });
  });

  test("bad options and non-images are Invalid with the right problem", async () => {
    const ttl = await thrown(() => upload(admin.id, Buffer.from("x"), { ttl: "soon" }));
    expect(ttl).toBeInstanceOf(Invalid);
    expect((ttl as Invalid).problem).toBe("malformed");
    const notImage = await thrown(() => upload(admin.id, Buffer.from("<html>not an image</html>")));
    expect(notImage).toBeInstanceOf(Invalid);
    expect((notImage as Invalid).problem).toBe("unsupported_type");
  });

  test("a user over quota gets QuotaExceeded and nothing is stored", async () => {
    app.users.insert({
      id: "quota-user",
      name: "quota-user",
      role: "user",
      password_hash: "x",
      must_change_password: 0,
      quota_bytes: 100,
      default_ttl_hours: null,
      disabled: 0,
    });
    const err = await thrown(async () => upload("quota-user", await makeJpeg(64, 64, 14)));
    expect(err).toBeInstanceOf(QuotaExceeded);
    expect(app.images.usedBytes("quota-user")).toBe(0);
  });

  test("the upload gate refuses with TooMany and a retry-after when full", async () => {
    const limit = app.settings.get().max_concurrent_uploads;
    const held = Array.from({ length: limit }, () => app.uploadGate.admit(`gate-${Math.random()}`));
    try {
      const err = await thrown(async () => upload(admin.id, await makeJpeg(32, 32, 15)));
      expect(err).toBeInstanceOf(TooMany);
      expect((err as TooMany).retryAfterSeconds).toBeGreaterThan(0);
    } finally {
      for (const release of held) release();
    }
  });
});
