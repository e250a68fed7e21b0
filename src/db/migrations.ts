// Embedded so the compiled executable carries its schema. A unit test checks
// that this list matches the files in migrations/.
import m0001 from "../../migrations/0001_init.sql" with { type: "text" };
import m0002 from "../../migrations/0002_jobs.sql" with { type: "text" };
import m0003 from "../../migrations/0003_upload_intents.sql" with { type: "text" };
import m0004 from "../../migrations/0004_image_list_indexes.sql" with { type: "text" };
import m0005 from "../../migrations/0005_s3.sql" with { type: "text" };
import m0006 from "../../migrations/0006_s3_clients.sql" with { type: "text" };
import m0007 from "../../migrations/0007_scale.sql" with { type: "text" };
import m0008 from "../../migrations/0008_search_backlog.sql" with { type: "text" };
import m0009 from "../../migrations/0009_top_images_partial.sql" with { type: "text" };
import m0010 from "../../migrations/0010_blobs_storage_key_by_sha.sql" with { type: "text" };
import m0011 from "../../migrations/0011_review_lists.sql" with { type: "text" };
import m0012 from "../../migrations/0012_dedup_audit_scale.sql" with { type: "text" };
import m0013 from "../../migrations/0013_list_scale.sql" with { type: "text" };
import m0014 from "../../migrations/0014_dedup_pair_lookups.sql" with { type: "text" };
import m0015 from "../../migrations/0015_lsky_tokens_sha1.sql" with { type: "text" };
import m0016 from "../../migrations/0016_image_own_digests.sql" with { type: "text" };
import m0017 from "../../migrations/0017_session_devices.sql" with { type: "text" };

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: Migration[] = [
  { version: 1, name: "0001_init.sql", sql: m0001 },
  { version: 2, name: "0002_jobs.sql", sql: m0002 },
  { version: 3, name: "0003_upload_intents.sql", sql: m0003 },
  { version: 4, name: "0004_image_list_indexes.sql", sql: m0004 },
  { version: 5, name: "0005_s3.sql", sql: m0005 },
  { version: 6, name: "0006_s3_clients.sql", sql: m0006 },
  { version: 7, name: "0007_scale.sql", sql: m0007 },
  { version: 8, name: "0008_search_backlog.sql", sql: m0008 },
  { version: 9, name: "0009_top_images_partial.sql", sql: m0009 },
  { version: 10, name: "0010_blobs_storage_key_by_sha.sql", sql: m0010 },
  { version: 11, name: "0011_review_lists.sql", sql: m0011 },
  { version: 12, name: "0012_dedup_audit_scale.sql", sql: m0012 },
  { version: 13, name: "0013_list_scale.sql", sql: m0013 },
  { version: 14, name: "0014_dedup_pair_lookups.sql", sql: m0014 },
  { version: 15, name: "0015_lsky_tokens_sha1.sql", sql: m0015 },
  { version: 16, name: "0016_image_own_digests.sql", sql: m0016 },
  { version: 17, name: "0017_session_devices.sql", sql: m0017 },
];
