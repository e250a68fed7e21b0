import { readSettingRows, writeSettingRows } from "./repo";
import { hasChinese } from "../shared/text";
import { issueRequirement, type ZodIssueLike } from "../shared/zod-issue-text";
import type { Database } from "bun:sqlite";
import { EventEmitter } from "node:events";
import { type MasterKey, SealedDataError } from "./master-key";
import { DEFAULT_SETTINGS, SECRET_SETTINGS, settingsPatchSchema, type SettingKey, type Settings } from "./settings-schema";

export class SettingsValidationError extends Error {}

/**
 * Runtime settings held in the database, cached in memory, changed all-or-nothing.
 * Subscribers get a "change" event with the changed keys after each successful save,
 * which is how settings apply hot.
 */
export class SettingsStore {
  private current: Settings;
  private readonly events = new EventEmitter();

  constructor(
    private readonly db: Database,
    private readonly key: MasterKey,
  ) {
    this.current = this.load();
  }

  get(): Readonly<Settings> {
    return this.current;
  }

  onChange(listener: (changed: SettingKey[], settings: Readonly<Settings>) => void): () => void {
    this.events.on("change", listener);
    return () => this.events.off("change", listener);
  }

  /** Validates the whole patch first; on any error nothing is written. Returns changed keys. */
  update(patch: unknown): SettingKey[] {
    const parsed = settingsPatchSchema.safeParse(patch);
    if (!parsed.success) throw new SettingsValidationError(describeIssue(parsed.error.issues[0]));
    const values = parsed.data as Partial<Settings>;
    const changed = (Object.keys(values) as SettingKey[]).filter((k) => JSON.stringify(values[k]) !== JSON.stringify(this.current[k]));
    if (changed.length === 0) return [];
    writeSettingRows(
      this.db,
      changed.map((k) => [k, this.encode(k, values[k])]),
    );
    this.current = { ...this.current, ...values };
    this.events.emit("change", changed, this.current);
    return changed;
  }

  private encode(key: SettingKey, value: unknown): string {
    if (SECRET_SETTINGS.has(key) && value !== "") return JSON.stringify({ sealed: this.key.encrypt(String(value)) });
    return JSON.stringify(value);
  }

  private load(): Settings {
    const settings: Settings = structuredClone(DEFAULT_SETTINGS);
    const rows = readSettingRows(this.db);
    for (const row of rows) {
      if (!(row.key in DEFAULT_SETTINGS)) continue;
      const key = row.key as SettingKey;
      let value: unknown;
      try {
        value = JSON.parse(row.value);
      } catch {
        throw new Error(`数据库中配置项 ${key} 的值已损坏（不是有效的 JSON）：请用 kura restore 从快照恢复`);
      }
      if (SECRET_SETTINGS.has(key) && value && typeof value === "object") value = this.unseal(key, (value as { sealed: string }).sealed);
      (settings as Record<string, unknown>)[key] = value;
    }
    return settings;
  }

  private unseal(key: SettingKey, sealed: string): string {
    try {
      return this.key.decrypt(sealed);
    } catch (err) {
      if (err instanceof SealedDataError) throw new Error(`数据库中配置项 ${key} 的加密值${err.reason}：请用 kura restore 从快照恢复`);
      throw err;
    }
  }
}

function describeIssue(issue: (ZodIssueLike & { message: string }) | undefined): string {
  if (!issue) return "配置无效";
  if (issue.code === "unrecognized_keys") return `未知的配置项: ${(issue.keys ?? []).join(", ")}`;
  const key = issue.path.map(String).join(".");
  // A rule of our own says what is wrong (zod's built-in messages are English, so not those); a bound, what would pass.
  const requirement = issue.code === "custom" && hasChinese(issue.message) ? issue.message : issueRequirement(issue);
  return requirement ? `配置项 ${key} 的值无效：${requirement}` : `配置项 ${key} 的值无效`;
}
