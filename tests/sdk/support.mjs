// Shared plumbing for the SDK test files (`*.test.mjs`): our service in a Hypercorn process of its own, on the
// memory store or on a redis-server the test starts, each on a free port of 127.0.0.1, stopped afterwards; the SDK
// apps pointed at it; the mail outbox read with plain fetch and the server key (not through the SDK).
//
//   import { startService } from "./support.mjs";
//   for (const backend of ["memory", "redis"]) {
//     describe(backend, () => {
//       let service;
//       before(async () => { service = await startService({ backend }); });
//       after(() => service.stop());
//       test("...", async () => { const app = service.newClientApp(); ... });
//     });
//   }

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

import { StackClientApp, StackServerApp } from "@stackframe/js";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
export const PYTHON = path.join(REPO, ".venv", "bin", "python");
export const PROJECT_ID = "00000000-0000-4000-8000-000000000000";
export const PUBLISHABLE_CLIENT_KEY = "pck_dev_publishable_client_key_not_secret";
export const SECRET_SERVER_KEY = "ssk_dev_secret_server_key_not_secret";
export const SUPER_SECRET_ADMIN_KEY = "sak_dev_super_secret_admin_key_not_secret";
export const CALLBACK_URL = "http://localhost:3000/handler/callback";
const STARTUP_TIMEOUT_MS = 20_000;
const rawFetch = globalThis.fetch;

export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

export function newEmail(tag) {
  return `sdk-${tag}-${randomUUID()}@example.com`;
}

/** A child process whose output tail is kept (shown when something fails), stopped by `stop()`. */
function spawnKept(command, args, options) {
  const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
  const kept = { child, output: "" };
  const keep = (chunk) => {
    kept.output = (kept.output + chunk.toString()).slice(-20_000);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  child.on("error", (err) => keep(`spawn error: ${err}\n`));
  const killSync = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  };
  process.once("exit", killSync); // if the runner dies without stopping it
  kept.stop = async () => {
    process.removeListener("exit", killSync);
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM"); // lets Hypercorn's master stop its worker cleanly
    const outcome = await Promise.race([exited.then(() => "exited"), sleep(10_000).then(() => "timeout")]);
    if (outcome === "timeout") {
      child.kill("SIGKILL");
      await exited;
    }
  };
  return kept;
}

async function waitFor(kept, what, probe) {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    if (kept.child.exitCode !== null || kept.child.signalCode !== null) {
      throw new Error(`${what} exited during start-up:\n${kept.output}`);
    }
    try {
      if (await probe()) return;
    } catch (err) {
      last = String(err?.cause?.code ?? err);
    }
    await sleep(100);
  }
  throw new Error(`${what} did not come up within ${STARTUP_TIMEOUT_MS} ms (${last}):\n${kept.output}`);
}

/** Our service (dev project, outbox mail, IDENTITY_COMPAT=stack) on `backend` ("memory" or "redis"). */
export async function startService({ backend = "memory", env: extraEnv = {} } = {}) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("IDENTITY_")));
  Object.assign(env, { IDENTITY_COMPAT: "stack", PYTHONUNBUFFERED: "1", ...extraEnv });
  let redis = null;
  if (backend === "redis") {
    const redisPort = await freePort();
    redis = spawnKept("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {});
    await waitFor(redis, "redis-server", async () => redis.output.includes("Ready to accept connections"));
    Object.assign(env, { IDENTITY_BACKEND: "redis", IDENTITY_REDIS_URL: `redis://127.0.0.1:${redisPort}/0` });
  }
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const server = spawnKept(PYTHON, ["-m", "hypercorn", "asgi_app:app", "--bind", `127.0.0.1:${port}`, "--workers", "1"], {
    cwd: REPO,
    env,
  });
  await waitFor(server, "the service", async () => {
    const res = await rawFetch(`${baseUrl}/api/v1`, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return res.status === 200;
  });
  return new Service(baseUrl, backend, server, redis);
}

class Service {
  constructor(baseUrl, backend, server, redis) {
    this.baseUrl = baseUrl;
    this.backend = backend;
    this._server = server;
    this._redis = redis;
  }

  async stop() {
    await this._server.stop();
    if (this._redis) await this._redis.stop();
  }

  get output() {
    return this._server.output;
  }

  newClientApp(extra = {}) {
    return new StackClientApp({
      baseUrl: this.baseUrl,
      projectId: PROJECT_ID,
      publishableClientKey: PUBLISHABLE_CLIENT_KEY,
      tokenStore: "memory",
      redirectMethod: "none",
      ...extra,
    });
  }

  newServerApp() {
    return new StackServerApp({
      baseUrl: this.baseUrl,
      projectId: PROJECT_ID,
      publishableClientKey: PUBLISHABLE_CLIENT_KEY,
      secretServerKey: SECRET_SERVER_KEY,
      tokenStore: "memory",
    });
  }

  /** A plain request with server (or `access`) headers, outside the SDK: for plumbing and set-up only. */
  async api(method, pathAndQuery, { body, access = "server" } = {}) {
    const headers = { "x-service-access-type": access, "x-service-project-id": PROJECT_ID };
    if (access === "server") headers["x-service-secret-server-key"] = SECRET_SERVER_KEY;
    if (access === "admin") headers["x-service-super-secret-admin-key"] = SUPER_SECRET_ADMIN_KEY;
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await rawFetch(`${this.baseUrl}/api/v1${pathAndQuery}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  }

  /** The mails sent to `email`, newest first (the outbox, read with the server key). */
  async mails(email) {
    const { status, json } = await this.api("GET", `/emails/outbox?to=${encodeURIComponent(email)}`);
    assert.equal(status, 200, `outbox: ${status}`);
    return json.items;
  }

  /** The 45-character code in the link of the newest mail to `email`. */
  async linkCode(email) {
    const items = await this.mails(email);
    assert.ok(items.length > 0, `no mail for ${email}`);
    const code = /[?&]code=([0-9A-Za-z]{45})\b/.exec(items[0].text)?.[1];
    assert.ok(code, `no link with a 45-character code in ${JSON.stringify(items[0].text)}`);
    return code;
  }
}
