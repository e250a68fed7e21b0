/**
 * Request ids (src/ops/request-trace.ts): made once per request and shared with the copy the router
 * handles; a proxy's plain id is kept, anything else it sends is replaced, so a header cannot put
 * arbitrary text into the log's request_id field (fast-check, fixed seed).
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { loggedRequestId, requestIdFor, shareRequestTrace } from "../../src/ops/request-trace";

const OPTIONS = { seed: 20261129, numRuns: 500 };
const request = (id?: string) => new Request("http://kura.test/api/upload", id === undefined ? {} : { headers: { "x-request-id": id } });

test("none until a line asks for one; then one id, the same for the copy the router handles", () => {
  const original = request();
  const copy = new Request(original);
  shareRequestTrace(original, copy);
  expect(loggedRequestId(original)).toBeUndefined();
  const id = requestIdFor(copy);
  expect(id).toMatch(/^[0-9a-f]{16}$/);
  expect([requestIdFor(copy), loggedRequestId(original), loggedRequestId(copy)]).toEqual([id, id, id]);
  expect(requestIdFor(request())).not.toBe(id);
});

test("a proxy's plain id is used as it is; any other header value gives an id of Kura's own", () => {
  expect(requestIdFor(request("7f3c9a1e-nginx.01"))).toBe("7f3c9a1e-nginx.01");
  fc.assert(
    fc.property(fc.string({ maxLength: 100 }), (sent) => {
      let req: Request;
      try {
        req = request(sent);
      } catch {
        return; // not a valid header value at all
      }
      const id = requestIdFor(req);
      expect(id).toMatch(/^[A-Za-z0-9._-]{1,64}$/);
      if (/^[A-Za-z0-9._-]{1,64}$/.test(sent)) expect(id).toBe(sent);
    }),
    OPTIONS,
  );
});
