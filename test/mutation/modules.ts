// Mutation-testing scopes for `bun run mutate` (StrykerJS, not in CI): each security- or data-critical
// module is mutated on its own and judged only by the fast, targeted tests that exercise it, so a
// run fits a small shared machine. Results and accepted survivors: test/README.md.
export interface MutationModule {
  /** Source files Stryker mutates. */
  mutate: string[];
  /** Test files (optionally with a `-t` filter) that judge the mutants. */
  tests: string[];
}

export const MODULES: Record<string, MutationModule> = {
  auth: {
    mutate: ["src/auth/sessions.ts", "src/auth/passwords.ts", "src/auth/secrets.ts", "src/auth/tokens.ts", "src/http/guard.ts"],
    tests: ["test/unit/auth-sessions.test.ts", "test/contract/session-guards.test.ts", "test/http/tokens.test.ts"],
  },
  sigv4: {
    mutate: ["src/s3/sigv4.ts"],
    tests: ["test/unit/s3-sigv4-refusals.test.ts", "test/unit/s3-sigv4.test.ts", "test/unit/s3-aws-chunked.test.ts"],
  },
  "s3-body": {
    mutate: ["src/s3/body.ts"],
    tests: ["test/unit/s3-body.test.ts", "test/unit/s3-aws-chunked.test.ts", "test/s3/body-integrity.test.ts"],
  },
  crypt: {
    mutate: ["src/channels/crypt-layer.ts", "src/channels/rclone/crypt-data.ts"],
    tests: ["test/unit/crypt-layer.test.ts", "test/unit/crypt-layer-streams.test.ts", "test/unit/crypt-layer-nonces.test.ts", "test/unit/rclone-crypt.test.ts"],
  },
  /** What the server does about its own faults: the fault table, durable answers, the lock breaker, repeated failures logged once. */
  "fault-plumbing": {
    mutate: ["src/ops/server-faults.ts", "src/db/durability.ts", "src/db/lock-breaker.ts", "src/ops/repeated-failure.ts"],
    tests: ["test/unit/server-faults.test.ts", "test/unit/wal-durability.test.ts", "test/unit/db-lock-breaker.test.ts", "test/unit/repeated-failure.test.ts"],
  },
  /** rclone's own encodings: obscured config passwords, the key derivation, encrypted names (EME + base32). */
  "rclone-names": {
    mutate: ["src/channels/rclone/obscure.ts", "src/channels/rclone/crypt-keys.ts", "src/channels/rclone/crypt-names.ts", "src/channels/rclone/eme.ts"],
    tests: ["test/unit/rclone-names-rules.test.ts", "test/unit/rclone-obscure.test.ts", "test/unit/rclone-crypt.test.ts"],
  },
  "upload-store": {
    mutate: ["src/images/store.ts"],
    tests: [
      "test/unit/upload-store.test.ts",
      "test/unit/upload-store-replans.test.ts",
      "test/services/uploads.test.ts",
      "test/http/quota-usage.test.ts",
      "test/http/min-success.test.ts",
      // The commit's re-checks (uploader, token, blob and channels changed while the bytes were written).
      "test/http/upload-delete-races.test.ts",
      "test/http/concurrent-duplicates.test.ts",
    ],
  },
  /** The aws-chunked body decoder (chunk signatures, trailers) and the checksums it and PutObject verify. */
  "s3-chunked": {
    mutate: ["src/s3/aws-chunked-parser.ts", "src/s3/aws-chunked.ts", "src/s3/checksums.ts"],
    tests: [
      "test/unit/aws-chunked-rules.test.ts",
      "test/unit/s3-aws-chunked.test.ts",
      "test/unit/s3-body.test.ts",
      "test/fuzz/parsers.test.ts",
      "test/s3/checksums.test.ts",
    ],
  },
  /** SigV4's canonical request, string to sign, key derivation and date parsing. */
  "sigv4-canonical": {
    mutate: ["src/s3/sigv4-canonical.ts"],
    tests: [
      "test/unit/sigv4-canonical.test.ts",
      "test/unit/s3-sigv4.test.ts",
      "test/unit/s3-sigv4-refusals.test.ts",
      "test/unit/s3-aws-chunked.test.ts",
      "test/unit/s3-post-policy.test.ts",
      "test/fuzz/parsers.test.ts",
    ],
  },
  /** How an `/s3/` request is read and dispatched: bucket and key from the path, the operation, listing parameters, write conditions. */
  "s3-requests": {
    mutate: [
      "src/s3/request.ts",
      // Not the fault logging of `handle` (which log line a thrown error gets).
      "src/s3/router.ts:1-203",
      "src/s3/router.ts:207-242",
      "src/s3/folders.ts",
      "src/s3/write-conditions.ts",
      // The marker and its start, and the handlers' parameters (not the key walk or the key order).
      "src/s3/ops/list.ts:43-63",
      "src/s3/ops/list.ts:147-214",
    ],
    tests: ["test/unit/s3-request-reading.test.ts", "test/unit/s3-request-routing.test.ts", "test/unit/s3-listing-and-write-rules.test.ts"],
  },
  /** The XML reader of CompleteMultipartUpload and Delete bodies. */
  "s3-xml": {
    mutate: ["src/s3/xml-reader.ts"],
    tests: ["test/unit/s3-xml-reader.test.ts", "test/unit/s3-xml-rules.test.ts", "test/unit/markup.test.ts"],
  },
  /** SFTP host key checking against known_hosts (judged against OpenSSH's own matcher). */
  "known-hosts": {
    mutate: ["src/channels/drivers/sftp/known-hosts.ts"],
    tests: ["test/unit/sftp-known-hosts.test.ts"],
  },
  /** Browser-form uploads' gate: the POST policy's signature, expiry and conditions. */
  "post-policy": {
    mutate: ["src/s3/post-policy.ts"],
    tests: ["test/unit/s3-post-policy.test.ts", "test/fuzz/post-policy.test.ts", "test/s3/presigned-post.test.ts"],
  },
  /** Upload tokens alone: the plaintext's, header's and access key's exact shapes, and the expiry second. */
  tokens: {
    mutate: ["src/auth/tokens.ts"],
    tests: ["test/unit/auth-tokens.test.ts"],
  },
  /** Which blob owns a storage key: upload undo and crash recovery delete what no blob owns. */
  "storage-key": {
    mutate: ["src/images/storage-key.ts", "src/images/repos/references.ts:43-57"],
    tests: ["test/unit/storage-key.test.ts", "test/unit/upload-store.test.ts"],
  },
  /** The channel drivers' HTTP deadlines: headers, then each silence in a body, never the whole download. */
  "http-deadlines": {
    mutate: ["src/channels/drivers/http-transport.ts:54-100", "src/shared/idle-deadline.ts"],
    tests: ["test/unit/http-transport.test.ts"],
  },
  /** Login throttling: buckets per address (IPv6 /64), name and account, bounded under churn. */
  "login-throttle": {
    mutate: ["src/auth/login-throttle.ts", "src/auth/rate-limit.ts"],
    tests: ["test/unit/login-throttle.test.ts", "test/unit/foundation.test.ts"],
  },
  /** The streaming urlencoded and base64 readers behind Chevereto's forms. */
  "urlencoded-stream": {
    mutate: ["src/compat/urlencoded-stream.ts", "src/compat/base64-stream.ts"],
    tests: ["test/unit/urlencoded-stream.test.ts"],
  },
  /** The upload form: the in-memory and streamed multipart paths, their limits, and which form Bun's parser may read. */
  "upload-receive": {
    mutate: ["src/images/upload/receive.ts", "src/images/upload/plain-form.ts", "src/shared/busboy-limits.ts"],
    tests: ["test/unit/upload-form-rules.test.ts", "test/unit/multipart-paths.test.ts"],
  },
  /** Chevereto's urlencoded upload form read as it streams (text fields, `source ?? image`, base64 to disk). */
  "chevereto-urlencoded": {
    mutate: ["src/compat/chevereto-urlencoded.ts"],
    tests: ["test/unit/chevereto-urlencoded.test.ts"],
  },
  /** Chevereto's `expiration`: whole seconds or an ISO-8601 duration on the calendar, clamped unless offered. */
  "chevereto-expiration": {
    mutate: ["src/compat/chevereto-expiration.ts"],
    tests: ["test/unit/chevereto-expiration.test.ts"],
  },
  /** Bounded waits: the render queue's wait deadline and the SFTP reply watchdog. */
  "bounded-waits": {
    mutate: ["src/delivery/limiter.ts", "src/channels/drivers/sftp/watchdog.ts"],
    tests: ["test/unit/delivery-limiter.test.ts", "test/unit/sftp-watchdog.test.ts"],
  },
  /** The dashboards' top images: two partial reads that must equal one sort of the whole library. */
  "top-images": {
    mutate: ["src/ops/repos/dashboard.ts:18-37"],
    tests: ["test/scale/top-images.test.ts"],
  },
  /** Near-duplicate images: the perceptual hash, the multi-index lookup (its chunks, the distance-6 bound), the scan round's and merge's pair decisions. */
  "dedup-index": {
    mutate: [
      "src/images/phash.ts",
      "src/images/phash-index.ts",
      "src/images/dedup.ts:57-109",
      "src/images/dedup.ts:118-124",
      "src/images/dedup.ts:137-196",
      "src/images/dedup.ts:317-390",
    ],
    // bun runs the files of one command in path order: the scale tests go in commands of their own, after the fast unit tests.
    tests: [
      "test/unit/phash-index-rules.test.ts",
      "test/unit/dedup-round-rules.test.ts",
      "test/unit/phash.test.ts",
      'test/scale/dedup-index.test.ts -t "chunks cover|finds exactly the pairs"',
      'test/scale/dedup-merge-refill.test.ts -t "distance 6"',
      'test/scale/dedup-burst.test.ts -t "20 nearest|stopped between slices"',
    ],
  },
  delivery: {
    mutate: ["src/delivery/serve-image.ts", "src/delivery/cache-headers.ts", "src/delivery/etag.ts"],
    tests: ["test/unit/delivery-conditional.test.ts", "test/unit/delivery-headers.test.ts", "test/http/delivery-bytes.test.ts", "test/http/delivery.test.ts"],
  },
  /** The cold paths of `/i/` (channel reads with their size checks, redirect mode, render failures), judged by the HTTP tests that reach them. */
  "delivery-cold": {
    mutate: ["src/delivery/serve-image.ts"],
    tests: [
      "test/http/delivery.test.ts",
      "test/http/delivery-bytes.test.ts",
      "test/http/multichannel.test.ts",
      "test/http/spec-sweep-delivery.test.ts",
      "test/http/channel-content-checks.test.ts",
      "test/http/delivery-encoders.test.ts",
      "test/services/delivery-lookup-failure.test.ts",
    ],
  },
  /** The in-memory pipeline every `/i/`, `/o/` and thumb answer passes: validators, ranges, HEAD, hotlinks, counting, the hot answers. */
  "delivery-pipeline": {
    mutate: ["src/delivery/pipeline.ts"],
    tests: [
      "test/unit/delivery-conditional.test.ts",
      "test/unit/request-edges.test.ts",
      "test/unit/delivery-hot-answers-equivalence.test.ts",
      "test/http/delivery.test.ts",
      "test/http/delivery-bytes.test.ts",
      "test/http/delivery-edges.test.ts",
      "test/http/delivery-encoders.test.ts",
      "test/http/delivery-rules.test.ts",
      "test/http/multichannel.test.ts",
      "test/services/delivery-lookup-failure.test.ts",
    ],
  },
  /** The conditional-request parser alone, judged by its unit tests (minutes instead of an hour). */
  "delivery-etag": {
    mutate: ["src/delivery/etag.ts"],
    tests: ["test/unit/delivery-conditional.test.ts", "test/unit/delivery-headers.test.ts"],
  },
  /** What `/i/` answers with: `w` and `format` read from the query, WebP negotiated from Accept (spec 4.5 rule 1). */
  negotiation: {
    mutate: ["src/delivery/negotiate.ts", "src/delivery/params.ts"],
    tests: ["test/unit/delivery-negotiation-rules.test.ts", "test/unit/delivery-params.test.ts", "test/fuzz/parsers.test.ts"],
  },
  /** The warm-answer memo, judged by its rules and by the equivalence property against the plain pipeline. */
  "hot-answers": {
    mutate: ["src/delivery/hot-answers.ts"],
    tests: ["test/unit/delivery-hot-answers.test.ts", "test/unit/delivery-hot-answers-equivalence.test.ts"],
  },
  /** exif_policy=strip: EXIF, GPS, XMP and comments removed from every format, orientation and colour kept. */
  "exif-strip": {
    mutate: [
      "src/images/exif.ts",
      "src/images/exif-jpeg.ts",
      "src/images/exif-parts.ts",
      "src/images/exif-avif.ts",
      "src/images/exif-gainmap.ts",
      "src/images/sniff.ts",
    ],
    tests: [
      "test/unit/exif-strip-rules.test.ts",
      "test/unit/exif-jpeg-rules.test.ts",
      "test/unit/exif-jpeg-gainmap-selection.test.ts",
      "test/unit/exif-parts.test.ts",
      "test/unit/exif.test.ts",
      "test/unit/exif-avif.test.ts",
      "test/unit/exif-avif-rules.test.ts",
      "test/unit/exif-gainmap.test.ts",
      "test/unit/exif-gainmap-rules.test.ts",
      "test/unit/sniff.test.ts",
      "test/unit/sniff-rules.test.ts",
    ],
  },
  /** Parts of `exif-strip`, each judged by the tests that reach it (the whole scope takes ~3 h). */
  "exif-jpeg": {
    mutate: ["src/images/exif-jpeg.ts"],
    tests: [
      "test/unit/exif-jpeg-rules.test.ts",
      "test/unit/exif-jpeg-gainmap-selection.test.ts",
      "test/unit/exif.test.ts",
      "test/unit/exif-strip-rules.test.ts",
      "test/unit/exif-gainmap.test.ts",
    ],
  },
  "exif-gainmap": {
    mutate: ["src/images/exif-gainmap.ts"],
    tests: ["test/unit/exif-gainmap-rules.test.ts", "test/unit/exif-gainmap.test.ts", "test/unit/exif.test.ts"],
  },
  "exif-avif": {
    mutate: ["src/images/exif-avif.ts"],
    tests: ["test/unit/exif-avif-rules.test.ts", "test/unit/exif-avif.test.ts"],
  },
  sniff: {
    mutate: ["src/images/sniff.ts"],
    tests: ["test/unit/sniff.test.ts", "test/unit/sniff-rules.test.ts"],
  },
  /** The strip's format-independent part alone: the EXIF facts kept, the minimal block written back, the pieces joined. */
  "exif-parts": {
    mutate: ["src/images/exif-parts.ts"],
    tests: ["test/unit/exif-parts.test.ts"],
  },
  /** Who is asking: the client address behind trusted proxies, https detection, the raw request target, hotlink matching. */
  "request-identity": {
    mutate: ["src/http/request-info.ts", "src/http/raw-url.ts", "src/shared/url-target.ts", "src/delivery/referer.ts"],
    tests: [
      "test/unit/request-identity.test.ts",
      "test/unit/foundation.test.ts",
      "test/unit/request-edges.test.ts",
      "test/unit/delivery-referer.test.ts",
      "test/fuzz/parsers.test.ts",
    ],
  },
  /** The URL import's download alone (hops, timeouts, the cap, file names): minutes instead of the whole `ssrf` scope. */
  "safe-fetch": {
    mutate: ["src/net/safe-fetch.ts"],
    tests: ["test/unit/ssrf-rules.test.ts", "test/unit/safe-fetch.test.ts", "test/unit/safe-fetch-edges.test.ts"],
  },
  /** The compat APIs' request inputs: Lsky's `page`/`album_id` and paginator, Chevereto's `key`/`format`/`source ?? image` read. */
  "compat-inputs": {
    mutate: ["src/compat/lsky-page.ts", "src/compat/chevereto-input.ts"],
    tests: ["test/unit/compat-input-rules.test.ts", "test/unit/lsky-page.test.ts"],
  },
  /** Small parsers: the channel drivers' Range/Content-Range checks and the `kura` command line. */
  "small-parsers": {
    mutate: ["src/channels/drivers/http-range.ts", "src/cli/args.ts"],
    tests: ["test/unit/small-parser-rules.test.ts", "test/unit/read-guards.test.ts"],
  },
  ssrf: {
    mutate: ["src/net/safe-fetch.ts", "src/net/public-address.ts", "src/net/cidr.ts"],
    tests: ["test/unit/ssrf-rules.test.ts", "test/unit/safe-fetch.test.ts", "test/unit/safe-fetch-edges.test.ts", "test/unit/public-address.test.ts"],
  },
};

/** The shell command Stryker's command runner runs per mutant: `bun test --bail` over the module's tests. */
export function testCommand(tests: string[]): string {
  const plain = tests.filter((t) => !t.includes(" -t "));
  const filtered = tests.filter((t) => t.includes(" -t "));
  return [plain.length ? `bun test --bail --timeout 60000 ${plain.join(" ")}` : "", ...filtered.map((t) => `bun test --bail --timeout 60000 ${t}`)]
    .filter(Boolean)
    .join(" && ");
}
