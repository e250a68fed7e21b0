/**
 * Notices an SFTP server that stopped answering. An SSH connection can stay up (sshd answers
 * keepalives) while its SFTP server hangs, e.g. on a stuck disk: then no reply ever comes.
 *
 * What is timed is the channel's silence, not each request: while any request is outstanding,
 * some reply must arrive every `ms`. Requests pipelined on a slow link queue behind each
 * other (16 writes of 64 KiB are 1 MiB in flight), so a deadline per request would fail a
 * healthy upload that merely moves slowly; silence on a channel with work pending would not.
 */
export class SftpRequestTimeoutError extends Error {
  constructor(ms: number) {
    super(`SFTP 服务器 ${ms / 1000} 秒未响应`);
    this.name = "SftpRequestTimeoutError";
  }
}

export class ReplyWatchdog {
  private readonly pending = new Set<(err: Error) => void>();
  private lastReply = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  /** `onHung` runs once the silence is found, after every pending request was failed. */
  constructor(
    private readonly ms: number,
    private readonly onHung: () => void,
  ) {}

  /** Counts one request as outstanding; call the returned function when its reply arrives. */
  track(fail: (err: Error) => void): () => void {
    this.pending.add(fail);
    // With nothing outstanding there is no timer; a fresh one gives the first request a whole `ms`.
    this.timer ??= setTimeout(() => this.check(), this.ms);
    return () => {
      this.pending.delete(fail);
      this.lastReply = performance.now();
      if (this.pending.size === 0) {
        clearTimeout(this.timer);
        this.timer = undefined;
      }
    };
  }

  private check() {
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const silent = performance.now() - this.lastReply;
    if (silent < this.ms) {
      this.timer = setTimeout(() => this.check(), this.ms - silent);
      return;
    }
    const failing = [...this.pending];
    this.pending.clear();
    for (const fail of failing) fail(new SftpRequestTimeoutError(this.ms));
    this.onHung();
  }
}
