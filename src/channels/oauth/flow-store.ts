/**
 * Authorization requests in flight, kept in memory only: a `state` is
 * one-time, bound to the admin who started it, and expires after ten
 * minutes. The token obtained in the callback waits here until the console
 * takes it (once) — it never appears in the callback page.
 */
import { randomBytes } from "node:crypto";
import type { OAuthApp } from "./token-source";

export const FLOW_TTL_MS = 10 * 60 * 1000;
/** Admin-only, but bounded anyway: a flood of starts cannot grow memory without limit. */
const MAX_FLOWS = 500;

export interface PendingFlow {
  userId: string;
  label: string;
  app: OAuthApp;
  redirectUri: string;
  /** PKCE code_verifier (RFC 7636). */
  verifier: string;
  expiresAt: number;
  /** Set once the callback ran. */
  outcome?: { token: string } | { error: string };
}

export class FlowStore {
  private readonly flows = new Map<string, PendingFlow>();

  add(flow: Omit<PendingFlow, "expiresAt">, now = Date.now()): string {
    this.prune(now);
    if (this.flows.size >= MAX_FLOWS) this.flows.delete(this.flows.keys().next().value!);
    const state = randomBytes(24).toString("base64url");
    this.flows.set(state, { ...flow, expiresAt: now + FLOW_TTL_MS });
    return state;
  }

  /** The live flow of this user for `state`, or undefined (unknown, expired, someone else's). */
  get(state: string, userId: string, now = Date.now()): PendingFlow | undefined {
    this.prune(now);
    const flow = this.flows.get(state);
    return flow && flow.userId === userId ? flow : undefined;
  }

  /** Records the callback's outcome; the result stays takeable for another TTL. */
  finish(state: string, outcome: NonNullable<PendingFlow["outcome"]>, now = Date.now()): void {
    const flow = this.flows.get(state);
    if (!flow) return;
    flow.outcome = outcome;
    flow.expiresAt = now + FLOW_TTL_MS;
  }

  delete(state: string): void {
    this.flows.delete(state);
  }

  private prune(now: number) {
    for (const [state, flow] of this.flows) if (flow.expiresAt <= now) this.flows.delete(state);
  }
}
