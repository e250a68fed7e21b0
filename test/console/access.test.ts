// Audit 15's "demanding user" findings on a seeded Kura: the backups page says what a snapshot needs
// to be restored (MED-3), settings say where /metrics is scraped (LOW-10), every control of the image
// detail has a name (LOW-3), and on a phone the selection boxes and small links are at least 24 px
// (LOW-8, WCAG 2.5.8).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, Page } from "playwright-core";
import { ADMIN_PASSWORD, DESKTOP, loginAs, openPage, PHONE, seedServer, type Seeded, sharedBrowser, watchedPage } from "./harness";

let seeded: Seeded;
let browser: Browser;
let base = "";
const problems: string[] = [];

beforeAll(async () => {
  [seeded, browser] = await Promise.all([seedServer(2), sharedBrowser()]);
  base = seeded.server.base;
}, 120_000);

afterAll(async () => {
  await seeded?.dispose();
});

async function admin(viewport: { width: number; height: number }): Promise<Page> {
  const page = await watchedPage(browser, base, viewport, problems);
  await loginAs(page, base, "admin", ADMIN_PASSWORD);
  return page;
}

/** Visible controls with no accessible name (no label, aria-label or text). */
function unnamedControls(page: Page, scope: string): Promise<string[]> {
  return page.evaluate((sel) => {
    const root = document.querySelector(sel)!;
    return [...root.querySelectorAll("input:not([type=hidden]), select, textarea, button")]
      .filter((e) => (e as HTMLElement).offsetParent !== null)
      .filter((e) => {
        if (e.getAttribute("aria-label")) return false;
        if (e instanceof HTMLButtonElement) return !(e.textContent ?? "").trim();
        return !(e as HTMLInputElement).labels?.length;
      })
      .map((e) => e.outerHTML.slice(0, 120));
  }, scope);
}

describe("what a demanding user needs", () => {
  test("#backups: snapshots need the master key, at its real path, and the new-machine steps name kura restore", async () => {
    const page = await admin(DESKTOP);
    await openPage(page, "backups");
    const key = page.locator("#recovery-key");
    await key.locator("code", { hasText: `${seeded.server.dataDir}/master.key` }).waitFor();
    expect(await key.textContent()).toContain("KURA_MASTER_KEY");
    expect(await page.locator("#recovery-steps").textContent()).toContain("kura restore <快照文件>");
    await page.context().close();
  });

  test("#settings: where /metrics is scraped and who may", async () => {
    const page = await admin(DESKTOP);
    await openPage(page, "settings");
    const facts = page.locator(".facts");
    await facts.waitFor();
    expect(await facts.textContent()).toContain(`GET ${base}/metrics（仅限 KURA_METRICS_ALLOW）`);
    await page.context().close();
  });

  test("image detail: every control has a name (the expiry field is labelled)", async () => {
    const page = await admin(DESKTOP);
    await openPage(page, "images");
    await page.locator("#image-grid figure button.thumb").first().click();
    await page.locator("#image-detail .facts").waitFor();
    expect(await unnamedControls(page, "#image-detail")).toEqual([]);
    expect(await page.getByLabel("有效期（小时，0 为永久，从现在起计）").count()).toBe(1);
    await page.context().close();
  });

  test("on a phone, selection boxes, settings group links and the alert badge are at least 24 px", async () => {
    const page = await admin(PHONE);
    const small = (selector: string) =>
      page.evaluate(
        (sel) =>
          [...document.querySelectorAll(sel)]
            .map((e) => e.getBoundingClientRect())
            .filter((b) => b.width > 0 && (b.width < 24 || b.height < 24))
            .map((b) => `${sel} ${Math.round(b.width)}x${Math.round(b.height)}`),
        selector,
      );
    await openPage(page, "images");
    await page.locator("#image-grid figure input[type=checkbox]").first().waitFor();
    const found = [...(await small("#image-grid input[type=checkbox]")), ...(await small("#alert-badge:not([hidden])"))];
    await openPage(page, "review");
    await page.locator("#cleanup-select-page").waitFor({ state: "attached" });
    found.push(...(await small("#review-view input[type=checkbox], input#cleanup-select-page")));
    await openPage(page, "settings");
    await page.locator(".group-links a").first().waitFor();
    found.push(...(await small(".group-links a")));
    expect(found).toEqual([]);
    await page.context().close();
  });

  test("no page errors, console errors or foreign requests", () => {
    expect(problems).toEqual([]);
  });
});
