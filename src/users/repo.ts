import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { sqlTime } from "../db/time";
import { userUsage } from "../ops/repos/usage";

export const BUILTIN_ADMIN_ID = "default";
export const BUILTIN_ADMIN_NAME = "admin";

export type Role = "admin" | "user";

export interface UserRow {
  id: string;
  name: string;
  role: Role;
  password_hash: string;
  must_change_password: number;
  quota_bytes: number | null;
  default_ttl_hours: number | null;
  disabled: number;
  created_at: string;
}

/** The list item of spec 2.3: no credential material. */
export interface UserItem {
  id: string;
  name: string;
  role: Role;
  quota_bytes: number | null;
  default_ttl_hours: number | null;
  disabled: boolean;
  created_at: string;
  used_bytes: number;
  image_count: number;
}

// Usage comes from the per-user rollup (migration 0007), not a sum over the user's images.
export const USER_ITEM_SQL = `
  SELECT u.id, u.name, u.role, u.quota_bytes, u.default_ttl_hours, u.disabled, u.created_at,
         COALESCE(uu.bytes, 0) AS used_bytes, COALESCE(uu.images, 0) AS image_count
  FROM users u
  LEFT JOIN user_usage uu ON uu.user_id = u.id`;

type ItemRow = Omit<UserItem, "disabled"> & { disabled: number };
const toItem = (r: ItemRow): UserItem => ({ ...r, disabled: !!r.disabled });

export function newUserId(): string {
  return `u${randomBytes(6).toString("hex")}`;
}

export class UserRepo {
  constructor(private readonly db: Database) {}

  byId(id: string): UserRow | undefined {
    return this.db.query<UserRow, [string]>("SELECT * FROM users WHERE id = ?").get(id) ?? undefined;
  }

  byName(name: string): UserRow | undefined {
    return this.db.query<UserRow, [string]>("SELECT * FROM users WHERE name = ?").get(name) ?? undefined;
  }

  /** Whether another user has this name, in any letter case (ASCII; NOCASE folds only A-Z). */
  nameInUse(name: string, exceptId = ""): boolean {
    return !!this.db.query("SELECT 1 FROM users WHERE name = ?1 COLLATE NOCASE AND id != ?2 LIMIT 1").get(name, exceptId);
  }

  list(): UserItem[] {
    return this.db.query<ItemRow, []>(`${USER_ITEM_SQL} ORDER BY u.created_at, u.id`).all().map(toItem);
  }

  item(id: string): UserItem | undefined {
    const row = this.db.query<ItemRow, [string]>(`${USER_ITEM_SQL} WHERE u.id = ?`).get(id);
    return row ? toItem(row) : undefined;
  }

  insert(user: Omit<UserRow, "created_at">): void {
    this.db
      .query(
        `INSERT INTO users (id, name, role, password_hash, must_change_password, quota_bytes, default_ttl_hours, disabled, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(user.id, user.name, user.role, user.password_hash, user.must_change_password, user.quota_bytes, user.default_ttl_hours, user.disabled, sqlTime());
  }

  update(id: string, fields: Pick<UserRow, "name" | "role" | "quota_bytes" | "default_ttl_hours" | "disabled">): void {
    this.db
      .query("UPDATE users SET name = ?, role = ?, quota_bytes = ?, default_ttl_hours = ?, disabled = ? WHERE id = ?")
      .run(fields.name, fields.role, fields.quota_bytes, fields.default_ttl_hours, fields.disabled, id);
  }

  setPassword(id: string, hash: string, mustChange: boolean): void {
    this.db.query("UPDATE users SET password_hash = ?, must_change_password = ? WHERE id = ?").run(hash, mustChange ? 1 : 0, id);
  }

  delete(id: string): void {
    this.db.query("DELETE FROM users WHERE id = ?").run(id);
  }

  imageCount(id: string): number {
    return userUsage(this.db, id).images;
  }
}
