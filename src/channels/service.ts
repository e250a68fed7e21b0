/**
 * Channel administration (spec 4.7) as plain functions over the app context:
 * create, test, update, check and export. Every config that would be saved is
 * deep-probed first, so a saved channel has proven it can write, read back and
 * delete; nothing is saved when the probe fails.
 */
import { KeyedTurns } from "../shared/keyed-turns";
import { Conflict, Invalid, NotFound } from "../errors";
import { randomBytes } from "node:crypto";
import type { AppContext } from "../context";
import { audit, type AuditActor } from "../ops/audit";
import { evaluateChannelAlerts } from "../ops/alerts";
import { requeueUnfinished, startBackfill } from "./backfill";
import { cryptPasswords, wrapEncrypted, type CryptPasswords } from "./crypt-layer";
import type { Driver } from "./driver";
import { channelErrorText } from "./drivers/driver-errors";
import { resolveLocalPath } from "./drivers/local";
import { createDriver, driverOptionSpecs, type DriverSite } from "./factory";
import { dropMovedPin, withHostKeyPin } from "./host-key-pin";
import { type ChannelPlace, locationChanged, samePlace } from "./location";
import { probeAndLog, requeueUnfinishedEverywhere } from "./health";
import { auditMarkers, isSensitiveConfigKey, isSensitiveTemplateInput, scrubChannelError, SECRET_SENTINEL } from "./masking";
import { completeFromProvider, withToken } from "./oauth/complete";
import { isOAuthDriver } from "./oauth/providers";
import { renderRcloneConfig } from "./rclone-export";
import type { ChannelRow } from "./repo";
import {
  keepsSecretsElsewhere,
  resolveSource,
  sameValues,
  type CreateChannelInput,
  type ResolvedSource,
  type TestChannelInput,
  type UpdateChannelInput,
} from "./source";
import { channelDescription } from "./views";
import { inWriteTransaction } from "../db/write-transaction";

interface ProbeOptions {
  encrypted: boolean;
  autoCreateBucket: boolean;
  /** The channel's own crypt passwords when it exists; otherwise throwaway ones still prove the crypt round trip. */
  crypt?: CryptPasswords;
  /** Deployment facts for the throwaway driver (data directory, peer timeout). */
  site: DriverSite;
  /** A save keeps the local directory its probe made (outcome.undoRoot: the save's to run if it then fails). */
  keepRoot?: boolean;
  /** Whether a channel saved meanwhile stores where the probe made its directory: then it stays. */
  rootInUse?: () => boolean;
}

interface ProbeOutcome {
  /** null on success, else a Chinese reason with every credential value cut out. */
  failure: string | null;
  /** OAuth backends: the token JSON the probe refreshed on the way (also when it then failed). */
  refreshedToken?: string;
  /** SFTP without host_key_sha256 or known_hosts_file: the host key the probe trusted on first use. */
  hostKey?: string;
  /** With keepRoot, after a successful probe: removes the directories it made (while empty). */
  undoRoot?: () => Promise<void>;
}

/** Builds a throwaway driver for the config and deep-probes it (creating the bucket first when asked). */
export async function probeSource(source: ResolvedSource, opts: ProbeOptions): Promise<ProbeOutcome> {
  const outcome: ProbeOutcome = { failure: null };
  let driver: Driver | undefined;
  let undoRoot: (() => Promise<void>) | undefined;
  try {
    driver = createDriver(source.driver, source.config, {
      onTokenRefreshed: (token) => (outcome.refreshedToken = token),
      onHostKey: (fingerprint) => (outcome.hostKey ??= fingerprint),
      ...opts.site,
    });
    // Setting a channel up (or testing it) is when its local directory may be made; at run time a
    // missing one is reported instead (drivers/local.ts).
    undoRoot = await (driver as Driver & { createRoot?: () => Promise<() => Promise<void>> }).createRoot?.();
    if (opts.autoCreateBucket) {
      const creator = driver as Driver & { createBucket?: () => Promise<void> };
      if (typeof creator.createBucket !== "function") throw new Error("该存储驱动不支持自动创建存储桶");
      await creator.createBucket();
    }
    const crypt = opts.crypt ?? { password: randomBytes(24).toString("base64url"), password2: randomBytes(24).toString("base64url") };
    await (opts.encrypted ? wrapEncrypted(driver, crypt) : driver).probe(true);
  } catch (err) {
    outcome.failure = scrubChannelError((err as Error).message ? channelErrorText(err) : "探测失败", source);
  } finally {
    await driver?.close?.().catch(() => {});
    if (undoRoot && opts.keepRoot && outcome.failure === null) outcome.undoRoot = undoRoot;
    else if (undoRoot && !opts.rootInUse?.()) await undoRoot().catch(() => {});
  }
  return outcome;
}

/**
 * Deep-probes a config that is about to be saved, after completing what the
 * authorization brings (spec 4.7 rule 2). Returns the source to save: a token
 * refreshed on the way replaces the submitted one. Throws 400 on failure.
 */
async function probeForSave(source: ResolvedSource, opts: ProbeOptions): Promise<{ source: ResolvedSource; undoRoot?: () => Promise<void> }> {
  let refreshed: string | undefined;
  if (isOAuthDriver(source.driver)) {
    source = await completeFromProvider(source, (token) => (refreshed = token));
    if (refreshed) source = withToken(source, refreshed);
  }
  const outcome = await probeSource(source, { ...opts, keepRoot: true });
  if (outcome.refreshedToken) source = withToken(source, outcome.refreshedToken);
  if (outcome.failure !== null) throw new Invalid(`存储渠道探测失败：${outcome.failure}`);
  // Trust on first use: the key of the server that just passed the deep probe is what later connections must meet.
  if (outcome.hostKey) source = withHostKeyPin(source, outcome.hostKey);
  return { source, undoRoot: outcome.undoRoot };
}

/** Whether the submitted token is the sentinel, i.e. the channel's stored token is reused (spec 4.7 rule 8). */
function reusesStoredToken(input: { template?: string; inputs?: Record<string, string>; config?: Record<string, string> }): boolean {
  const values = input.template && input.template !== "custom" ? input.inputs : input.config;
  return values?.token === SECRET_SENTINEL;
}

function checkAutoCreate(source: ResolvedSource, autoCreate: boolean | undefined) {
  if (autoCreate && source.driver !== "s3") throw new Invalid("只有 S3 渠道支持 auto_create_bucket");
}

function nameTaken(app: AppContext, name: string, exceptId = 0): boolean {
  return app.channels.repo.nameTaken(name, exceptId);
}

const isUniqueViolation = (err: unknown) => /UNIQUE constraint failed/.test((err as Error)?.message ?? "");

function sourceAudit(source: ResolvedSource) {
  return {
    template: source.template,
    driver: source.driver,
    config: auditMarkers(source.config, (k) => isSensitiveConfigKey(source.driver, k)),
    ...(source.inputs ? { inputs: auditMarkers(source.inputs, (k) => isSensitiveTemplateInput(source.template, k)) } : {}),
  };
}

/** The channel with this id; NotFound otherwise (also for an id that did not parse). */
export function requireChannel(app: AppContext, id: number | undefined): ChannelRow {
  const row = id === undefined ? undefined : app.channels.repo.byId(id);
  if (!row) throw new NotFound("存储渠道不存在");
  return row;
}

export function describeChannel(app: AppContext, id: number) {
  return channelDescription(app, requireChannel(app, id));
}

async function createChannelNow(app: AppContext, actor: AuditActor, input: CreateChannelInput) {
  const encrypted = input.encrypted ?? app.settings.get().encrypt_new_channels;
  const allowDirectLink = input.allow_direct_link ?? false;
  if (encrypted && allowDirectLink) throw new Invalid("加密渠道不能开启直链 (allow_direct_link)");
  let source = resolveSource(input);
  checkAutoCreate(source, input.auto_create_bucket);
  if (nameTaken(app, input.name)) throw new Conflict("已存在同名存储渠道");
  refuseSharedPlace(app, { ...source, encrypted });

  const rootInUse = () => placeInUse(app, source);
  const probed = await probeForSave(source, { encrypted, autoCreateBucket: input.auto_create_bucket ?? false, site: app.channels.site, rootInUse });
  source = probed.source;

  let id: number;
  try {
    // Again after the probe's wait, with no await before the insert: a create that started meanwhile
    // at the same place passed the first check too.
    refuseSharedPlace(app, { ...source, encrypted });
    id = app.channels.repo.insert({
      name: input.name,
      driver: source.driver,
      template: source.template,
      secrets: { config: source.config, ...(source.inputs ? { inputs: source.inputs } : {}) },
      priority: input.priority ?? 0,
      encrypted,
      allowDirectLink,
      healthy: true,
    });
  } catch (err) {
    // Refused after its probe: the directory the probe made goes too.
    if (probed.undoRoot && !rootInUse()) await probed.undoRoot().catch(() => {});
    if (isUniqueViolation(err)) throw new Conflict("已存在同名存储渠道");
    throw err;
  }
  app.channels.reload();
  startBackfill(app, id);
  audit(app.db, actor, "channel.create", id, {
    name: input.name,
    priority: input.priority ?? 0,
    encrypted,
    allow_direct_link: allowDirectLink,
    ...sourceAudit(source),
  });
  app.log.info("已创建存储渠道", { channel: input.name, id, driver: source.driver });
  return describeChannel(app, id);
}

/**
 * Probe without saving. With `channel_id` the stored credentials stand in for
 * sentinels. An OAuth token refreshed by the probe (spec 4.7 rule 8) is
 * returned as `token` when it was newly submitted — even when the probe then
 * failed — and written straight back to the channel when it was the stored one.
 */
async function testChannelNow(app: AppContext, actor: AuditActor, input: TestChannelInput): Promise<{ ok: boolean; error?: string; token?: string }> {
  const row = input.channel_id ? requireChannel(app, input.channel_id) : undefined;
  const stored = row && { row, secrets: app.channels.repo.secrets(row) };
  const source = resolveSource(input, stored);
  checkAutoCreate(source, input.auto_create_bucket);
  if (stored && keepsSecretsElsewhere(input, source, stored)) {
    audit(app.db, actor, "channel.export", stored.row.id, { name: stored.row.name, via: "test", ...sourceAudit(source) });
  }
  const encrypted = row ? !!row.encrypted : (input.encrypted ?? app.settings.get().encrypt_new_channels);
  const outcome = await probeSource(source, {
    encrypted,
    autoCreateBucket: input.auto_create_bucket ?? false,
    crypt: row?.encrypted ? cryptPasswords(app.key, row.id, row.created_at) : undefined,
    site: app.channels.site,
    // A test leaves no directory behind, except one a channel saved meanwhile now stores in.
    rootInUse: () => placeInUse(app, source),
  });
  const result: { ok: boolean; error?: string; token?: string } =
    outcome.failure === null ? { ok: true } : { ok: false, error: `存储渠道探测失败：${outcome.failure}` };
  if (outcome.refreshedToken) {
    if (row && reusesStoredToken(input)) {
      app.channels.storeRefreshedToken(row.id, outcome.refreshedToken, { rebuild: true });
      app.channels.reload();
    } else {
      result.token = outcome.refreshedToken;
    }
  }
  return result;
}

/** PUT: full replacement of an existing channel (see requireChannel); a changed config is deep-probed before it is saved. */
async function updateChannelNow(app: AppContext, actor: AuditActor, row: ChannelRow, input: UpdateChannelInput) {
  if (row.deleting) throw new Conflict("存储渠道正在删除，不能修改");
  if (input.encrypted !== undefined && input.encrypted !== !!row.encrypted) throw new Conflict("渠道的加密设置在创建后不能修改");
  if (input.allow_direct_link && row.encrypted) throw new Invalid("加密渠道不能开启直链 (allow_direct_link)");
  if (nameTaken(app, input.name, row.id)) throw new Conflict("已存在同名存储渠道");

  const stored = app.channels.repo.secrets(row);
  let source = dropMovedPin(resolveSource(input, { row, secrets: stored }), { driver: row.driver, config: stored.config });
  checkAutoCreate(source, input.auto_create_bucket);
  const configChanged = source.driver !== row.driver || !sameValues(source.config, stored.config);
  const moved = locationChanged({ driver: row.driver, config: stored.config }, source, app.bootstrap.dataDir);
  if (moved) refuseSharedPlace(app, { ...source, encrypted: !!row.encrypted }, row.id);
  const rootInUse = () => placeInUse(app, source, row.id);
  let undoRoot: (() => Promise<void>) | undefined;
  if (configChanged || input.auto_create_bucket) {
    ({ source, undoRoot } = await probeForSave(source, {
      encrypted: !!row.encrypted,
      autoCreateBucket: input.auto_create_bucket ?? false,
      crypt: row.encrypted ? cryptPasswords(app.key, row.id, row.created_at) : undefined,
      site: app.channels.site,
      rootInUse,
    }));
  }
  const secretsChanged = configChanged || source.template !== row.template || !sameValues(source.inputs, stored.inputs);

  try {
    inWriteTransaction(app.db, () => {
      if (moved) refuseSharedPlace(app, { ...source, encrypted: !!row.encrypted }, row.id); // again: see createChannel
      app.channels.repo.update(row.id, {
        name: input.name,
        priority: input.priority,
        allowDirectLink: input.allow_direct_link,
        driver: source.driver,
        template: source.template,
        secrets: secretsChanged ? { config: source.config, ...(source.inputs ? { inputs: source.inputs } : {}) } : undefined,
      });
      if (configChanged) app.channels.repo.recordProbe(row.id, null);
      // Copies made at the old place prove nothing at the new one: as long as they counted, the
      // only-copy guard let the other channels be deleted, and the images with them.
      if (moved) app.images.unverifyCopiesOn(row.id, "渠道的存储位置已更改，正在重新核对副本");
    });
  } catch (err) {
    if (undoRoot && !rootInUse()) await undoRoot().catch(() => {});
    if (isUniqueViolation(err)) throw new Conflict("已存在同名存储渠道");
    throw err;
  }
  app.channels.reload();
  if (configChanged) requeueUnfinished(app, row.id);
  audit(app.db, actor, "channel.update", row.id, {
    name: input.name,
    priority: input.priority,
    allow_direct_link: input.allow_direct_link,
    config_changed: configChanged,
    ...sourceAudit(source),
  });
  return describeChannel(app, row.id);
}

/**
 * Probes, tests and saves of one local directory run one after another. A test removes the
 * directories its probe made; run beside a save of the same new path, it removed them after the
 * save's probe had passed and before its row was written, and the new channel had no directory.
 */
const localRootTurns = new KeyedTurns();

function inLocalRootTurn<T>(
  app: AppContext,
  input: { template?: string; driver?: string; inputs?: Record<string, string>; config?: Record<string, string> },
  run: () => Promise<T>,
): Promise<T> {
  const path = input.template === "local" ? input.inputs?.path : input.driver === "local" && !input.template ? input.config?.path : undefined;
  return path ? localRootTurns.run(resolveLocalPath(path, app.bootstrap.dataDir), run) : run();
}

export const createChannel = (app: AppContext, actor: AuditActor, input: CreateChannelInput) =>
  inLocalRootTurn(app, input, () => createChannelNow(app, actor, input));
export const testChannel = (app: AppContext, actor: AuditActor, input: TestChannelInput) =>
  inLocalRootTurn(app, input, () => testChannelNow(app, actor, input));
export const updateChannel = (app: AppContext, actor: AuditActor, row: ChannelRow, input: UpdateChannelInput) =>
  inLocalRootTurn(app, input, () => updateChannelNow(app, actor, row, input));

/**
 * Refuses a channel that would store at the same place (and account) as another: each counted
 * the same bytes as its own copy, and a purge of one deleted the other's objects.
 */
function refuseSharedPlace(app: AppContext, place: ChannelPlace, exceptId?: number) {
  const other = channelAt(app, place, exceptId);
  if (other) throw new Conflict(`存储渠道 ${other.name} 已使用同一存储位置：两个渠道会把同一份对象记作两份副本，删除其中一个还会删掉另一个的对象`);
}

/** Whether a channel (other than `exceptId`) stores at this location, encrypted or not: a probe's directory stays then. */
function placeInUse(app: AppContext, source: ResolvedSource, exceptId?: number): boolean {
  return channelAt(app, { ...source, encrypted: false }, exceptId, true) !== undefined;
}

/** The channel at `place`; `anyEncryption` compares locations only (samePlace keeps encrypted channels apart). */
function channelAt(app: AppContext, place: ChannelPlace, exceptId?: number, anyEncryption = false) {
  for (const other of app.channels.repo.all()) {
    if (other.id === exceptId) continue;
    let config: Record<string, string>;
    try {
      config = app.channels.repo.secrets(other).config;
    } catch {
      continue; // sealed under another master key: it cannot store anything anyway
    }
    if (samePlace(place, { driver: other.driver, config, encrypted: anyEncryption ? false : !!other.encrypted }, app.bootstrap.dataDir)) return other;
  }
  return undefined;
}

/** POST .../check: deep probe now (a failed load is retried first); on success failed replicas are retried. */
export async function checkChannel(app: AppContext, id: number | undefined) {
  const row = requireChannel(app, id);
  if (!app.channels.get(row.id)) app.channels.reload();
  const { after } = await probeAndLog(app, row.id, true);
  if (after?.healthy && !after.row.deleting) requeueUnfinishedEverywhere(app);
  evaluateChannelAlerts(app);
  return describeChannel(app, row.id);
}

/** The rclone config file of one channel (credentials in clear, passwords obscured as rclone stores them). */
export function exportChannel(app: AppContext, actor: AuditActor, id: number | undefined): { fileName: string; text: string } {
  const row = requireChannel(app, id);
  const config = app.channels.repo.secrets(row).config;
  let text: string;
  try {
    // rclone would read a relative local path (the default `storage`) from its own working directory.
    if (row.driver === "local" && config.path) config.path = resolveLocalPath(config.path, app.bootstrap.dataDir);
    text = renderRcloneConfig(row, config, driverOptionSpecs(row.driver), app.key);
  } catch (err) {
    // The renderer's messages name keys, never values.
    throw new Invalid((err as Error).message);
  }
  audit(app.db, actor, "channel.export", row.id, { name: row.name });
  return { fileName: `kura-${row.id}.conf`, text };
}
