// Shapes of the /api/admin JSON the console reads. The server-shared ones are generated from
// openapi.yaml (api-types.ts, see scripts/gen-console-types.ts); only console-side types live here.
import type { ConfigSlice, Image, Principal } from "./api-types";

export type {
  AdminDashboard,
  Alert,
  AuditEntry,
  BackupSnapshot,
  Channel,
  ChannelConfigView,
  ChannelTemplate,
  ChannelTestResult,
  CleanupItem,
  ConfigSlice,
  DedupCandidate,
  DedupSide,
  FullConfig,
  Image,
  Principal,
  RefererRule,
  S3Credential,
  Settings,
  Timestamp,
  Token,
  TokenIssued,
  TopImage,
  UploadResult,
  User,
  UserDashboard,
} from "./api-types";

export type Replica = NonNullable<Image["replicas"]>[number];

/** Every paged list answers `{items, total}`. */
export interface Page<T> {
  items: T[];
  total: number;
  /** Lists with keyset pagination (images): the cursor of the next page, null at the end. */
  next_cursor?: string | null;
}

/** What every view gets from the shell. */
export interface ViewContext {
  me: Principal;
  config: ConfigSlice;
  /** Public site origin: base_url when set, else this page's origin. */
  origin: string;
  /** Re-reads the open-alert count shown in the top bar (after actions that may resolve alerts). */
  refreshAlerts(): void;
}
