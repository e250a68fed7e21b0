// A probe that asks /healthz and /i/{id} every 5 ms while an operation runs and records the
// longest answer: how long the operation held the server's event loop for everyone else.
export class StallProbe {
  private running = false;
  private worst = 0;
  private loop: Promise<void> = Promise.resolve();

  constructor(private readonly urls: string[]) {}

  start() {
    this.running = true;
    this.worst = 0;
    this.loop = (async () => {
      while (this.running) {
        const t0 = performance.now();
        await Promise.all(this.urls.map((u) => fetch(u).then((r) => r.arrayBuffer())));
        this.worst = Math.max(this.worst, performance.now() - t0);
        await Bun.sleep(5);
      }
    })();
  }

  /** Stops probing; the longest probe answer seen, in ms. */
  async stop(): Promise<number> {
    this.running = false;
    await this.loop;
    return this.worst;
  }
}

/** Samples a process's RSS every 5 ms; the highest seen. */
export class RssSampler {
  private timer: ReturnType<typeof setInterval> | undefined;
  peak = 0;

  constructor(private readonly read: () => number) {}

  start() {
    this.peak = this.read();
    this.timer = setInterval(() => (this.peak = Math.max(this.peak, this.read())), 5);
  }

  stop(): number {
    clearInterval(this.timer);
    this.peak = Math.max(this.peak, this.read());
    return this.peak;
  }
}
