/**
 * One-shot workers (the backup's VACUUM INTO): whoever waits for the answer is told when the
 * worker dies instead, whether it exits or throws, so a backup can never hang for good.
 */
import { describe, expect, test } from "bun:test";
import { askWorkerOnce } from "../../src/shared/inline-worker";

const SOURCE = `
self.onmessage = (event) => {
  const what = event.data;
  if (what === "answer") postMessage({ echoed: what });
  if (what === "exit") process.exit(7);
  if (what === "throw") setTimeout(() => { throw new Error("工作线程故障"); });
};`;

/** The outcome, or "hung" when nothing settles within 5 s. */
async function outcome(message: string): Promise<string> {
  const hung = Bun.sleep(5_000).then(() => "hung");
  const settled = askWorkerOnce<{ echoed: string }>(SOURCE, message).then(
    (answer) => `answer ${answer.echoed}`,
    (err: Error) => `rejected ${err.message}`,
  );
  return Promise.race([settled, hung]);
}

describe("askWorkerOnce", () => {
  test("resolves with the worker's first answer", async () => {
    expect(await outcome("answer")).toBe("answer answer");
  });

  test("a worker that exits without answering rejects with its exit code, in Chinese", async () => {
    expect(await outcome("exit")).toBe("rejected 后台线程意外退出（代码 7）");
  });

  test("a worker that throws rejects with the error", async () => {
    expect(await outcome("throw")).toContain("工作线程故障");
  });
});
