/**
 * Where the SFTP host key pinned on first use (`host_key_sha256`) is written into a channel's
 * config, and when a saved pin must not survive an edit. The check itself is the SFTP session's.
 */
import type { ResolvedSource } from "./source";

export const HOST_KEY_OPTION = "host_key_sha256";

/** Puts the pin in the config and, for a template channel, in its inputs, so a later save from the form keeps it. */
export function withHostKeyPin<T extends { config: Record<string, string>; inputs?: Record<string, string> }>(values: T, fingerprint: string): T {
  const out = { ...values, config: { ...values.config, [HOST_KEY_OPTION]: fingerprint } };
  if (values.inputs) out.inputs = { ...values.inputs, [HOST_KEY_OPTION]: fingerprint };
  return out;
}

const address = (config: Record<string, string>) => `${(config.host ?? "").trim()}:${(config.port ?? "").trim() || "22"}`;

/**
 * An edit that points the channel at another host or port while sending the stored pin back (as the
 * form does) drops it: the pin belongs to the old server, and the save's probe records the new one.
 * A pin the admin typed in for the new address (any other value) is kept and checked.
 */
export function dropMovedPin(source: ResolvedSource, stored: { driver: string; config: Record<string, string> }): ResolvedSource {
  if (source.driver !== "sftp" || stored.driver !== "sftp") return source;
  const pin = stored.config[HOST_KEY_OPTION];
  if (!pin || source.config[HOST_KEY_OPTION] !== pin || address(source.config) === address(stored.config)) return source;
  const config = { ...source.config };
  delete config[HOST_KEY_OPTION];
  const out: ResolvedSource = { ...source, config };
  if (source.inputs) {
    out.inputs = { ...source.inputs };
    delete out.inputs[HOST_KEY_OPTION];
  }
  return out;
}
