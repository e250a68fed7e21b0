import type { Database } from "bun:sqlite";
import type { LoginThrottle } from "./auth/login-throttle";
import type { SessionStore } from "./auth/sessions";
import type { ChannelRegistry } from "./channels/registry";
import type { Bootstrap } from "./config/bootstrap";
import type { MasterKey } from "./config/master-key";
import type { SettingsStore } from "./config/settings";
import type { AccessBuffer } from "./delivery/access-log";
import type { DeliveryLookups } from "./delivery/lookups";
import type { RefererRules } from "./delivery/referer-rules";
import type { VariantService } from "./delivery/variants";
import type { WalDurability } from "./db/durability";
import type { LockBreaker } from "./db/lock-breaker";
import type { GroupCommit } from "./db/group-commit";
import type { ImageRepo } from "./images/repo";
import type { UploadGate } from "./images/upload/limits";
import type { JobKinds } from "./jobs/kinds";
import type { JobQueue } from "./jobs/queue";
import type { Logger } from "./ops/log";
import type { Metrics } from "./ops/metrics";
import type { UserRepo } from "./users/repo";

export interface DataPaths {
  /** Upload staging; emptied at every start. */
  tmp: string;
  /** Generated variants (LRU cache). */
  variants: string;
  /** Default local channel. */
  storage: string;
  /** Parts of open S3 multipart uploads, one folder per upload; kept across restarts (s3/multipart-restart.ts). */
  multipart: string;
}

/** Everything a request handler or background loop may need, built once in serve(). */
export interface AppContext {
  bootstrap: Bootstrap;
  paths: DataPaths;
  db: Database;
  /** Upload writes share commits with the others of the same event-loop turn (src/db/group-commit.ts). */
  commits: GroupCommit;
  /** Makes the commits so far durable before a write request is answered (src/db/durability.ts). */
  durability: WalDurability;
  /** Fails writes at once while another process holds the database's write lock (src/db/lock-breaker.ts). */
  dbLock: LockBreaker;
  key: MasterKey;
  settings: SettingsStore;
  sessions: SessionStore;
  users: UserRepo;
  images: ImageRepo;
  channels: ChannelRegistry;
  jobs: JobQueue<JobKinds>;
  referers: RefererRules;
  access: AccessBuffer;
  lookups: DeliveryLookups;
  variants: VariantService;
  loginLimiter: LoginThrottle;
  /** Upload admission shared by every upload surface (session, token, S3). */
  uploadGate: UploadGate;
  metrics: Metrics;
  log: Logger;
  /** Starts a graceful shutdown (restore, signals). */
  shutdown: (reason: string) => void;
}
