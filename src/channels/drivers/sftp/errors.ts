/**
 * Chinese messages for SSH/SFTP failures. Built from error codes and levels
 * only, never from the server's free text or our config (host, port, path,
 * the pinned fingerprint: spec 6.3), so no credential can appear in them.
 */

import { SftpRequestTimeoutError } from "./watchdog";

/** SFTP status codes (draft-ietf-secsh-filexfer-02), as ssh2 puts them in `err.code`. */
export const SFTP_STATUS = { EOF: 1, NO_SUCH_FILE: 2, PERMISSION_DENIED: 3, FAILURE: 4, OP_UNSUPPORTED: 8 } as const;

const STATUS_TEXT: Record<number, string> = {
  1: "意外的文件结尾",
  2: "文件或目录不存在",
  3: "没有权限",
  4: "服务器操作失败",
  5: "请求格式错误",
  6: "没有连接",
  7: "连接已断开",
  8: "服务器不支持该操作",
};

/** True for an SFTP status reply (the server answered); false for transport failures. */
export function isSftpStatus(err: unknown): err is Error & { code: number } {
  return typeof (err as { code?: unknown })?.code === "number";
}

export function hasStatus(err: unknown, status: number): boolean {
  return isSftpStatus(err) && err.code === status;
}

export class SftpError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SftpError";
  }
}

/** The server said EOF before the size it had reported: the file is shorter than announced (or shrank while read). */
export class DataEndedEarlyError extends Error {
  constructor() {
    super("数据在达到预期大小之前就结束了 (文件比服务器报告的短，或在读取过程中变短了)");
    this.name = "DataEndedEarlyError";
  }
}

/** An operation on `target` failed; `err` is what ssh2 reported. */
export function operationError(action: string, target: string, err: unknown): SftpError {
  if (err instanceof SftpError) return err;
  const reason = isSftpStatus(err) ? (STATUS_TEXT[err.code] ?? `SFTP 状态码 ${err.code}`) : describeTransport(err);
  return new SftpError(`SFTP ${action}失败: ${target}: ${reason}`, { cause: err });
}

export type HostKeyProblem = "unknown" | "mismatch" | "revoked" | "unreadable" | { pinned: string; offered: string };

/**
 * A failed connection or login. The server's address (host, port) is configuration and is not
 * named: the channel's name, which the callers add, says which server it was.
 */
export function connectError(err: unknown, hostKeyProblem: HostKeyProblem | null): SftpError {
  let reason: string;
  if (typeof hostKeyProblem === "object" && hostKeyProblem !== null) {
    // The offered key is the server's, not configuration: shown for comparison with `ssh-keygen -lf`.
    reason =
      `主机密钥与记录的指纹不一致，已拒绝连接，未发送密码或私钥 (服务器提供的 ${hostKeyProblem.offered}，与 host_key_sha256 不符；` +
      "可能遭受中间人攻击，或服务器更换了密钥。确认更换属实后，清空 host_key_sha256 并保存渠道即可重新记录)";
  } else if (hostKeyProblem === "mismatch") reason = "主机密钥与 known_hosts 中记录的不一致，已拒绝连接 (可能遭受中间人攻击，或服务器更换了密钥)";
  else if (hostKeyProblem === "unknown") reason = "known_hosts 中没有该主机的密钥，已拒绝连接";
  else if (hostKeyProblem === "revoked") reason = "主机密钥已被 known_hosts 标记为吊销，已拒绝连接";
  else if (hostKeyProblem === "unreadable") reason = "无法读取 known_hosts_file";
  else if ((err as { level?: string })?.level === "client-authentication") reason = "认证失败，请检查 user、pass 或私钥";
  else reason = describeTransport(err);
  return new SftpError(`SFTP 连接失败: ${reason}`, { cause: err });
}

function describeTransport(err: unknown): string {
  const e = err as { code?: string; level?: string; message?: string };
  if (e?.level === "client-timeout" || e?.code === "ETIMEDOUT") return "连接超时";
  if (e?.code === "ECONNREFUSED") return "连接被拒绝";
  if (e?.code === "ECONNRESET" || e?.code === "EPIPE") return "连接被重置";
  if (e?.code === "ENOTFOUND" || e?.code === "EAI_AGAIN") return "域名解析失败";
  if (e?.code === "EHOSTUNREACH" || e?.code === "ENETUNREACH") return "网络不可达";
  if (e?.level === "protocol" || e?.level === "handshake") return "SSH 协议协商失败";
  if (e?.message === "No response from server" || e?.message === "Not connected") return "连接已断开";
  // Our own verdicts: their messages are ours, with no server text in them.
  if (err instanceof SftpRequestTimeoutError || err instanceof DataEndedEarlyError) return err.message;
  if (typeof e?.code === "string" && /^[A-Z_]{1,30}$/.test(e.code)) return `网络错误 ${e.code}`;
  return "连接异常";
}
