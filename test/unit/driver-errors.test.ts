/**
 * What a channel's network failure says (driver-errors.ts): the runtime's real errors, caught from
 * Bun's fetch, become Chinese reasons; no code of the runtime's own (ERR_INVALID_URL) is shown as
 * the reason.
 */
import { describe, expect, test } from "bun:test";
import { channelErrorText, networkError, networkFailureReason } from "../../src/channels/drivers/driver-errors";
import { expectUserMessage } from "../helpers/messages";

const fetchError = async (url: string): Promise<unknown> => {
  try {
    await fetch(url, { signal: AbortSignal.timeout(5_000) });
  } catch (err) {
    return err;
  }
  throw new Error(`${url} answered`);
};

describe("network failures of a channel", () => {
  test("a URL Bun's fetch refuses before connecting (bucket in front of an IP)", async () => {
    const err = await fetchError("http://bucket.127.0.0.1:1/");
    expect((err as { code?: string }).code).toBe("ERR_INVALID_URL");
    const reason = networkFailureReason(err);
    expectUserMessage(reason);
    expectUserMessage(networkError(err, "S3").message);
    expectUserMessage(channelErrorText(err));
  });

  test.each(["EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "EPIPE", "ECONNABORTED"])("%s is named in Chinese", (code) => {
    const reason = networkFailureReason(Object.assign(new Error(`${code}: Unable to connect`), { code }));
    expectUserMessage(reason);
    expect(reason).not.toContain(code);
  });
});
