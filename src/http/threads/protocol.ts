import type { Settings } from "../../config/settings-schema";

/**
 * Messages between the main thread and its delivery threads (README "Delivery threads").
 * A delivery thread answers `/i/` from memory and hands every other request to the main
 * thread over a private unix socket, with these headers; the main thread believes them only
 * with the secret it gave the thread.
 */
export const HANDOVER_SECRET_HEADER = "x-kura-handover-secret";
/** The TCP peer the delivery thread saw (client address rules need it). */
export const HANDOVER_PEER_HEADER = "x-kura-handover-peer";
/** Present when the delivery thread already counted the image access of this request. */
export const HANDOVER_COUNTED_HEADER = "x-kura-handover-counted";
/**
 * The request target the client sent (percent-encoded once more), when fetch would not deliver it
 * unchanged: it collapses a leading `//` and drops a fragment, and a target without a usable Host
 * is still unnormalized (handover.ts).
 */
export const HANDOVER_TARGET_HEADER = "x-kura-handover-target";

export interface FrontInit {
  type: "init";
  hostname: string;
  port: number;
  /** The main thread's private listener (an abstract unix socket). */
  socket: string;
  secret: string;
  dbPath: string;
  maxRequestBodySize: number;
  hotBytesBudget: number;
  settings: Settings;
  referers: readonly string[];
  /**
   * Int32 [0]: the main thread's invalidation generation. It is bumped synchronously with a
   * change (before the request that made it answers); until a thread has applied the message
   * carrying that generation it hands its `/i/` requests to the main thread, so no answer after
   * a delete, setting or rule change can come from a thread that has not heard of it yet.
   */
  generation: SharedArrayBuffer;
  /** The generation the settings and rules above are current for. */
  applied: number;
}

/** Changes the delivery threads must apply; `generation` is the counter value this message brings them to. */
export interface FrontInvalidate {
  type: "invalidate";
  generation: number;
  images: string[];
  aliases: [userId: string, objectKey: string][];
  blobs: string[];
  settings?: Settings;
  referers?: readonly string[];
  /** Forget every remembered image row (changes whose rows are not listed happened). */
  everything?: boolean;
}

/** `report`: hand in everything counted so far now, then say `reported` (before a scrape). */
export type ToFront = FrontInit | FrontInvalidate | { type: "report" } | { type: "stop" };

/** What a delivery thread did since its last report: the main thread adds it to its own books. */
export interface FrontStats {
  type: "stats";
  /** [image id, accesses, epoch ms of the last one]. */
  access: [string, number, number][];
  /** [method, status, durations in seconds] of the answers the thread gave itself. */
  answers: [string, number, number[]][];
  variantHits: number;
}

export type FromFront = { type: "listening" } | { type: "failed"; error: string } | FrontStats | { type: "reported" } | { type: "stopped" };
