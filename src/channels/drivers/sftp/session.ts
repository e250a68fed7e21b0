/**
 * One SSH connection with one SFTP channel per driver, opened on first use and
 * reopened after it drops. SFTP requests carry ids, so concurrent operations
 * share the channel (pipelined) instead of being serialized or pooled.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Client, ConnectConfig, SFTPWrapper } from "ssh2";
import { ssh2 } from "./ssh2";
import type { SftpSettings } from "./config";
import { checkKey } from "./config";
import { fsErrorReason } from "../driver-errors";
import { connectError, isSftpStatus, SftpError, type HostKeyProblem } from "./errors";
import { type KnownHostLine, parseKnownHosts, preferredHostKeyAlgorithms, verifyHostKey } from "./known-hosts";
import { limitRequestTime } from "./ops";
import { SftpRequestTimeoutError } from "./watchdog";

interface Live {
  client: Client;
  sftp: SFTPWrapper;
  /** Set (synchronously) once the connection is known to be gone: the next call reconnects. */
  dead?: boolean;
}

/** A host key blob's fingerprint as OpenSSH prints it (`ssh-keygen -l`): SHA256, base64 without padding. */
export function hostKeyFingerprint(key: Buffer): string {
  return `SHA256:${createHash("sha256").update(key).digest("base64").replace(/=+$/, "")}`;
}

export class SftpSession {
  private current: Promise<Live> | null = null;
  /** Set by close(): no connection is opened again (a call that outlived its driver would leave one open for good). */
  private closed = false;
  /** The configured pin, or the key trusted on this session's first connection: reconnects must meet the same server. */
  private pinned: string | null;

  constructor(
    private readonly settings: SftpSettings,
    private readonly timeoutMs: number,
    /** Told the key a first-use connection trusted (once per such connection), so the owner can store the pin. */
    private readonly onHostKey?: (fingerprint: string) => void,
  ) {
    this.pinned = settings.hostKeySha256;
  }

  /** Runs `op` on the channel. Idempotent ops are retried once on a fresh connection if the old one died. */
  async run<T>(op: (sftp: SFTPWrapper) => Promise<T>, idempotent: boolean): Promise<T> {
    const live = await this.live();
    try {
      return await op(live.sftp);
    } catch (err) {
      if (!isConnectionLoss(err)) throw err;
      this.drop(live);
      if (!idempotent) throw err;
      return op((await this.live()).sftp);
    }
  }

  private async live(): Promise<Live> {
    for (;;) {
      if (this.closed) throw new SftpError("SFTP 连接已关闭（渠道配置已更改或渠道已删除），不再重新连接");
      if (!this.current) {
        const attempt = this.connect();
        this.current = attempt;
        attempt.catch(() => {
          if (this.current === attempt) this.current = null;
        });
      }
      const attempt = this.current;
      const live = await attempt;
      if (!live.dead) return live;
      if (this.current === attempt) this.current = null;
    }
  }

  private drop(live: Live): void {
    live.dead = true;
    live.client.end();
  }

  private async connect(): Promise<Live> {
    const s = this.settings;
    let hostKeyProblem: HostKeyProblem | null = null;
    const config: ConnectConfig = {
      host: s.host,
      port: s.port,
      username: s.user,
      readyTimeout: this.timeoutMs,
      // Detects a silently dead peer (NAT timeout, server gone) within ~90 s.
      keepaliveInterval: 30_000,
      keepaliveCountMax: 3,
    };
    if (s.password !== undefined) {
      config.password = s.password;
      // Servers that only offer keyboard-interactive get the same password for each prompt.
      config.tryKeyboard = true;
    }
    if (s.privateKey) config.privateKey = s.privateKey;
    else if (s.keyFile) config.privateKey = await readKeyFile(s.keyFile, s.passphrase);
    if (s.passphrase !== undefined) config.passphrase = s.passphrase;
    if (s.agent) config.agent = s.agent;
    let lines: KnownHostLine[] | null = null;
    if (s.knownHostsFile !== null) {
      try {
        lines = parseKnownHosts(await readFile(s.knownHostsFile, "utf8"));
      } catch (err) {
        throw connectError(err, "unreadable");
      }
      const algorithms = preferredHostKeyAlgorithms(lines, s.host, s.port);
      if (algorithms.length > 0) config.algorithms = { serverHostKey: algorithms as never };
    }
    // Both checks apply when both are set: known_hosts first, then the pin. The verifier runs during
    // key exchange, before any authentication, so a refused server never sees a password or key.
    const pinned = this.pinned;
    let offered = "";
    config.hostVerifier = (key: Buffer) => {
      offered = hostKeyFingerprint(key);
      const verdict = lines === null ? "ok" : verifyHostKey(lines, s.host, s.port, key);
      if (verdict !== "ok") hostKeyProblem = verdict;
      else if (pinned !== null && offered !== pinned) hostKeyProblem = { pinned, offered };
      return hostKeyProblem === null;
    };

    const client = new (ssh2().Client)();
    const live = await new Promise<Live>((resolve, reject) => {
      let settled = false;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        client.end();
        reject(connectError(err, hostKeyProblem));
      };
      client.once("ready", () => {
        client.sftp((err, sftp) => {
          if (err) return fail(err);
          settled = true;
          resolve({ client, sftp });
        });
      });
      if (s.password !== undefined) {
        client.on("keyboard-interactive", (_name, _instructions, _lang, prompts, finish) => finish(prompts.map(() => s.password!)));
      }
      client.on("error", fail);
      client.once("close", () => fail(new Error("Not connected")));
      client.connect(config);
    });
    // From now on a drop only means "reconnect next time"; errors must not go unhandled.
    const forget = () => {
      live.dead = true;
    };
    // Dropped at once, not when the channel's close is answered: sshd answers it only after the
    // hung sftp-server exits, so until then every call would spend a deadline on the dead channel.
    limitRequestTime(live.sftp, this.timeoutMs, () => this.drop(live));
    if (pinned === null && s.pinOnFirstUse && offered !== "") {
      this.pinned = offered;
      this.onHostKey?.(offered);
    }
    client.on("close", forget);
    client.on("error", forget);
    live.sftp.on("close", () => {
      forget();
      client.end();
    });
    return live;
  }

  async close(): Promise<void> {
    this.closed = true;
    const current = this.current;
    this.current = null;
    const live = await current?.catch(() => null);
    if (!live) return;
    await new Promise<void>((resolve) => {
      live.client.once("close", () => resolve());
      live.client.end();
      setTimeout(resolve, 2_000).unref?.();
    });
  }
}

/** ssh2's ways of saying the connection or channel is gone (a status reply means the server is fine). */
function isConnectionLoss(err: unknown): boolean {
  if (err instanceof SftpRequestTimeoutError) return true;
  if (isSftpStatus(err) || err instanceof SftpError) return false;
  const e = err as { message?: string; code?: unknown; level?: unknown };
  if (typeof e?.level === "string") return true;
  if (typeof e?.code === "string" && /^E[A-Z]+$/.test(e.code)) return true;
  return /No response from server|Not connected|Channel (is )?not open|Keepalive timeout|write after end/i.test(e?.message ?? "");
}

async function readKeyFile(path: string, passphrase: string | undefined): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    // Named by its option only: the file's path is configuration (spec 6.3).
    const code = (err as NodeJS.ErrnoException).code ?? "";
    throw new SftpError(`SFTP key_file 无法读取${code ? `：${fsErrorReason(err) ?? code}` : ""}`);
  }
  try {
    checkKey(text, passphrase, "key_file");
  } catch (err) {
    // A config problem, not a transport one: keep checkKey's message as is.
    throw new SftpError((err as Error).message);
  }
  return text;
}
