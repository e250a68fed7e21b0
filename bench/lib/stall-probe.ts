// A probe that asks /healthz and /i/{id} every 5 ms while an operation runs and records the
// longest answer: how long the operation held the server's event loop for everyone else.
export class StallProbe {
  private running = false;
  private worst: number[] = [];
  private loops: Promise<void>[] = [];

  constructor(private readonly urls: string[]) {}

  start() {
    this.running = true;
    this.worst = this.urls.map(() => 0);
    // One loop per URL: a slow /i/ (disk) does not hide or inflate /healthz (the event loop).
    this.loops = this.urls.map(async (url, i) => {
      while (this.running) {
        const t0 = performance.now();
        await fetch(url).then((r) => r.arrayBuffer());
        this.worst[i] = Math.max(this.worst[i]!, performance.now() - t0);
        await Bun.sleep(5);
      }
    });
  }

  /** Stops probing; the longest answer seen per URL, in ms. */
  async stop(): Promise<number[]> {
    this.running = false;
    await Promise.all(this.loops);
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
