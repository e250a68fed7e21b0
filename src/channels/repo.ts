import type { Database } from "bun:sqlite";
import { type MasterKey, SealedDataError } from "../config/master-key";
import { sqlTime } from "../db/time";
import { scrubChannelError } from "./masking";

export interface ChannelRow {
  id: number;
  name: string;
  driver: string;
  template: string;
  config_sealed: string;
  priority: number;
  encrypted: number;
  allow_direct_link: number;
  healthy: number;
  last_checked_at: string;
  last_error: string;
  deleting: number;
  bound_at: string;
  created_at: string;
}

/** What is sealed with the master key: backend parameters and template form values. */
export interface ChannelSecrets {
  config: Record<string, string>;
  inputs?: Record<string, string>;
}

export class ChannelRepo {
  constructor(
    private readonly db: Database,
    private readonly key: MasterKey,
  ) {}

  all(): ChannelRow[] {
    return this.db.query<ChannelRow, []>("SELECT * FROM channels ORDER BY priority DESC, id").all();
  }

  byId(id: number): ChannelRow | undefined {
    return this.db.query<ChannelRow, [number]>("SELECT * FROM channels WHERE id = ?").get(id) ?? undefined;
  }

  /** The channel with the lowest id (the seed's, when the seed made one). */
  first(): ChannelRow | undefined {
    return this.db.query<ChannelRow, []>("SELECT * FROM channels ORDER BY id LIMIT 1").get() ?? undefined;
  }

  /** Whether any channel exists (deleting ones included). */
  any(): boolean {
    return !!this.db.query("SELECT 1 FROM channels LIMIT 1").get();
  }

  /** The channel's config and inputs; a damaged seal names the channel (a load failure: the channel is skipped). */
  secrets(row: ChannelRow): ChannelSecrets {
    let text: string;
    try {
      text = this.key.decrypt(row.config_sealed);
    } catch (err) {
      if (err instanceof SealedDataError) throw new Error(`存储渠道 ${row.name} 的加密配置${err.reason}`);
      throw err;
    }
    return JSON.parse(text) as ChannelSecrets;
  }

  insert(fields: {
    name: string;
    driver: string;
    template?: string;
    secrets: ChannelSecrets;
    priority?: number;
    encrypted?: boolean;
    allowDirectLink?: boolean;
    healthy?: boolean;
  }): number {
    const now = sqlTime();
    const result = this.db
      .query(
        `INSERT INTO channels (name, driver, template, config_sealed, priority, encrypted, allow_direct_link, healthy, last_checked_at, bound_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        fields.name,
        fields.driver,
        fields.template ?? "",
        this.key.encrypt(JSON.stringify(fields.secrets)),
        fields.priority ?? 0,
        fields.encrypted ? 1 : 0,
        fields.allowDirectLink ? 1 : 0,
        fields.healthy ? 1 : 0,
        fields.healthy ? now : "",
        now,
        now,
      );
    return Number(result.lastInsertRowid);
  }

  /** Full replacement from PUT; `secrets` only when they changed (re-sealing alone makes the registry rebuild the driver). */
  update(id: number, fields: { name: string; priority: number; allowDirectLink: boolean; driver: string; template: string; secrets?: ChannelSecrets }) {
    this.db
      .query("UPDATE channels SET name = ?, priority = ?, allow_direct_link = ?, driver = ?, template = ? WHERE id = ?")
      .run(fields.name, fields.priority, fields.allowDirectLink ? 1 : 0, fields.driver, fields.template, id);
    if (fields.secrets) {
      this.db.query("UPDATE channels SET config_sealed = ? WHERE id = ?").run(this.key.encrypt(JSON.stringify(fields.secrets)), id);
    }
  }

  /** Re-seals the secrets alone (an OAuth token refreshed by the driver); returns the new sealed value. */
  replaceSecrets(id: number, secrets: ChannelSecrets): string {
    const sealed = this.key.encrypt(JSON.stringify(secrets));
    this.db.query("UPDATE channels SET config_sealed = ? WHERE id = ?").run(sealed, id);
    return sealed;
  }

  /** Purge delete: from now on the channel takes no writes and a drain job empties it. */
  markDeleting(id: number) {
    this.db.query("UPDATE channels SET deleting = 1 WHERE id = ?").run(id);
  }

  /**
   * Records a probe (or load) result. Every path that stores a channel error comes through
   * here, so the text is scrubbed of the channel's credentials here, once: what is stored is
   * also what alerts and logs repeat. Returns the stored text ("" when healthy).
   */
  recordProbe(id: number, error: string | null): string {
    const text = error === null ? "" : this.scrub(id, error);
    this.db.query("UPDATE channels SET healthy = ?, last_error = ?, last_checked_at = ? WHERE id = ?").run(error === null ? 1 : 0, text, sqlTime(), id);
    return text;
  }

  private scrub(id: number, message: string): string {
    const row = this.byId(id);
    if (!row) return message;
    let secrets: ChannelSecrets;
    try {
      secrets = this.secrets(row);
    } catch {
      return message; // not unsealable: no credential of it can be in the message either
    }
    return scrubChannelError(message, { driver: row.driver, template: row.template, ...secrets });
  }

  /** Whether another channel (not `exceptId`) already has this name. */
  nameTaken(name: string, exceptId = 0): boolean {
    return !!this.db.query("SELECT 1 FROM channels WHERE name = ? AND id != ?").get(name, exceptId);
  }

  /** Bytes of completed replicas per live channel, for the usage gauge: from the per-channel rollup (migration 0007), a row per channel. */
  usage(): { name: string; bytes: number }[] {
    return this.db
      .query<{ name: string; bytes: number }, []>(
        `SELECT c.name, COALESCE(cu.bytes, 0) AS bytes FROM channels c LEFT JOIN channel_usage cu ON cu.channel_id = c.id
         WHERE c.deleting = 0`,
      )
      .all();
  }
}

/** Every channel's binding starts now (after a snapshot swap); returns how many channels. */
export function resetChannelBindingTimes(db: Database, now: string): number {
  return db.query("UPDATE channels SET bound_at = ?").run(now).changes;
}
