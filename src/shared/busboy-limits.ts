/**
 * Form limits in the sense Kura means them ("at most N") as busboy takes them. busboy calls a
 * part that reaches its size limit truncated (a file's `limit` event, a field's `valueTruncated`)
 * and a form whose part count reaches `parts` over it, so those three get one more; `files` and
 * `fields` already count as meant (the one past them is refused). Without this, a streamed form
 * refused a file of exactly the cap, a field of exactly its limit and exactly the allowed parts.
 */
import type busboy from "busboy";

export function busboyLimits(most: { fileSize?: number; fieldSize: number; files: number; fields: number; parts: number }): busboy.Limits {
  return {
    ...(most.fileSize === undefined ? {} : { fileSize: most.fileSize + 1 }),
    fieldSize: most.fieldSize + 1,
    files: most.files,
    fields: most.fields,
    parts: most.parts + 1,
  };
}
