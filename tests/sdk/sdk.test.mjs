// Drives OUR identity service with the unmodified official Stack Auth SDK (@stackframe/js@2.8.102).
//
// The test starts its own Hypercorn process (memory store, dev project, outbox mail, IDENTITY_COMPAT=stack) on a
// free port of 127.0.0.1 and stops it afterwards. Everything a scenario checks goes through the SDK; plain `fetch`
// is used only for plumbing (reading the mail outbox with the server key). A recording wrapper around
// globalThis.fetch lists what the SDK sent and got; set SDK_TEST_TRACE=1 to print that list at the end.
// Run: cd tests/sdk && npm ci && node --test

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";

import { StackClientApp, StackServerApp, stackAppInternalsSymbol } from "@stackframe/js";

import { freePort } from "./support.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const PYTHON = path.join(REPO, ".venv", "bin", "python");

const PROJECT_ID = "00000000-0000-4000-8000-000000000000";
const PUBLISHABLE_CLIENT_KEY = "pck_dev_publishable_client_key_not_secret";
const SECRET_SERVER_KEY = "ssk_dev_secret_server_key_not_secret";
const CALLBACK_URL = "http://localhost:3000/handler/magic-link-callback";
const STARTUP_TIMEOUT_MS = 20_000;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// ---------------------------------------------------------------------------------------------------------------
// A recorder around globalThis.fetch: the SDK (and oauth4webapi, for the token endpoint) look `fetch` up at call
// time, so every request they send passes through here. It only records; requests and responses are untouched.
// Test plumbing uses `rawFetch` and is not recorded.

const rawFetch = globalThis.fetch;
/** @type {{method: string, url: string, status: number, knownError: string | null, at: number, ms: number}[]} */
const sdkRequests = [];
globalThis.fetch = async function recordingFetch(input, init) {
  const url = input instanceof Request ? input.url : String(input);
  const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
  const entry = { method, url, status: -1, knownError: null, at: Date.now(), ms: -1 };
  sdkRequests.push(entry);
  const response = await rawFetch(input, init);
  entry.status = response.status;
  entry.knownError = response.headers.get("x-stack-known-error");
  entry.ms = Date.now() - entry.at;
  return response;
};

function requestsSince(mark) {
  return sdkRequests.slice(mark);
}

function describeRequests(list) {
  return list
    .map((r) => `${r.method} ${r.url} -> ${r.status}${r.knownError ? ` (${r.knownError})` : ""} [${r.ms} ms]`)
    .join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// Our server, in its own process.

let server = null; // the Hypercorn child process
let serverOutput = ""; // the tail of its stdout + stderr, shown when something fails
let baseUrl = "";

async function waitUntilUp(child) {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the server exited during start-up (${child.exitCode ?? child.signalCode}):\n${serverOutput}`);
    }
    try {
      const res = await rawFetch(`${baseUrl}/api/v1`, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
      last = `status ${res.status}`;
    } catch (err) {
      last = String(err?.cause?.code ?? err);
    }
    await sleep(100);
  }
  throw new Error(`the server did not answer GET /api/v1 with 200 within ${STARTUP_TIMEOUT_MS} ms (${last}):\n${serverOutput}`);
}

async function stopServer() {
  const child = server;
  if (child === null) return;
  server = null;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  // SIGTERM lets Hypercorn's master stop its worker process cleanly (a SIGKILL would orphan the worker).
  child.kill("SIGTERM");
  const outcome = await Promise.race([exited.then(() => "exited"), sleep(10_000).then(() => "timeout")]);
  if (outcome === "timeout") {
    child.kill("SIGKILL");
    await exited;
  }
}

function killServerSync() {
  if (server !== null && server.exitCode === null && server.signalCode === null) server.kill("SIGTERM");
}

before(async () => {
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("IDENTITY_")));
  env.IDENTITY_COMPAT = "stack";
  env.PYTHONUNBUFFERED = "1";
  server = spawn(
    PYTHON,
    ["-m", "hypercorn", "asgi_app:app", "--bind", `127.0.0.1:${port}`, "--workers", "1"],
    { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] },
  );
  const keep = (chunk) => {
    serverOutput = (serverOutput + chunk.toString()).slice(-20_000);
  };
  server.stdout.on("data", keep);
  server.stderr.on("data", keep);
  server.on("error", (err) => keep(`spawn error: ${err}\n`));
  process.once("exit", killServerSync); // if the runner dies without running after()
  const starting = Date.now();
  await waitUntilUp(server);
  if (process.env.SDK_TEST_TRACE) console.log(`server up in ${Date.now() - starting} ms`);
});

after(async () => {
  if (process.env.SDK_TEST_TRACE) console.log(`SDK requests:\n${describeRequests(sdkRequests)}`);
  const stopping = Date.now();
  await stopServer();
  if (process.env.SDK_TEST_TRACE) console.log(`server stopped in ${Date.now() - stopping} ms; active: ${process.getActiveResourcesInfo()}`);
  process.removeListener("exit", killServerSync);
});

// ---------------------------------------------------------------------------------------------------------------
// Plumbing: the mail outbox, read with plain fetch and the server key (not through the SDK).

const serverHeaders = {
  "x-service-access-type": "server",
  "x-service-project-id": PROJECT_ID,
  "x-service-secret-server-key": SECRET_SERVER_KEY,
};

/** The newest sign-in mail to `email`: the 6-character code of its subject and the 45-character code of its link. */
async function readSignInMail(email) {
  const res = await rawFetch(`${baseUrl}/api/v1/emails/outbox?to=${encodeURIComponent(email)}`, { headers: serverHeaders });
  assert.equal(res.status, 200, `outbox: ${res.status}`);
  const { items } = await res.json();
  assert.ok(items.length > 0, `no mail for ${email}`);
  const mail = items[0];
  const otp = /Your code is ([0-9A-Za-z]{6})$/.exec(mail.subject)?.[1];
  assert.ok(otp, `no code in the subject ${JSON.stringify(mail.subject)}`);
  const linkCode = /[?&]code=([0-9A-Za-z]{45})\b/.exec(mail.text)?.[1];
  assert.ok(linkCode, `no magic link with a 45-character code in ${JSON.stringify(mail.text)}`);
  return { otp, linkCode };
}

// ---------------------------------------------------------------------------------------------------------------
// SDK apps and helpers.

function newClientApp(extra = {}) {
  return new StackClientApp({
    baseUrl,
    projectId: PROJECT_ID,
    publishableClientKey: PUBLISHABLE_CLIENT_KEY,
    tokenStore: "memory",
    redirectMethod: "none",
    ...extra,
  });
}

function newServerApp() {
  return new StackServerApp({
    baseUrl,
    projectId: PROJECT_ID,
    publishableClientKey: PUBLISHABLE_CLIENT_KEY,
    secretServerKey: SECRET_SERVER_KEY,
    tokenStore: "memory",
  });
}

function newEmail(tag) {
  return `sdk-${tag}-${randomUUID()}@example.com`;
}

/** Sends a sign-in mail through the SDK; returns the code a user would type (mail OTP + nonce) and the link code. */
async function requestSignInCode(app, email) {
  const sent = await app.sendMagicLinkEmail(email, { callbackUrl: CALLBACK_URL });
  assert.equal(sent.status, "ok", `sendMagicLinkEmail: ${sent.error}`);
  assert.equal(typeof sent.data.nonce, "string");
  const { otp, linkCode } = await readSignInMail(email);
  const typed = otp + sent.data.nonce;
  assert.equal(typed.length, 45);
  return { typed, linkCode };
}

function pick(object, keys) {
  assert.ok(object, "expected an object");
  return Object.fromEntries(keys.map((key) => [key, object[key]]));
}

/** RFC 6238 TOTP: HMAC-SHA1 over the 8-byte big-endian 30-second counter, dynamic truncation, 6 digits. */
function totp(secret, unixMillis = Date.now()) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(unixMillis / 1000 / 30)));
  const mac = createHmac("sha1", secret).update(counter).digest();
  const offset = mac[mac.length - 1] & 0x0f;
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000).padStart(6, "0");
}

/** Waits into the next 30 s step when fewer than 2 s remain in the current one. */
async function awayFromTotpBoundary() {
  const left = 30_000 - (Date.now() % 30_000);
  if (left < 2_000) await sleep(left + 100);
}

// ---------------------------------------------------------------------------------------------------------------

test("client app: magic-link sign-in, profile, selected team, team profile, token refresh, sign-out", async () => {
  const client = newClientApp();
  const serverApp = newServerApp();
  const email = newEmail("client");

  assert.equal(await client.getUser(), null, "nobody is signed in yet");

  const { typed, linkCode } = await requestSignInCode(client, email);
  assert.equal(linkCode, typed.toLowerCase(), "the magic link carries the 6-character code followed by the nonce");
  // A wrong 6-character code is a known error, which the SDK returns as an error Result.
  const wrongOtp = typed.startsWith("000000") ? "111111" : "000000";
  const wrong = await client.signInWithMagicLink(wrongOtp + typed.slice(6), { noRedirect: true });
  assert.equal(wrong.status, "error");
  assert.equal(wrong.error.errorCode, "VERIFICATION_CODE_NOT_FOUND");
  const signedIn = await client.signInWithMagicLink(typed, { noRedirect: true });
  assert.equal(signedIn.status, "ok", `signInWithMagicLink: ${signedIn.error}`);
  const reused = await newClientApp().signInWithMagicLink(linkCode, { noRedirect: true });
  assert.equal(reused.status, "error", "a code signs in once");
  assert.equal(reused.error.errorCode, "VERIFICATION_CODE_ALREADY_USED");

  const user = await client.getUser();
  assert.ok(user, "getUser() after sign-in");
  assert.match(user.id, UUID_RE);
  assert.equal(user.primaryEmail, email);
  assert.equal(user.displayName, null);
  assert.equal(user.isAnonymous, false);
  // The access token is a JWT the SDK accepts (it validates the claims with its own schema).
  assert.deepEqual(pick(await client.getPartialUser({ from: "token" }), ["id", "primaryEmail", "displayName"]), {
    id: user.id,
    primaryEmail: email,
    displayName: null,
  });

  // update(), then the SDK refreshes its access token (suggestAccessTokenExpired) before its next request.
  const displayName = `Ada ${randomUUID().slice(0, 8)}`;
  const clientMetadata = { theme: "dark", visits: 3, nested: { ok: true } };
  const beforeUpdate = sdkRequests.length;
  await user.update({ displayName, clientMetadata });
  const updated = await client.getUser();
  assert.equal(updated.id, user.id);
  assert.equal(updated.displayName, displayName);
  assert.deepEqual(updated.clientMetadata, clientMetadata);
  const sinceUpdate = requestsSince(beforeUpdate);
  const refreshes = sinceUpdate.filter((r) => r.method === "POST" && r.url === `${baseUrl}/api/v1/auth/oauth/token`);
  assert.ok(refreshes.length >= 1, `no token refresh after update():\n${describeRequests(sinceUpdate)}`);
  assert.ok(refreshes.every((r) => r.status === 200), `token refresh failed:\n${describeRequests(refreshes)}`);
  // The refreshed JWT carries the new name.
  assert.deepEqual(pick(await client.getPartialUser({ from: "token" }), ["id", "primaryEmail", "displayName"]), {
    id: user.id,
    primaryEmail: email,
    displayName,
  });
  const patch = sinceUpdate.find((r) => r.method === "PATCH" && r.url === `${baseUrl}/api/v1/users/me`);
  assert.equal(patch?.status, 200, describeRequests(sinceUpdate));

  // A team created for the user by the server, then selected by the user.
  const teamName = `Team ${randomUUID().slice(0, 8)}`;
  const team = await serverApp.createTeam({ displayName: teamName, creatorUserId: user.id });
  assert.match(team.id, UUID_RE);
  assert.equal(team.displayName, teamName);
  const myTeams = await updated.listTeams();
  assert.deepEqual(
    myTeams.map((t) => [t.id, t.displayName]),
    [[team.id, teamName]],
    "the creator is a member of the new team",
  );
  await updated.setSelectedTeam(team);
  const withTeam = await client.getUser();
  assert.equal(withTeam.selectedTeam?.id, team.id);
  assert.equal(withTeam.selectedTeam?.displayName, teamName);

  // The user's member profile in that team.
  const profile = await withTeam.getTeamProfile(team);
  assert.equal(typeof profile.update, "function");
  await profile.update({ displayName: "nick" });
  const profileAgain = await withTeam.getTeamProfile(team);
  assert.equal(profileAgain.displayName, "nick");
  const members = await (await serverApp.getTeam(team.id)).listUsers();
  assert.deepEqual(
    members.map((m) => [m.id, m.primaryEmail, m.teamProfile.displayName]),
    [[user.id, email, "nick"]],
  );

  // Sign out: the session ends on the server, and the SDK no longer has a user. Another app instance given only
  // the refresh token (the SDK's object token store) finds the user before the sign-out and nobody after it.
  const { refreshToken } = await withTeam.getAuthJson();
  assert.equal(typeof refreshToken, "string");
  const fromRefreshToken = () => newClientApp({ tokenStore: { accessToken: null, refreshToken } }).getUser();
  assert.equal((await fromRefreshToken())?.id, user.id);
  const beforeSignOut = sdkRequests.length;
  await withTeam.signOut();
  const signOut = requestsSince(beforeSignOut).find(
    (r) => r.method === "DELETE" && r.url === `${baseUrl}/api/v1/auth/sessions/current`,
  );
  assert.ok(signOut, describeRequests(requestsSince(beforeSignOut)));
  assert.ok(signOut.status >= 200 && signOut.status < 300, describeRequests([signOut]));
  assert.equal(await client.getUser(), null);
  const beforeRevokedRefresh = sdkRequests.length;
  assert.equal(await fromRefreshToken(), null, "the refresh token is revoked");
  assert.deepEqual(
    requestsSince(beforeRevokedRefresh).map((r) => [r.method, r.url, r.status, r.knownError]),
    [
      ["POST", `${baseUrl}/api/v1/auth/oauth/token`, 401, "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"],
      ["GET", `${baseUrl}/api/v1/users/me`, 400, "CANNOT_GET_OWN_USER_WITHOUT_USER"], // asked again without tokens
    ],
  );
});

test("server app: create, read, update, paginate users; teams and memberships", async () => {
  const serverApp = newServerApp();
  const email = newEmail("server");
  const created = await serverApp.createUser({ primaryEmail: email, primaryEmailAuthEnabled: true, displayName: "Srv" });
  assert.match(created.id, UUID_RE);
  assert.equal(created.primaryEmail, email);
  assert.equal(created.displayName, "Srv");

  const fetched = await serverApp.getUser(created.id);
  assert.ok(fetched, "getUser(id) of a created user");
  assert.equal(fetched.id, created.id);
  assert.equal(fetched.primaryEmail, email);
  assert.equal(fetched.displayName, "Srv");
  assert.equal(await serverApp.getUser(randomUUID()), null, "getUser(unknown id) is null");

  await fetched.update({ serverMetadata: { plan: "pro" } });
  const upgraded = await serverApp.getUser(created.id);
  assert.deepEqual(upgraded.serverMetadata, { plan: "pro" });
  assert.equal(upgraded.displayName, "Srv");

  // Pagination: three more users, pages of two, following nextCursor to the end.
  const threeIds = [];
  for (let i = 0; i < 3; i++) {
    const u = await serverApp.createUser({ primaryEmail: newEmail(`page${i}`), primaryEmailAuthEnabled: true, displayName: `Page ${i}` });
    threeIds.push(u.id);
  }
  const seen = [];
  let cursor;
  let pages = 0;
  do {
    const page = await serverApp.listUsers({ limit: 2, ...(cursor ? { cursor } : {}) });
    pages += 1;
    assert.ok(page.length <= 2, `a page of ${page.length} users for limit 2`);
    seen.push(...page.map((u) => u.id));
    cursor = page.nextCursor;
    assert.ok(pages < 500, "pagination does not end");
  } while (cursor);
  assert.ok(pages >= 2, "four users do not fit in one page of two");
  assert.equal(new Set(seen).size, seen.length, "no user is listed twice across pages");
  for (const id of [created.id, ...threeIds]) assert.ok(seen.includes(id), `user ${id} missing from the pages`);

  const teamName = `Srv Team ${randomUUID().slice(0, 8)}`;
  const team = await serverApp.createTeam({ displayName: teamName });
  assert.match(team.id, UUID_RE);
  assert.equal(team.displayName, teamName);
  assert.deepEqual((await team.listUsers()).map((m) => m.id), [], "a team created without a creator has no members");
  await team.addUser(threeIds[0]);
  const members = await team.listUsers();
  assert.deepEqual(members.map((m) => m.id), [threeIds[0]]);
  assert.equal(members[0].displayName, "Page 0");
});

test("MFA: TOTP set through the SDK, MFA-required known error, signInWithMfa", async () => {
  // The helper itself, against RFC 6238's SHA-1 test vector (T = 59 s -> 94287082, last 6 digits).
  assert.equal(totp(Buffer.from("12345678901234567890"), 59_000), "287082");

  const email = newEmail("mfa");
  const first = newClientApp();
  const firstCode = await requestSignInCode(first, email);
  assert.equal((await first.signInWithMagicLink(firstCode.typed, { noRedirect: true })).status, "ok");
  const user = await first.getUser();
  assert.equal(user.primaryEmail, email);
  assert.equal(user.isMultiFactorRequired, false);

  const secret = randomBytes(20);
  await user.update({ totpMultiFactorSecret: new Uint8Array(secret) });
  assert.equal((await first.getUser()).isMultiFactorRequired, true, "requires_totp_mfa after setting the secret");
  assert.equal((await first.getPartialUser({ from: "token" }))?.isMultiFactorRequired, true, "and in the refreshed JWT");

  // 1. The public sign-in call recognises the known error and, as in a browser, goes to the MFA handler page.
  //    In Node it has nowhere to keep the attempt code (the browser uses sessionStorage) and then throws.
  const navigations = [];
  const second = newClientApp({ redirectMethod: { navigate: (url) => navigations.push(url) } });
  const secondCode = await requestSignInCode(second, email);
  const beforeMfa = sdkRequests.length;
  await assert.rejects(second.signInWithMagicLink(secondCode.linkCode, { noRedirect: true }), (err) => {
    assert.match(String(err?.message), /should have redirected in redirectToMfa/);
    return true;
  });
  assert.equal(navigations.length, 1, "signInWithMagicLink navigates to the MFA page");
  assert.match(navigations[0], /mfa/);
  const mfaResponse = requestsSince(beforeMfa).find((r) => r.url === `${baseUrl}/api/v1/auth/otp/sign-in`);
  assert.deepEqual([mfaResponse?.status, mfaResponse?.knownError], [400, "MULTI_FACTOR_AUTHENTICATION_REQUIRED"]);

  // 2. The SDK's own request layer (the app internals the SDK exports) surfaces the KnownError and its attempt code.
  const third = newClientApp();
  const thirdCode = await requestSignInCode(third, email);
  let attemptCode;
  await assert.rejects(
    third[stackAppInternalsSymbol].sendRequest(
      "/auth/otp/sign-in",
      { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ code: thirdCode.typed }) },
      "client",
    ),
    (err) => {
      assert.equal(err.name, "KnownError<MULTI_FACTOR_AUTHENTICATION_REQUIRED>");
      assert.equal(err.errorCode, "MULTI_FACTOR_AUTHENTICATION_REQUIRED");
      assert.equal(err.constructor.errorCode, "MULTI_FACTOR_AUTHENTICATION_REQUIRED");
      assert.equal(err.statusCode, 400);
      attemptCode = err.details?.attempt_code;
      return true;
    },
  );
  assert.equal(typeof attemptCode, "string");
  assert.equal(attemptCode.length, 45);

  // 3. The second factor, through the SDK's public signInWithMfa, with a real TOTP.
  await awayFromTotpBoundary();
  const good = totp(secret);
  const badTotp = await third.signInWithMfa(good === "000000" ? "111111" : "000000", attemptCode, { noRedirect: true });
  assert.equal(badTotp.status, "error");
  assert.equal(badTotp.error.errorCode, "INVALID_TOTP_CODE");
  assert.equal(await third.getUser(), null, "a wrong TOTP signs nobody in");
  const mfa = await third.signInWithMfa(good, attemptCode, { noRedirect: true });
  assert.equal(mfa.status, "ok", `signInWithMfa: ${mfa.error}`);
  const mfaUser = await third.getUser();
  assert.equal(mfaUser?.id, user.id);
  assert.equal(mfaUser.primaryEmail, email);
  assert.equal(mfaUser.isMultiFactorRequired, true);
});

test("every SDK request went to our server on 127.0.0.1", () => {
  assert.ok(sdkRequests.length > 0);
  const elsewhere = sdkRequests.filter((r) => !r.url.startsWith(`${baseUrl}/api/v1/`));
  assert.deepEqual(elsewhere, []);
  const failed = sdkRequests.filter((r) => r.status === -1);
  assert.deepEqual(failed, [], "requests without an answer");
});
