import type { AppContext } from "../context";
import { channelUsage } from "../ops/repos/usage";
import { isSensitiveConfigKey, isSensitiveTemplateInput, maskValues } from "./masking";
import type { ChannelRow } from "./repo";

export interface ReplicaCounts {
  done: number;
  pending: number;
  failed: number;
}

/** Replica counters of every channel, from the per-channel rollup (migration 0007). */
export function replicaCounts(app: AppContext): Map<number, ReplicaCounts> {
  const out = new Map<number, ReplicaCounts>();
  for (const [channelId, u] of channelUsage(app.db)) out.set(channelId, { done: u.blobs, pending: u.pending, failed: u.failed });
  return out;
}

/** The public description of spec 2.7: no config, no credentials. */
export function channelDescription(app: AppContext, row: ChannelRow, counts?: ReplicaCounts) {
  const loaded = app.channels.get(row.id);
  return {
    id: row.id,
    name: row.name,
    driver: row.driver,
    priority: row.priority,
    // A channel whose driver could not be built is never healthy, whatever was last recorded.
    healthy: !!row.healthy && !!loaded?.driver,
    encrypted: !!row.encrypted,
    allow_direct_link: !!row.allow_direct_link,
    last_checked_at: row.last_checked_at,
    last_error: row.last_error,
    deleting: !!row.deleting,
    replicas: counts ?? replicaCounts(app).get(row.id) ?? { done: 0, pending: 0, failed: 0 },
    created_at: row.created_at,
  };
}

/** Every channel, priority descending (ties by id). */
export function channelList(app: AppContext) {
  const counts = replicaCounts(app);
  const items = app.channels.repo.all().map((row) => channelDescription(app, row, counts.get(row.id) ?? { done: 0, pending: 0, failed: 0 }));
  return { items, total: items.length };
}

/** The edit view (GET /api/admin/channels/{id}/config): every sensitive value masked. */
export function channelConfigView(app: AppContext, row: ChannelRow) {
  const secrets = app.channels.repo.secrets(row);
  const view: { template: string; driver: string; config: Record<string, string>; inputs?: Record<string, string> } = {
    template: row.template,
    driver: row.driver,
    config: maskValues(secrets.config, (k) => isSensitiveConfigKey(row.driver, k)),
  };
  if (row.template) view.inputs = maskValues(secrets.inputs ?? {}, (k) => isSensitiveTemplateInput(row.template, k));
  return view;
}
