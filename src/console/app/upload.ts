// Upload page: drag & drop / file picker with per-file progress and a status text that
// matches it (等待中 → 上传中 → 处理中 → 完成 / 失败), an overall x/N counter (URL imports included), retry for
// failed files, "copy all links", import from URL (with an optional file name). Every file and
// every URL import carries an Idempotency-Key kept across its retries, so a retry after a lost
// answer returns the image the server already stored instead of storing it twice. The shell
// keeps this page alive, so results survive switching tabs. Links come in the forms people
// paste (URL, Markdown, Markdown with link, HTML, BBCode, thumbnail).
import { api, newIdempotencyKey, uploadFile } from "./api";
import { busy, copyButton, copyText, errorText, fmtBytes, h, safeHref, toast } from "./dom";
import { linkForms } from "../../shared/links";
import { thumbImage } from "./links";
import { hoursProblem, MAX_HOURS } from "./ui";
import type { UploadResult, ViewContext } from "./types";

/** How many files go up at once; the server limits concurrency too (429 beyond it). */
const PARALLEL = 3;

interface Options {
  exif: HTMLSelectElement;
  ttlHours: HTMLInputElement;
  /** The line under the lifetime field that says what is wrong with it. */
  ttlError: HTMLElement;
}

/** Overall progress of everything dropped on this page, and every finished link. */
class Tally {
  total = 0;
  done = 0;
  failed = 0;
  readonly links: { url: string; name: string }[] = [];
  readonly el = h("p", { class: "tally", id: "upload-tally", role: "status", "aria-live": "polite", hidden: true });
  readonly copyAll = h("button", { type: "button", id: "copy-all", disabled: true }, "复制全部链接");
  readonly format = h(
    "select",
    { name: "copy_all_format", "aria-label": "链接格式" },
    ...linkForms("x", "x").map((f) => h("option", { value: f.label }, f.label)),
  );

  constructor() {
    this.copyAll.addEventListener("click", () => {
      const text = this.links.map((l) => linkForms(l.url, l.name).find((f) => f.label === this.format.value)?.text ?? l.url).join("\n");
      void copyText(text);
    });
  }

  render(): void {
    this.el.hidden = this.total === 0;
    const running = this.total - this.done - this.failed;
    this.el.textContent = `已完成 ${this.done} / ${this.total}${this.failed ? `，失败 ${this.failed}` : ""}${running ? `，进行中 ${running}` : ""}`;
    this.copyAll.disabled = this.links.length === 0;
  }
}

interface Row {
  row: HTMLElement;
  progress(fraction: number): void;
  /** `mime`: the file's type as the browser names it, when known (the thumbnail asks for it first). */
  done(r: UploadResult, ctx: ViewContext, mime?: string): void;
  fail(msg: string, retry?: () => void): void;
  restart(): void;
}

function resultRow(name: string, sizeText: string): Row {
  const bar = h("progress", { max: 1, value: 0 });
  const status = h("span", { class: "status muted" }, "等待中");
  const body = h("div", { class: "result-body" }, h("div", { class: "result-name" }, name, h("span", { class: "muted" }, sizeText)), bar, status);
  const preview = h("div", { class: "result-thumb" });
  const row = h("li", { class: "result" }, preview, body);
  return {
    row,
    progress(f) {
      bar.value = f;
      // All bytes sent: the server now sniffs, strips EXIF and stores; say so.
      status.textContent = f < 1 ? `上传中 ${Math.round(f * 100)}%` : "处理中…";
    },
    done(r, ctx, mime) {
      bar.remove();
      status.className = "status ok-text";
      status.textContent = "完成";
      preview.append(thumbImage(ctx, r.id, { mime, alt: "", lazy: true }));
      const href = safeHref(r.url);
      body.append(
        h("div", { class: "result-url" }, href ? h("a", { href, target: "_blank", rel: "noopener", class: "uploaded-url" }, r.url) : r.url),
        h("div", { class: "copy-row" }, ...linkForms(r.url, name, ctx.config.process_widths).map((f) => copyButton(`复制 ${f.label}`, () => f.text))),
      );
      row.classList.add("ok");
    },
    fail(msg, retry) {
      bar.hidden = true;
      status.className = "status error";
      status.textContent = `失败：${msg}`;
      row.classList.add("failed");
      if (retry) status.after(h("button", { type: "button", class: "small retry", onclick: retry }, "重试"));
    },
    restart() {
      row.classList.remove("failed");
      row.querySelector(".retry")?.remove();
      bar.hidden = false;
      bar.value = 0;
      status.className = "status muted";
      status.textContent = "等待中";
    },
  };
}

/** What is wrong with the lifetime field (empty is the default), shown under it; "" when nothing. */
function ttlProblem(opts: Options): string {
  const hours = opts.ttlHours.value.trim();
  // A number field holding something that is not a number reads as "": say so instead of sending the default.
  const problem = hours === "" && !opts.ttlHours.validity.badInput ? "" : hoursProblem(hours, 0, false);
  opts.ttlError.textContent = problem;
  opts.ttlHours.setAttribute("aria-invalid", String(problem !== ""));
  return problem;
}

/**
 * The form fields every upload and import sends, or undefined (with the reason on the lifetime field)
 * when the lifetime is out of range: checked here in hours, because the server's refusal counts seconds.
 */
function uploadFields(opts: Options): Record<string, string> | undefined {
  if (ttlProblem(opts)) {
    opts.ttlHours.focus();
    return undefined;
  }
  const fields: Record<string, string> = {};
  if (opts.exif.value) fields.exif_policy = opts.exif.value;
  const hours = opts.ttlHours.value.trim();
  // A sliver of an hour is at least a second: 0 seconds would not be the short life that was asked for.
  if (hours !== "") fields.ttl = Number(hours) === 0 ? "never" : String(Math.max(1, Math.round(Number(hours) * 3600)));
  return fields;
}

async function uploadAll(files: File[], ctx: ViewContext, opts: Options, list: HTMLElement, tally: Tally): Promise<void> {
  const fields = uploadFields(opts);
  if (!fields) return toast(`没有上传：${opts.ttlError.textContent}`, "error");
  const jobs = files.map((file) => {
    const r = resultRow(file.name, ` · ${fmtBytes(file.size)}`);
    list.prepend(r.row);
    // One key per queued file, reused by its retry button.
    return { file, r, key: newIdempotencyKey() };
  });
  tally.total += jobs.length;
  tally.render();
  const send = async (job: (typeof jobs)[number]): Promise<void> => {
    const { file, r, key } = job;
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    form.append("file", file, file.name);
    try {
      const res = await uploadFile<UploadResult>("/api/admin/upload", form, (f) => r.progress(f), { idempotencyKey: key });
      r.done(res, ctx, file.type || undefined);
      tally.done++;
      tally.links.push({ url: res.url, name: file.name });
    } catch (err) {
      tally.failed++;
      r.fail(errorText(err), () => {
        tally.failed--;
        r.restart();
        tally.render();
        void send(job).then(() => tally.render());
      });
    }
    tally.render();
  };
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) await send(jobs[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, jobs.length) }, worker));
  if (jobs.length > 1) toast(`本批 ${jobs.length} 张处理完毕`);
}

export function uploadView(ctx: ViewContext): HTMLElement {
  const list = h("ul", { class: "results", id: "upload-results" });
  const tally = new Tally();
  const exif = h(
    "select",
    { name: "exif_policy" },
    h("option", { value: "" }, `默认（${ctx.config.exif_policy === "strip" ? "去除" : "保留"}）`),
    h("option", { value: "strip" }, "去除 EXIF/GPS"),
    h("option", { value: "passthrough" }, "原样保留"),
  );
  const ttlHours = h("input", { type: "number", min: 0, max: MAX_HOURS, step: "any", name: "ttl_hours", placeholder: "默认", class: "narrow" });
  const ttlError = h("small", { class: "field-error", role: "alert", id: "upload-ttl-error" });
  const opts: Options = { exif, ttlHours, ttlError };
  // Said while typing too, not only when a drop is refused.
  ttlHours.addEventListener("change", () => void ttlProblem(opts));

  const input = h("input", { type: "file", id: "file-input", accept: "image/*", multiple: true, class: "visually-hidden" });
  input.addEventListener("change", () => {
    const files = [...(input.files ?? [])];
    input.value = "";
    if (files.length) void uploadAll(files, ctx, opts, list, tally);
  });
  const drop = h(
    "label",
    { class: "dropzone", htmlFor: "file-input" },
    input,
    h("strong", null, "拖放图片到这里，或点击选择文件"),
    h("span", { class: "muted" }, `支持 JPEG、PNG、GIF、WebP、AVIF，单张不超过 ${ctx.config.max_upload_mb} MB，也可以直接粘贴截图`),
  );
  drop.addEventListener("dragover", (e) => {
    e.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const files = [...(e.dataTransfer?.files ?? [])];
    if (files.length) void uploadAll(files, ctx, opts, list, tally);
  });

  const urlInput = h("input", { type: "url", name: "import_url", "aria-label": "图片 URL", placeholder: "https://example.com/photo.jpg", required: true });
  // No type attribute: `form.inline input:not([type])` gives it the URL field's flexible width.
  const nameInput = h("input", {
    name: "import_file_name",
    "aria-label": "文件名（可选）",
    placeholder: "文件名（可选）",
    maxLength: 255,
    spellcheck: false,
  });
  const urlButton = h("button", { type: "submit" }, "导入");
  const urlForm = h("form", { class: "inline", id: "import-form" }, urlInput, nameInput, urlButton);
  /**
   * The last import that has not succeeded yet and its key: sending the same import again (its
   * 重试 button, or 导入 with the same fields) reuses the key, because the server may have stored
   * the image although the browser saw a failure. A different import gets a fresh key.
   */
  let unfinished: { request: string; key: string } | undefined;
  urlForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const url = urlInput.value.trim();
    const fileName = nameInput.value.trim();
    const body: Record<string, unknown> = { url };
    if (fileName) body.file_name = fileName;
    const fields = uploadFields(opts);
    if (!fields) return;
    if (fields.exif_policy) body.exif_policy = fields.exif_policy;
    if (fields.ttl) body.ttl = fields.ttl;
    const request = JSON.stringify(body);
    const key = unfinished?.request === request ? unfinished.key : newIdempotencyKey();
    unfinished = { request, key };
    const name = fileName || url.split("/").pop() || url;
    const r = resultRow(name, " · 从 URL 导入");
    list.prepend(r.row);
    // Counted and collected like a file: in the x/N line and in 复制全部链接.
    tally.total++;
    tally.render();
    const attempt = (): Promise<void> =>
      busy(urlButton, async () => {
        r.progress(1); // the server fetches and processes: nothing to measure here
        try {
          const res = await api<UploadResult>("POST", "/api/admin/upload/url", body, { idempotencyKey: key });
          r.done(res, ctx);
          tally.done++;
          tally.links.push({ url: res.url, name });
          if (unfinished?.key === key) unfinished = undefined;
          // A retry that succeeds later leaves whatever was typed since alone.
          if (urlInput.value.trim() === url && nameInput.value.trim() === fileName) urlInput.value = nameInput.value = "";
        } catch (err) {
          tally.failed++;
          r.fail(errorText(err), () => {
            tally.failed--;
            r.restart();
            tally.render();
            void attempt();
          });
        }
        tally.render();
      });
    void attempt();
  });

  const view = h(
    "section",
    { class: "view upload-view" },
    h("h1", null, "上传图片"),
    drop,
    h("div", { class: "options" }, h("label", null, "EXIF ", exif), h("label", null, "有效期（小时，0 为永久）", ttlHours), ttlError),
    h("h2", null, "从 URL 导入"),
    urlForm,
    h("div", { class: "toolbar results-bar" }, tally.el, tally.format, tally.copyAll),
    list,
  );
  // Paste a screenshot anywhere on the upload tab.
  view.tabIndex = -1;
  const onPaste = (e: ClipboardEvent) => {
    // The page is kept while other tabs show; paste only counts while it is on screen.
    if (!view.isConnected) return;
    const files = [...(e.clipboardData?.files ?? [])].filter((f) => f.type.startsWith("image/"));
    if (files.length) void uploadAll(files, ctx, opts, list, tally);
  };
  document.addEventListener("paste", onPaste);
  return view;
}
