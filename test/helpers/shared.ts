import { resolve } from "node:path";

/** The read-only shared/ folder beside the repository (spec, rclone and S3 vectors). */
export const SHARED_DIR = process.env.KURA_SHARED_DIR ?? resolve(import.meta.dir, "../../../shared");
