import { beforeAll, describe, expect, test } from "bun:test";
import { Session } from "../helpers/client";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";

describe("row 7: ref_count does not reveal other users' uploads", () => {
  let alice: Session;
  let bob: Session;
  const { server, admin } = useAdmin();
  beforeAll(async () => {
    for (const name of ["alice", "bob"]) await admin.json("POST", "/api/admin/users", { name, password: "password-1" }, 201);
    alice = new Session(server);
    bob = new Session(server);
    await alice.login("alice", "password-1");
    await bob.login("bob", "password-1");
  });

  test("a user sees only their own references to shared bytes; an admin sees them all", async () => {
    const jpeg = await makeJpeg(40, 30, 77);
    const bobs = await bob.json("POST", "/api/admin/upload", form(jpeg, "bob.jpg", { exif_policy: "passthrough" }));
    const alices = await alice.json("POST", "/api/admin/upload", form(jpeg, "alice.jpg", { exif_policy: "passthrough" }));
    // Same bytes, one blob: the admin sees both references.
    expect((await admin.json("GET", `/api/admin/images/${alices.id}`)).ref_count).toBe(2);
    expect((await alice.json("GET", `/api/admin/images/${alices.id}`)).ref_count).toBe(1);
    const list = await alice.json("GET", "/api/admin/images");
    expect(list.items.find((i: { id: string }) => i.id === alices.id).ref_count).toBe(1);
    const patched = await alice.json("PATCH", `/api/admin/images/${alices.id}`, { ttl_hours: 5 });
    expect(patched.ref_count).toBe(1);

    // Her own second reference counts.
    const again = await alice.json("POST", "/api/admin/upload", form(jpeg, "alice-2.jpg", { exif_policy: "passthrough" }));
    expect((await alice.json("GET", `/api/admin/images/${again.id}`)).ref_count).toBe(2);
    expect((await bob.json("GET", `/api/admin/images/${bobs.id}`)).ref_count).toBe(1);
    expect((await admin.json("GET", `/api/admin/images/${bobs.id}`)).ref_count).toBe(3);
  });

  test("replica times: a user never sees the shared bytes' replicas settled before their own upload; an admin does", async () => {
    const jpeg = await makeJpeg(40, 30, 78);
    const first = await bob.json("POST", "/api/admin/upload", form(jpeg, "first.jpg", { exif_policy: "passthrough" }));
    // Times are whole seconds: make sure the second reference is created in a later one.
    await Bun.sleep(1100);
    const later = await alice.json("POST", "/api/admin/upload", form(jpeg, "later.jpg", { exif_policy: "passthrough" }));
    const seen = await alice.json("GET", `/api/admin/images/${later.id}`);
    const byAdmin = await admin.json("GET", `/api/admin/images/${later.id}`);
    expect(byAdmin.replicas.length).toBeGreaterThan(0);
    // The premise: the replica settled with Bob's upload, before Alice's.
    expect(byAdmin.replicas.every((r: { updated_at: string }) => r.updated_at < seen.created_at)).toBe(true);
    expect(seen.replicas.map((r: { updated_at: string }) => r.updated_at)).toEqual(seen.replicas.map(() => seen.created_at));
    const patched = await alice.json("PATCH", `/api/admin/images/${later.id}`, { ttl_hours: 5 });
    expect(patched.replicas).toEqual(seen.replicas);
    expect(first.id).not.toBe(later.id);
  });
});
