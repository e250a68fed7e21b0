// Upload tab: drag & drop / file picker with per-file progress, import from URL,
// and the resulting link in the forms people paste (URL, Markdown, HTML, BBCode, thumbnail).
import { api, uploadFile } from "./api";
import { busy, copyButton, errorText, fmtBytes, h, safeHref } from "./dom";
import { linkForms, thumbUrl } from "./links";
import type { UploadResult, ViewContext } from "./types";

/** How many files go up at once; the server limits concurrency too (429 beyond it). */
const PARALLEL = 3;

interface Options {
  exif: HTMLSelectElement;
  ttlHours: HTMLInputElement;
}

function resultRow(name: string, sizeText: string): { row: HTMLElement; progress: HTMLProgressElement; done(r: UploadResult, ctx: ViewContext): void; fail(msg: string): void } {
  const progress = h("progress", { max: 1, value: 0 });
  const status = h("span", { class: "status muted" }, "等待中");
  const body = h("div", { class: "result-body" }, h("div", { class: "result-name" }, name, h("span", { class: "muted" }, sizeText)), progress, status);
  const preview = h("div", { class: "result-thumb" });
  const row = h("li", { class: "result" }, preview, body);
  return {
    row,
    progress,
    done(r, ctx) {
      progress.remove();
      status.remove();
      preview.append(h("img", { src: thumbUrl(ctx, r.id), alt: "", loading: "lazy" }));
      const href = safeHref(r.url);
      body.append(
        h("div", { class: "result-url" }, href ? h("a", { href, target: "_blank", rel: "noopener", class: "uploaded-url" }, r.url) : r.url),
        h("div", { class: "copy-row" }, ...linkForms(r.url, name, ctx.config.process_widths).map((f) => copyButton(`复制 ${f.label}`, () => f.text))),
      );
      row.classList.add("ok");
    },
    fail(msg) {
      progress.remove();
      status.className = "status error";
      status.textContent = `失败：${msg}`;
      row.classList.add("failed");
    },
  };
}

function uploadFields(opts: Options): Record<string, string> {
  const fields: Record<string, string> = {};
  if (opts.exif.value) fields.exif_policy = opts.exif.value;
  const hours = opts.ttlHours.value.trim();
  if (hours !== "") fields.ttl = hours === "0" ? "never" : String(Math.round(Number(hours) * 3600));
  return fields;
}

async function uploadAll(files: File[], ctx: ViewContext, opts: Options, list: HTMLElement): Promise<void> {
  const jobs = files.map((file) => {
    const r = resultRow(file.name, ` · ${fmtBytes(file.size)}`);
    list.prepend(r.row);
    return { file, r };
  });
  const fields = uploadFields(opts);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const { file, r } = jobs[next++]!;
      const form = new FormData();
      for (const [k, v] of Object.entries(fields)) form.append(k, v);
      form.append("file", file, file.name);
      try {
        const res = await uploadFile<UploadResult>("/api/admin/upload", form, (f) => (r.progress.value = f));
        r.done(res, ctx);
      } catch (err) {
        r.fail(errorText(err));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, jobs.length) }, worker));
}

export function uploadView(ctx: ViewContext): HTMLElement {
  const list = h("ul", { class: "results", id: "upload-results" });
  const exif = h(
    "select",
    { name: "exif_policy" },
    h("option", { value: "" }, `默认（${ctx.config.exif_policy === "strip" ? "去除" : "保留"}）`),
    h("option", { value: "strip" }, "去除 EXIF/GPS"),
    h("option", { value: "passthrough" }, "原样保留"),
  );
  const ttlHours = h("input", { type: "number", min: 0, step: "any", name: "ttl_hours", placeholder: "默认", class: "narrow" });
  const opts: Options = { exif, ttlHours };

  const input = h("input", { type: "file", id: "file-input", accept: "image/*", multiple: true, class: "visually-hidden" });
  input.addEventListener("change", () => {
    const files = [...(input.files ?? [])];
    input.value = "";
    if (files.length) void uploadAll(files, ctx, opts, list);
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
    if (files.length) void uploadAll(files, ctx, opts, list);
  });

  const urlInput = h("input", { type: "url", name: "import_url", placeholder: "https://example.com/photo.jpg", required: true });
  const urlButton = h("button", { type: "submit" }, "导入");
  const urlForm = h("form", { class: "inline", id: "import-form" }, urlInput, urlButton);
  urlForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const url = urlInput.value.trim();
    const r = resultRow(url.split("/").pop() || url, " · 从 URL 导入");
    list.prepend(r.row);
    r.progress.removeAttribute("value"); // indeterminate while the server fetches
    const body: Record<string, unknown> = { url };
    const fields = uploadFields(opts);
    if (fields.exif_policy) body.exif_policy = fields.exif_policy;
    if (fields.ttl) body.ttl = fields.ttl;
    void busy(urlButton, async () => {
      try {
        r.done(await api<UploadResult>("POST", "/api/admin/upload/url", body), ctx);
        urlInput.value = "";
      } catch (err) {
        r.fail(errorText(err));
      }
    });
  });

  const view = h(
    "section",
    { class: "view upload-view" },
    h("h1", null, "上传图片"),
    drop,
    h(
      "div",
      { class: "options" },
      h("label", null, "EXIF ", exif),
      h("label", null, "有效期（小时，0 为永久）", ttlHours),
    ),
    h("h2", null, "从 URL 导入"),
    urlForm,
    list,
  );
  // Paste a screenshot anywhere on the upload tab.
  view.tabIndex = -1;
  const onPaste = (e: ClipboardEvent) => {
    if (!view.isConnected) return document.removeEventListener("paste", onPaste);
    const files = [...(e.clipboardData?.files ?? [])].filter((f) => f.type.startsWith("image/"));
    if (files.length) void uploadAll(files, ctx, opts, list);
  };
  document.addEventListener("paste", onPaste);
  return view;
}
