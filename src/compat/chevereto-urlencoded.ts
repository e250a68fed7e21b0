// Chevereto's urlencoded form (`key`, `format`, `expiration`, `source` or `image`) read as it streams in. Before, the body
// (up to 2 × the base64 size of max_upload_mb, ~56 MB) was buffered, turned into a string and
// parsed before the key was looked at: ~150 MB of memory per unauthenticated request. Now
// memory stays at a chunk or two whatever the body: `key`, `format` and `expiration` are kept (1 KiB each),
// other fields are skipped, and a long `source` (base64) is decoded to a temp file as it arrives.
import { open, rm, type FileHandle } from "node:fs/promises";
import { Invalid } from "../errors";
import { isBodyLimitError, withIdleDeadline, type BodyLimits } from "../images/upload/body-deadline";
import { base64Limit, FIELD_LIMIT_BYTES, tempPath, tooLarge, type ReceivedFile } from "../images/upload/receive";
import { Base64Decoder, DATA_URL_PREFIX } from "./base64-stream";
import { UrlencodedParser, utf8Decoder, type FormEvent } from "./urlencoded-stream";
import { writeAll } from "../shared/write-all";

/**
 * A `source` up to this many bytes is kept as text (an image URL, or short base64), handled as
 * before; a longer one can only be base64 and is decoded to disk from here on.
 */
export const SOURCE_TEXT_BYTES = 8 * 1024;

/** No form field name we keep is longer; longer names are skipped like any unknown field. */
const MAX_NAME_BYTES = 64;

/** One field's value as it arrives. */
interface ValueSink {
  write(bytes: Uint8Array): Promise<void> | void;
  /** The value is complete. */
  end(): Promise<void> | void;
  /** Drops what was received (the read failed, or a later field of the same name replaces it). */
  discard(): Promise<void>;
}

/** `key`, `format` or `expiration`: text of at most FIELD_LIMIT_BYTES. */
function smallField(name: string, done: (value: string) => void): ValueSink {
  const decoder = utf8Decoder();
  let size = 0;
  let text = "";
  return {
    write(bytes) {
      size += bytes.length;
      if (size > FIELD_LIMIT_BYTES) throw new Invalid(`表单字段 ${name} 超过 1 KiB`);
      text += decoder.decode(bytes, { stream: true });
    },
    end: () => done(text + decoder.decode()),
    discard: async () => {},
  };
}

/**
 * `source` (or `image`): text while short; past SOURCE_TEXT_BYTES base64 decoded into a temp file (minus a
 * `data:…;base64,` prefix), with the image cap (413) enforced while it streams.
 */
class SourceField implements ValueSink {
  private head: Uint8Array[] = [];
  private headBytes = 0;
  private readonly text = utf8Decoder();
  private base64?: Base64Decoder;
  private out?: FileHandle;
  private readonly path: string;
  private size = 0;

  constructor(
    tmpDir: string,
    private readonly maxBytes: number,
    private readonly done: (value: { text: string } | { file: ReceivedFile }) => void,
  ) {
    this.path = tempPath(tmpDir, "chevereto");
  }

  async write(bytes: Uint8Array) {
    if (!this.base64) {
      if (this.headBytes + bytes.length <= SOURCE_TEXT_BYTES) {
        this.head.push(bytes.slice());
        this.headBytes += bytes.length;
        return;
      }
      // Too long for a URL: base64 from here on. The prefix is stripped as the whole-text path
      // does, from the start of the value (a prefix longer than SOURCE_TEXT_BYTES is not base64).
      this.base64 = new Base64Decoder();
      this.out = await open(this.path, "w", 0o600);
      const start = this.text.decode(Buffer.concat([...this.head, bytes]), { stream: true });
      this.head = [];
      await this.decoded(start.replace(/^\s+/, "").replace(DATA_URL_PREFIX, ""));
      return;
    }
    await this.decoded(this.text.decode(bytes, { stream: true }));
  }

  private async decoded(text: string, last = false) {
    const bytes = last ? Buffer.concat([this.base64!.push(text), this.base64!.end()]) : this.base64!.push(text);
    this.size += bytes.length;
    if (this.size > this.maxBytes) throw tooLarge(this.maxBytes);
    if (bytes.length) await writeAll(this.out!, bytes);
  }

  async end() {
    if (!this.base64) return this.done({ text: this.text.decode(Buffer.concat(this.head)) });
    await this.decoded(this.text.decode(), true);
    await this.out!.close();
    this.out = undefined;
    // No hash here: prepareImage hashes the bytes it stores, which under exif_policy=strip are not these.
    this.done({ file: { path: this.path, size: this.size, fileName: "image" } });
  }

  async discard() {
    await this.out?.close().catch(() => {});
    this.out = undefined;
    if (this.base64) await rm(this.path, { force: true });
  }
}

/** The short text fields Chevereto's upload reads besides `source`; every other field is skipped. */
export const CHEVERETO_TEXT_FIELDS: readonly string[] = ["key", "format", "expiration"];

/** The fields that carry the image: Chevereto's `source`, and `image` (V4's ImgBB-compatible name). */
export type SourceName = "source" | "image";

export interface UrlencodedForm {
  /** `key`, `format`, `expiration`, and the image as text under the name it came in (`source` or `image`). */
  fields: Record<string, string>;
  /** The image decoded from base64 into a temp file, when it was too long to keep as text. */
  file?: ReceivedFile;
  /** The name the kept image (`file` or text) came in. */
  from?: SourceName;
  /** An `image` field was sent, even if a `source` won: Chevereto then answers in ImgBB's shape. */
  imageSent?: boolean;
}

/**
 * Reads the body of a urlencoded Chevereto request under `limits` (the body at most twice the
 * base64 size of the cap, a 408 after `idleMs` of silence). `onField` sees `key` and `format`
 * as soon as each has arrived and may throw to stop the read (a wrong key: nothing more is read).
 */
export async function readUrlencodedForm(
  request: Request,
  tmpDir: string,
  limits: BodyLimits,
  onField: (name: string, value: string) => void,
): Promise<UrlencodedForm> {
  const { maxBytes, idleMs } = limits;
  // Percent-encoding can double base64 text (`+`, `/` and `=` each become three characters).
  const bodyLimit = 2 * base64Limit(maxBytes);
  const declared = Number(request.headers.get("content-length") ?? NaN);
  if (declared > bodyLimit) throw tooLarge(maxBytes);
  const form: UrlencodedForm = { fields: {} };
  if (!request.body) return form;
  const sink = (name: string): ValueSink | undefined => {
    if (name === "source" || name === "image") {
      if (name === "image") form.imageSent = true;
      // Chevereto reads `source ?? image`: once a source is kept, an image is skipped unread.
      if (name === "image" && form.from === "source") return undefined;
      return new SourceField(tmpDir, maxBytes, (value) => {
        form.from = name;
        if ("file" in value) form.file = value.file;
        else form.fields[name] = value.text;
      });
    }
    if (!CHEVERETO_TEXT_FIELDS.includes(name)) return undefined;
    return smallField(name, (value) => {
      form.fields[name] = value;
      onField(name, value);
    });
  };
  const reader = withIdleDeadline(request.body, idleMs).getReader();
  const parser = new UrlencodedParser(MAX_NAME_BYTES);
  let current: ValueSink | undefined;
  const handle = async (event: FormEvent) => {
    if (event.type === "field") {
      current = event.nameTooLong ? undefined : sink(event.name);
      // A later `source` replaces an earlier one (the last value wins, as in PHP's $_REQUEST), and
      // an earlier `image`; a later `image` replaces an earlier `image` (a kept source skips it above).
      if (current instanceof SourceField) await dropSource(form);
    } else if (event.type === "value") await current?.write(event.bytes);
    else {
      const field = current;
      current = undefined;
      try {
        await field?.end();
      } catch (err) {
        await field?.discard();
        throw err;
      }
    }
  };
  try {
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read().catch((err: unknown) => {
        throw isBodyLimitError(err) ? err : new Invalid("上传中断");
      });
      if (!done) {
        size += value.length;
        if (size > bodyLimit) throw tooLarge(maxBytes);
      }
      for (const event of done ? parser.end() : parser.push(value)) await handle(event);
      if (done) return form;
    }
  } catch (err) {
    await reader.cancel().catch(() => {});
    await current?.discard();
    await dropSource(form);
    throw err;
  }
}

async function dropSource(form: UrlencodedForm) {
  delete form.fields.source;
  delete form.fields.image;
  if (form.file?.path) await rm(form.file.path, { force: true });
  form.file = undefined;
  form.from = undefined;
}
