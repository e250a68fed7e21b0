import { describe, expect, test } from "bun:test";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";

describe("row 9: Idempotency-Key is reserved atomically", () => {
  const { admin } = useAdmin();

  test("6 concurrent uploads with one key make exactly one image and all answer its id", async () => {
    const jpeg = await makeJpeg(1200, 900, 11);
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => admin.request("POST", "/api/admin/upload", form(jpeg, "retry.jpg"), { "idempotency-key": "retry-42" })),
    );
    const bodies = await Promise.all(answers.map((r) => r.json() as Promise<{ id: string }>));
    expect(answers.map((r) => r.status)).toEqual(Array(6).fill(200));
    const ids = new Set(bodies.map((b) => b.id));
    expect(ids.size).toBe(1);
    const list = await admin.json("GET", "/api/admin/images");
    expect(list.total).toBe(1);
    expect(list.items[0].id).toBe([...ids][0]);

    // A later retry replays it too; another key is another upload.
    const again = await admin.request("POST", "/api/admin/upload", form(jpeg, "retry.jpg"), { "idempotency-key": "retry-42" });
    expect(((await again.json()) as { id: string }).id).toBe([...ids][0]);
    const other = await admin.request("POST", "/api/admin/upload", form(jpeg, "retry.jpg"), { "idempotency-key": "retry-43" });
    expect(other.status).toBe(200);
    expect((await admin.json("GET", "/api/admin/images")).total).toBe(2);
  });

  test("a failed first attempt does not poison the key: the waiting retry uploads itself", async () => {
    const jpeg = await makeJpeg(64, 48, 12);
    const [bad, good] = await Promise.all([
      admin.request("POST", "/api/admin/upload", form(Buffer.from("not an image at all"), "x.jpg"), { "idempotency-key": "k-fail" }),
      (async () => {
        await Bun.sleep(5);
        return admin.request("POST", "/api/admin/upload", form(jpeg, "y.jpg"), { "idempotency-key": "k-fail" });
      })(),
    ]);
    expect(bad.status).toBe(415);
    expect(good.status).toBe(200);
    const { id } = (await good.json()) as { id: string };
    expect((await admin.json("GET", `/api/admin/images/${id}`)).file_name).toBe("y.jpg");
  });
});
