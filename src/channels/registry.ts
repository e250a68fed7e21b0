import type { Database } from "bun:sqlite";
import type { MasterKey } from "../config/master-key";
import type { Logger } from "../ops/log";
import type { Metrics } from "../ops/metrics";
import type { Driver } from "./driver";
import { channelErrorText } from "./drivers/driver-errors";
import { createDriver, type DriverSite } from "./factory";
import { HOST_KEY_OPTION, withHostKeyPin } from "./host-key-pin";
import { ChannelRepo, type ChannelRow, type ChannelSecrets } from "./repo";

/**
 * How long a driver replaced by a config change (or left by a removed channel) stays open for the
 * requests that still use it. Then it is closed, once no holder (a listing: `hold`) still uses it:
 * an SFTP driver otherwise kept its SSH connection for the life of the process, one more for every
 * change.
 */
export const RETIRED_DRIVER_GRACE_MS = 10 * 60_000;

/** `last_error` of a channel whose driver could not be constructed starts with this. */
export const LOAD_FAILURE_MARKER = "加载失败：";

export interface LoadedChannel {
  row: ChannelRow;
  /** Absent when loading failed; see `loadError`. */
  driver?: Driver;
  loadError?: string;
  healthy: boolean;
}

/** Optional layer applied to every driver (the crypt wrapper for encrypted channels). */
export type DriverWrapper = (row: ChannelRow, driver: Driver) => Driver;

/**
 * The live set of channels: drivers built from their sealed configs, health as last
 * probed, and the orders used for writes (priority) and reads (priority, healthy first).
 */
export class ChannelRegistry {
  readonly repo: ChannelRepo;
  private channels = new Map<number, LoadedChannel>();
  /** RETIRED_DRIVER_GRACE_MS; tests shorten it. */
  retiredDriverGraceMs = RETIRED_DRIVER_GRACE_MS;
  /** Holders per driver (hold()); a driver has an entry only while held. */
  private readonly holders = new Map<Driver, number>();
  /** Retired drivers whose grace is over, waiting for their last holder to let go. */
  private readonly closable = new Set<Driver>();
  constructor(
    db: Database,
    key: MasterKey,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    /** Deployment facts every driver gets: where a relative local path lies, the peer timeout. */
    readonly site: DriverSite,
    /** Applied to every driver built (the crypt layer for encrypted channels). */
    private readonly wrap: DriverWrapper = (_row, driver) => driver,
  ) {
    this.repo = new ChannelRepo(db, key);
  }

  /** (Re)builds drivers for every row; a failing config marks the channel unhealthy and is retried later. */
  reload(): void {
    const next = new Map<number, LoadedChannel>();
    for (const row of this.repo.all()) {
      const previous = this.channels.get(row.id);
      if (previous?.driver && previous.row.config_sealed === row.config_sealed && previous.row.encrypted === row.encrypted) {
        next.set(row.id, { ...previous, row });
        continue;
      }
      next.set(row.id, this.load(row));
    }
    for (const [id, old] of this.channels) if (old.driver && next.get(id)?.driver !== old.driver) this.retire(old.driver);
    this.forgetPutSeries(next);
    this.channels = next;
  }

  private retire(driver: Driver) {
    if (!driver.close) return;
    const graceOver = () => {
      this.closable.add(driver);
      this.closeIfFree(driver);
    };
    setTimeout(graceOver, this.retiredDriverGraceMs).unref?.();
  }

  private closeIfFree(driver: Driver) {
    if (!this.closable.has(driver) || this.holders.has(driver)) return;
    this.closable.delete(driver);
    void driver.close?.().catch(() => {});
  }

  /**
   * Keeps `driver` open for work that may outlast the retired drivers' grace (a reconciliation
   * listing of a large channel takes hours): a driver retired meanwhile is closed only once the
   * last holder calls the returned release (once; more calls do nothing).
   */
  hold(driver: Driver): () => void {
    this.holders.set(driver, (this.holders.get(driver) ?? 0) + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = (this.holders.get(driver) ?? 1) - 1;
      if (left > 0) this.holders.set(driver, left);
      else {
        this.holders.delete(driver);
        this.closeIfFree(driver);
      }
    };
  }

  /** The put counter's series of names no channel has any more (deleted or renamed): each would stay for good. */
  private forgetPutSeries(next: Map<number, LoadedChannel>) {
    const names = new Set([...next.values()].map((c) => c.row.name));
    for (const old of this.channels.values()) {
      if (names.has(old.row.name)) continue;
      for (const result of ["ok", "error"]) {
        this.metrics.channelPuts.remove({ channel: old.row.name, result });
        this.metrics.channelReads.remove({ channel: old.row.name, result });
      }
    }
  }

  private load(row: ChannelRow): LoadedChannel {
    try {
      const hooks = {
        onTokenRefreshed: (token: string) => this.storeRefreshedToken(row.id, token, { rebuild: false }),
        onHostKey: (fingerprint: string) => this.storeHostKey(row.id, fingerprint),
        ...this.site,
      };
      const driver = this.wrap(row, createDriver(row.driver, this.repo.secrets(row).config, hooks));
      return { row, driver, healthy: !!row.healthy };
    } catch (err) {
      const reason = this.repo.recordProbe(row.id, LOAD_FAILURE_MARKER + (err as Error).message);
      this.log.warn("存储渠道加载失败，已跳过，将在健康检查时重试", { channel: row.name, err: reason });
      return { row: { ...row, healthy: 0, last_error: reason }, loadError: reason, healthy: false };
    }
  }

  /**
   * Seals a refreshed OAuth token into the channel (config, and template inputs
   * when the token came from the form), so restarts and the rclone export use
   * it: providers may rotate refresh tokens. When the channel's own driver
   * refreshed, its row is patched in place so reload() keeps that driver; a
   * token refreshed elsewhere (channel test) rebuilds the driver on reload().
   */
  storeRefreshedToken(id: number, token: string, opts: { rebuild: boolean }): void {
    const row = this.repo.byId(id);
    if (!row) return;
    const secrets = this.repo.secrets(row);
    secrets.config.token = token;
    if (secrets.inputs && Object.hasOwn(secrets.inputs, "token")) secrets.inputs.token = token;
    this.reseal(row, secrets, () => !opts.rebuild);
    this.log.info("存储渠道的 OAuth 令牌已刷新并保存", { channel: row.name });
  }

  /**
   * Pins the host key an SFTP channel saved before pinning existed trusted on its first connection
   * (trust on first use). The driver keeps using the key it holds in memory, so its row is patched
   * in place as for a token; an edit saved meanwhile (which has its own pin or none to record) wins.
   */
  storeHostKey(id: number, fingerprint: string): void {
    const row = this.repo.byId(id);
    if (!row) return;
    const secrets = this.repo.secrets(row);
    if (secrets.config[HOST_KEY_OPTION] || secrets.config.known_hosts_file) return;
    this.reseal(row, withHostKeyPin(secrets, fingerprint), (loaded) => loaded.row.config_sealed === row.config_sealed);
    // The fingerprint itself is now configuration (shown in the channel's config view), so it is not logged (spec 6.3).
    this.log.info("已记录 SFTP 服务器的主机密钥指纹", { channel: row.name });
  }

  /**
   * Seals `secrets` as the channel's; when `keepDriver` says the loaded driver already works with
   * them (its own refresh or trust), its row is patched in place so reload() does not rebuild it.
   */
  private reseal(row: ChannelRow, secrets: ChannelSecrets, keepDriver: (loaded: LoadedChannel) => boolean): void {
    const sealed = this.repo.replaceSecrets(row.id, secrets);
    const loaded = this.channels.get(row.id);
    if (loaded && keepDriver(loaded)) loaded.row = { ...loaded.row, config_sealed: sealed };
  }

  /** Every channel, priority descending. */
  list(): LoadedChannel[] {
    return [...this.channels.values()].sort((a, b) => b.row.priority - a.row.priority || a.row.id - b.row.id);
  }

  get(id: number): LoadedChannel | undefined {
    return this.channels.get(id);
  }

  /** Healthy, loaded, not draining: where new bytes may go, best first. */
  writable(): (LoadedChannel & { driver: Driver })[] {
    return this.list().filter((c): c is LoadedChannel & { driver: Driver } => !!c.driver && c.healthy && !c.row.deleting);
  }

  /** Probes one channel (retrying a failed load first) and records the result. */
  async probe(id: number, deep = false): Promise<LoadedChannel | undefined> {
    let channel = this.channels.get(id);
    if (!channel) return undefined;
    if (!channel.driver) {
      const row = this.repo.byId(id);
      if (!row) return undefined;
      channel = this.load(row);
      this.channels.set(id, channel);
      if (!channel.driver) return channel;
    }
    let error: string | null = null;
    try {
      await channel.driver!.probe(deep);
    } catch (err) {
      error = (err as Error).message ? channelErrorText(err) : "探测失败";
    }
    this.repo.recordProbe(id, error);
    channel.healthy = error === null;
    channel.row = this.repo.byId(id) ?? channel.row;
    return channel;
  }

  /**
   * Writes bytes to one channel, counting the outcome in kura_channel_puts_total. With
   * `publishAfter`, `key` appears only after it resolves: a staging driver writes meanwhile,
   * any other starts writing then. Its rejection is the caller's failure, not the channel's.
   */
  async put(
    channel: LoadedChannel & { driver: Driver },
    key: string,
    body: ReadableStream<Uint8Array> | Uint8Array,
    size: number,
    publishAfter?: Promise<unknown>,
  ) {
    const { driver } = channel;
    if (publishAfter && !driver.stagesWrites) await publishAfter;
    try {
      await (driver.stagesWrites ? driver.put(key, body, size, publishAfter) : driver.put(key, body, size));
      this.countPut(channel.row.id, "ok");
    } catch (err) {
      const notAllowed =
        publishAfter !== undefined &&
        (await publishAfter.then(
          () => false,
          () => true,
        ));
      if (!notAllowed) this.countPut(channel.row.id, "error");
      throw err;
    }
  }

  /**
   * Counted under the name the channel has when the put ends, not the one it had when it began: a
   * put that outlived a rename would otherwise bring back the series forgetPutSeries dropped (for
   * good), and one that outlived its channel is not counted at all.
   */
  private countPut(id: number, result: "ok" | "error") {
    const now = this.channels.get(id);
    if (now) this.metrics.channelPuts.inc({ channel: now.row.name, result });
  }

  /** A read of an original from channel `id` (read.ts): `error` is a failover. Named as countPut names. */
  countRead(id: number, result: "ok" | "error") {
    const now = this.channels.get(id);
    if (now) this.metrics.channelReads.inc({ channel: now.row.name, result });
  }
}
