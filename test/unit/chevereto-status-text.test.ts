/** Chevereto's `status_txt` is the HTTP reason phrase of the status it answers. */
import { expect, test } from "bun:test";
import { statusText } from "../../src/compat/chevereto";

test('status_txt is the reason phrase for every status the surface answers (a 408 read "Error")', () => {
  const answered = [200, 400, 401, 403, 404, 408, 413, 415, 422, 429, 500, 503];
  expect(answered.map((s) => [s, statusText(s)])).toEqual([
    [200, "OK"],
    [400, "Bad Request"],
    [401, "Unauthorized"],
    [403, "Forbidden"],
    [404, "Not Found"],
    [408, "Request Timeout"],
    [413, "Payload Too Large"],
    [415, "Unsupported Media Type"],
    [422, "Unprocessable Entity"],
    [429, "Too Many Requests"],
    [500, "Internal Server Error"],
    [503, "Service Unavailable"],
  ]);
});
