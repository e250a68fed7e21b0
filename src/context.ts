import type { Database } from "bun:sqlite";
import type { TokenBucketLimiter } from "./auth/rate-limit";
import type { SessionStore } from "./auth/sessions";
import type { Bootstrap } from "./config/bootstrap";
import type { MasterKey } from "./config/master-key";
import type { SettingsStore } from "./config/settings";
import type { Logger } from "./ops/log";
import type { Metrics } from "./ops/metrics";
import type { UserRepo } from "./users/repo";

/** Everything a request handler or background loop may need, built once in main. */
export interface AppContext {
  bootstrap: Bootstrap;
  db: Database;
  key: MasterKey;
  settings: SettingsStore;
  sessions: SessionStore;
  users: UserRepo;
  loginLimiter: TokenBucketLimiter;
  metrics: Metrics;
  log: Logger;
  /** Starts a graceful shutdown (restore, signals). */
  shutdown: (reason: string) => void;
}
