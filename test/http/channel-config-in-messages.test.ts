/**
 * Spec 6.3: channel configuration parameters never appear in logs or error messages. Channels whose
 * configuration carries distinctive markers (a local directory, an S3 bucket and prefix, a WebDAV and an
 * SFTP `path`, the loopback ports of peers that are then stopped) fail in every way an admin sees: the
 * API's refusals of a test or a create, uploads and reads that fail over, replication, checks, alerts
 * and the alert webhook (sent to an outside receiver). None of those texts may name a marker or a
 * `127.0.0.1:<port>` of the configuration; each must still say, in Chinese, what went wrong.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { obscure } from "../../src/channels/rclone/obscure";
import { FakeS3 } from "../channels/fakes/s3";
import { FakeDav } from "../channels/fakes/webdav";
import { type SftpPeer, startSftpPeer } from "../channels/servers/sftp-peer";
import { useAdmin } from "../helpers/fixture";
import { form, makeJpeg } from "../helpers/images";
import { CJK } from "../helpers/messages";
import { type Replica, waitAllReplicasDone, waitFor } from "./channels.helpers";

const LOCAL_MARK = "cfgmark-local-7q";
const BUCKET_MARK = "cfgmark-bucket-3x";
const PREFIX_MARK = "cfgmark-prefix-9w";
const DAV_MARK = "cfgmark-dav-5k";
const DAV_URL_MARK = "cfgmark-davurl-4h";
const SFTP_MARK = "cfgmark-sftp-2m";
/** Every marker shares this stem: no text an admin sees may contain it. */
const STEM = "cfgmark";

/** A loopback port nothing listens on (taken and released at once). */
function closedPort(): number {
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  return port;
}

/** The alert webhook's receiver: an outside party, which must learn nothing of the configuration. */
function startReceiver() {
  const bodies: string[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      bodies.push(await req.text());
      return new Response("ok");
    },
  });
  return { bodies, url: `http://127.0.0.1:${server.port}/hook`, stop: () => server.stop(true) };
}

describe("channel configuration never appears in messages (spec 6.3)", () => {
  const scratch = mkdtempSync(join(tmpdir(), "kura-cfg-msg-"));
  const receiver = startReceiver();
  /** Ports of the configuration that are closed when the texts are collected. */
  const ports: number[] = [];
  /** Every text an admin or an outside receiver got that may say why something failed. */
  const seen: { where: string; text: string }[] = [];
  let s3: FakeS3;
  let dav: FakeDav;
  let sftp: SftpPeer;

  const { server, admin } = useAdmin({ env: { KURA_WEBHOOK_ALLOW: "127.0.0.1/32" } });
  beforeAll(async () => {
    s3 = new FakeS3();
    dav = new FakeDav();
    mkdirSync(join(scratch, "sftp"));
    sftp = await startSftpPeer(join(scratch, "sftp"));
  });
  afterAll(async () => {
    s3?.stop();
    dav?.stop();
    await sftp?.stop().catch(() => {});
    receiver.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** An admin request whose refusal (any status but `ok`) is recorded as a text the admin saw. */
  async function call(where: string, method: string, path: string, body: unknown, ok = 200) {
    const res = await admin.request(method, path, body);
    const text = await res.text();
    if (res.status !== ok) seen.push({ where: `${where} (HTTP ${res.status})`, text });
    return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
  }

  const s3Config = (endpoint: string, extra: Record<string, string> = {}) => ({
    provider: "Other",
    endpoint,
    region: "us-east-1",
    access_key_id: "AK",
    secret_access_key: "SK",
    path: `${BUCKET_MARK}/${PREFIX_MARK}`,
    ...extra,
  });
  const sftpConfig = (port: number, extra: Record<string, string> = {}) => ({
    host: "127.0.0.1",
    port: String(port),
    user: "kura",
    pass: obscure(sftp.password),
    path: SFTP_MARK,
    ...extra,
  });

  test("a test or a create that fails names what is wrong, never the value", async () => {
    const port = closedPort();
    ports.push(port);
    const fileInPlace = join(scratch, `${LOCAL_MARK}-file`);
    writeFileSync(fileInPlace, "not a directory");
    const cases: [string, { driver: string; config: Record<string, string> }][] = [
      ["s3 at a closed port", { driver: "s3", config: s3Config(`http://127.0.0.1:${port}`) }],
      ["s3 bucket name", { driver: "s3", config: s3Config(`http://127.0.0.1:${port}`, { path: `${STEM}_bad!bucket/x` }) }],
      ["s3 prefix", { driver: "s3", config: s3Config(`http://127.0.0.1:${port}`, { path: `${BUCKET_MARK}/${PREFIX_MARK}/../up` }) }],
      ["s3 endpoint scheme", { driver: "s3", config: s3Config(`ftp://${STEM}-endpoint.example`) }],
      ["s3 endpoint syntax", { driver: "s3", config: s3Config(`http://${STEM} endpoint`) }],
      ["s3 endpoint query", { driver: "s3", config: s3Config(`http://127.0.0.1:${port}/?${STEM}=1`) }],
      ["s3 provider", { driver: "s3", config: s3Config(`http://127.0.0.1:${port}`, { provider: `${STEM}-provider` }) }],
      ["s3 list_chunk", { driver: "s3", config: s3Config(`http://127.0.0.1:${port}`, { list_chunk: `${STEM}-chunk` }) }],
      ["s3 force_path_style", { driver: "s3", config: s3Config(`http://127.0.0.1:${port}`, { force_path_style: `${STEM}-bool` }) }],
      ["webdav at a closed port", { driver: "webdav", config: { url: `http://127.0.0.1:${port}/${DAV_URL_MARK}/`, path: DAV_MARK } }],
      ["webdav path", { driver: "webdav", config: { url: `http://127.0.0.1:${port}/dav/`, path: `${DAV_MARK}/../up` } }],
      ["webdav vendor", { driver: "webdav", config: { url: `http://127.0.0.1:${port}/dav/`, vendor: `${STEM}-vendor` } }],
      ["sftp at a closed port", { driver: "sftp", config: sftpConfig(port) }],
      ["sftp port", { driver: "sftp", config: sftpConfig(port, { port: `${STEM}-port` }) }],
      ["sftp path", { driver: "sftp", config: sftpConfig(port, { path: `${SFTP_MARK}/../up` }) }],
      ["sftp key_file", { driver: "sftp", config: sftpConfig(port, { pass: "", key_file: join(scratch, `${STEM}-key`) }) }],
      ["sftp known_hosts_file", { driver: "sftp", config: sftpConfig(port, { known_hosts_file: join(scratch, `${STEM}-known`) }) }],
      ["local path that is a file", { driver: "local", config: { path: fileInPlace } }],
    ];
    for (const [name, body] of cases) {
      const tested = await call(`test: ${name}`, "POST", "/api/admin/channels/test", { name: "probe", ...body });
      expect(tested.status).toBe(200);
      expect(tested.json.ok).toBe(false);
      expect(tested.json.error).toMatch(CJK);
      seen.push({ where: `test: ${name}`, text: tested.text });
      const created = await call(`create: ${name}`, "POST", "/api/admin/channels", { name: "refused", ...body }, 201);
      expect([400, 422]).toContain(created.status);
      expect(created.text).toMatch(CJK);
    }
  }, 60_000);

  test("channels that break: uploads, replication, reads, checks, alerts and the webhook", async () => {
    // Healthy first, then broken: a directory gone, three peers stopped (their ports closed).
    const localDir = join(scratch, LOCAL_MARK, "images");
    const created = {
      local: await admin.json("POST", "/api/admin/channels", { name: "cfg-local", driver: "local", config: { path: localDir }, priority: 10 }, 201),
      s3: await admin.json("POST", "/api/admin/channels", { name: "cfg-s3", driver: "s3", config: s3Config(s3.endpoint), priority: 10 }, 201),
      dav: await admin.json("POST", "/api/admin/channels", { name: "cfg-dav", driver: "webdav", config: { url: dav.url, path: DAV_MARK }, priority: 10 }, 201),
      sftp: await admin.json("POST", "/api/admin/channels", { name: "cfg-sftp", driver: "sftp", config: sftpConfig(sftp.port), priority: 10 }, 201),
    };
    const ids = Object.values(created).map((c) => c.id as number);
    const first = await admin.json("POST", "/api/admin/upload", form(await makeJpeg(40, 30, 61), "first.jpg"));
    await waitAllReplicasDone(admin, first.id, 5, 30_000);

    renameSync(localDir, `${localDir}.unmounted`);
    ports.push(Number(new URL(s3.endpoint).port), Number(new URL(dav.url).port), sftp.port);
    s3.stop();
    dav.stop();
    await sftp.stop();

    // Still believed healthy: the upload tries each broken channel (each failure logged) before the built-in one.
    const second = await call("upload", "POST", "/api/admin/upload", form(await makeJpeg(40, 30, 62), "second.jpg"));
    expect(second.status).toBe(200);
    await server.waitForLog(/同步写入存储渠道失败.*channel=cfg-sftp/, 30_000);
    // Reads try the broken channels first and fail over.
    expect((await fetch(`${server.base}/i/${first.id}`)).status).toBe(200);

    await admin.json("PUT", "/api/admin/config", { alert_webhook_url: receiver.url, health_check_seconds: 1 });
    for (const id of ids) {
      const checked = await call("check", "POST", `/api/admin/channels/${id}/check`, undefined);
      expect(checked.status).toBe(200);
      expect(checked.json.healthy).toBe(false);
      expect(checked.json.last_error).toMatch(CJK);
    }
    await waitFor(
      async () => receiver.bodies.map((b) => JSON.parse(b) as { target: string; status: string }),
      (got) => ["cfg-local", "cfg-s3", "cfg-dav", "cfg-sftp"].every((t) => got.some((b) => b.target === t && b.status === "open")),
      30_000,
      "the webhook to report every broken channel",
    );
    // The copies meant for the broken channels failed, each saying why.
    const replicasOf = async (image: string) => (await admin.json("GET", `/api/admin/images/${image}`)).replicas as Replica[];
    const failed = await waitFor(
      () => replicasOf(second.json.id),
      (replicas) => ids.every((id) => replicas.some((r) => r.channel_id === id && r.state === "failed" && r.last_error !== "")),
      30_000,
      "the replicas on the broken channels to fail",
    );

    const channels = (await admin.json("GET", "/api/admin/channels")).items as { id: number; name: string; last_error: string }[];
    const broken = channels.filter((c) => ids.includes(c.id));
    expect(broken.map((c) => c.last_error).every((e) => CJK.test(e))).toBe(true);
    const alerts = (await admin.json("GET", "/api/admin/alerts")).items as { target: string; message: string }[];
    for (const name of ["cfg-local", "cfg-s3", "cfg-dav", "cfg-sftp"]) expect(alerts.some((a) => a.target === name)).toBe(true);

    seen.push(
      ...broken.map((c) => ({ where: `last_error of ${c.name}`, text: c.last_error })),
      { where: "alerts", text: JSON.stringify(alerts) },
      { where: "replicas of the first image", text: JSON.stringify(await replicasOf(first.id)) },
      { where: "replicas of the second image", text: JSON.stringify(failed) },
      ...receiver.bodies.map((text) => ({ where: "webhook payload", text })),
    );
    // What each kind of channel said (not vacuous: every failure was reported).
    expect(broken.find((c) => c.name === "cfg-local")!.last_error).toContain("本地存储目录不可用：目录不存在（磁盘未挂载？");
    for (const name of ["cfg-s3", "cfg-dav", "cfg-sftp"]) expect(broken.find((c) => c.name === name)!.last_error).toMatch(/连接失败: 连接被拒绝/);
    await server.waitForLog(/从存储渠道读取失败/, 10_000);
  }, 120_000);

  test("none of the texts names a configuration value", () => {
    expect(seen.length).toBeGreaterThan(40);
    seen.push({ where: "server log", text: server.logs });
    const forbidden = [STEM, LOCAL_MARK, BUCKET_MARK, PREFIX_MARK, DAV_MARK, DAV_URL_MARK, SFTP_MARK, scratch, ...ports.map((p) => `127.0.0.1:${p}`)];
    const leaks = seen.flatMap(({ where, text }) => forbidden.filter((f) => text.includes(f)).map((f) => `${where} names ${f}: ${excerpt(text, f)}`));
    expect(leaks).toEqual([]);
  });
});

/** The line around the first occurrence of `needle`, for a readable failure. */
function excerpt(text: string, needle: string): string {
  const at = text.indexOf(needle);
  return text.slice(Math.max(0, text.lastIndexOf("\n", at) + 1), Math.min(text.length, at + needle.length + 160)).slice(0, 400);
}
