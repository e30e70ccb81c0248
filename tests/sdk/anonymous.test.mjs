// Anonymous users through the unmodified official SDK (@stackframe/js@2.8.102), on the memory store and on Redis:
// `getUser({ or: "anonymous" })` signs an anonymous user up (POST /auth/anonymous/sign-up, no body), and a later
// sign-up from the same app (password, or a code sent to a new address) keeps that user's id. Signing in to an
// existing account while anonymous returns that account and leaves the anonymous user alone.
// Run: cd tests/sdk && npm ci && node --test anonymous.test.mjs

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { CALLBACK_URL, newEmail, startService } from "./support.mjs";

for (const backend of ["memory", "redis"]) {
  describe(`anonymous users (${backend})`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
    });
    after(() => service.stop());

    async function serverView(userId) {
      const { status, json } = await service.api("GET", `/users/${userId}`);
      assert.equal(status, 200, `GET /users/${userId}: ${status}`);
      return json;
    }

    test("getUser({ or: 'anonymous' }) then a password sign-up keeps the same user id", async () => {
      const app = service.newClientApp();
      assert.equal(await app.getUser(), null);

      const anonymous = await app.getUser({ or: "anonymous" });
      assert.equal(anonymous.isAnonymous, true);
      assert.equal(anonymous.primaryEmail, null);
      assert.equal(await app.getUser(), null, "plain getUser() does not return an anonymous user");
      const again = await app.getUser({ or: "anonymous" });
      assert.equal(again.id, anonymous.id, "the stored anonymous session is reused, not a second sign-up");
      await anonymous.update({ displayName: "Guest Ada" });
      assert.equal((await serverView(anonymous.id)).is_anonymous, true);

      const email = newEmail("anon-pw");
      const result = await app.signUpWithCredential({
        email,
        password: "correct horse battery",
        noRedirect: true,
        noVerificationCallback: true,
      });
      assert.equal(result.status, "ok", JSON.stringify(result.error ?? null));

      const user = await app.getUser({ or: "throw" });
      assert.equal(user.id, anonymous.id);
      assert.equal(user.isAnonymous, false);
      assert.equal(user.primaryEmail, email);
      assert.equal(user.displayName, "Guest Ada");
      const stored = await serverView(anonymous.id);
      assert.equal(stored.is_anonymous, false);
      assert.equal(stored.primary_email, email);

      // The password signs the same user in from a fresh app.
      const other = service.newClientApp();
      const signedIn = await other.signInWithCredential({ email, password: "correct horse battery", noRedirect: true });
      assert.equal(signedIn.status, "ok", JSON.stringify(signedIn.error ?? null));
      assert.equal((await other.getUser({ or: "throw" })).id, anonymous.id);
    });

    test("getUser({ or: 'anonymous' }) then a code sign-in of a new address keeps the same user id", async () => {
      const app = service.newClientApp();
      const anonymous = await app.getUser({ or: "anonymous" });
      assert.equal(anonymous.isAnonymous, true);

      const email = newEmail("anon-otp");
      const sent = await app.sendMagicLinkEmail(email, { callbackUrl: CALLBACK_URL });
      assert.equal(sent.status, "ok", JSON.stringify(sent.error ?? null));
      const signedIn = await app.signInWithMagicLink(await service.linkCode(email), { noRedirect: true });
      assert.equal(signedIn.status, "ok", JSON.stringify(signedIn.error ?? null));

      const user = await app.getUser({ or: "throw" });
      assert.equal(user.id, anonymous.id);
      assert.equal(user.isAnonymous, false);
      assert.equal(user.primaryEmail, email);
      assert.equal(user.primaryEmailVerified, true);
    });

    test("signing in to an existing account while anonymous returns that account", async () => {
      const email = newEmail("anon-existing");
      const owner = service.newClientApp();
      const created = await owner.signUpWithCredential({
        email,
        password: "correct horse battery",
        noRedirect: true,
        noVerificationCallback: true,
      });
      assert.equal(created.status, "ok", JSON.stringify(created.error ?? null));
      const ownerId = (await owner.getUser({ or: "throw" })).id;

      const app = service.newClientApp();
      const anonymous = await app.getUser({ or: "anonymous" });
      const signedIn = await app.signInWithCredential({ email, password: "correct horse battery", noRedirect: true });
      assert.equal(signedIn.status, "ok", JSON.stringify(signedIn.error ?? null));
      assert.equal((await app.getUser({ or: "throw" })).id, ownerId);
      assert.equal((await serverView(anonymous.id)).is_anonymous, true);

      // And a second anonymous user cannot take the address: the SDK's known error, the user stays anonymous.
      const late = service.newClientApp();
      const lateUser = await late.getUser({ or: "anonymous" });
      const taken = await late.signUpWithCredential({
        email,
        password: "another password",
        noRedirect: true,
        noVerificationCallback: true,
      });
      assert.equal(taken.status, "error");
      assert.equal(taken.error.errorCode, "USER_EMAIL_ALREADY_EXISTS");
      assert.equal((await serverView(lateUser.id)).is_anonymous, true);
    });

    test("a server app lists anonymous users only when asked", async () => {
      const app = service.newClientApp();
      const anonymous = await app.getUser({ or: "anonymous" });
      const serverApp = service.newServerApp();
      const ids = async (options) => (await serverApp.listUsers({ limit: 500, ...options })).map((u) => u.id);
      assert.ok(!(await ids({})).includes(anonymous.id));
      assert.ok((await ids({ includeAnonymous: true })).includes(anonymous.id));
    });
  });
}
