// Password flows through the unmodified official SDK, against our service on the memory store and on Redis:
// sendForgotPasswordEmail -> the mailed link's code -> verifyPasswordResetCode / resetPassword -> signInWithCredential
// with the new password; user.updatePassword (the SDK's own session survives it, another one does not);
// user.setPassword for a user who signed up by code. Plain fetch only reads the outbox and creates the first user.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { CALLBACK_URL, newEmail, startService } from "./support.mjs";

const RESET_URL = "http://localhost:3000/handler/password-reset";
const PASSWORD = "correct horse battery";
const NEW_PASSWORD = "new staple 2024!";

async function userWithPassword(service, tag) {
  const email = newEmail(tag);
  const created = await service.newServerApp().createUser({
    primaryEmail: email,
    primaryEmailAuthEnabled: true,
    password: PASSWORD,
  });
  assert.equal(created.primaryEmail, email);
  return { email, id: created.id };
}

async function signedIn(service, email, password) {
  const app = service.newClientApp();
  const result = await app.signInWithCredential({ email, password, noRedirect: true });
  assert.equal(result.status, "ok", `signInWithCredential: ${result.error}`);
  return app;
}

for (const backend of ["memory", "redis"]) {
  describe(`passwords on ${backend}`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
    });
    after(() => service?.stop());

    test("a forgotten password: the mailed code resets it, and the new password signs in", async () => {
      const { email, id } = await userWithPassword(service, "reset");
      const before = await signedIn(service, email, PASSWORD);
      const app = service.newClientApp();

      const sent = await app.sendForgotPasswordEmail(email, { callbackUrl: RESET_URL });
      assert.equal(sent.status, "ok");
      const [mail] = await service.mails(email);
      assert.match(mail.subject, /^Reset your password at /);
      const code = await service.linkCode(email);
      assert.ok(mail.text.includes(`${RESET_URL}?code=${code}`), mail.text);

      assert.equal((await app.verifyPasswordResetCode(code)).status, "ok", "checking consumes nothing");
      const wrong = await app.verifyPasswordResetCode("0".repeat(45));
      assert.equal(wrong.status, "error");
      assert.equal(wrong.error.errorCode, "VERIFICATION_CODE_NOT_FOUND");

      const reset = await app.resetPassword({ code, password: NEW_PASSWORD });
      assert.equal(reset.status, "ok", `resetPassword: ${reset.error}`);
      const reused = await app.resetPassword({ code, password: "another password" });
      assert.equal(reused.status, "error");
      assert.equal(reused.error.errorCode, "VERIFICATION_CODE_ALREADY_USED");

      const old = await service.newClientApp().signInWithCredential({ email, password: PASSWORD, noRedirect: true });
      assert.equal(old.status, "error");
      assert.equal(old.error.errorCode, "EMAIL_PASSWORD_MISMATCH");
      const now = await signedIn(service, email, NEW_PASSWORD);
      assert.equal((await now.getUser()).id, id);
      assert.equal(await before.getUser(), null, "the reset ended the session from before it");
    });

    test("a forgotten password for an unknown address: the same answer, and no mail", async () => {
      const app = service.newClientApp();
      const email = newEmail("nobody");
      const sent = await app.sendForgotPasswordEmail(email, { callbackUrl: RESET_URL });
      assert.equal(sent.status, "ok");
      assert.deepEqual(await service.mails(email), []);
    });

    test("user.updatePassword: wrong or short passwords come back as errors; the SDK's session survives", async () => {
      const { email, id } = await userWithPassword(service, "update");
      const elsewhere = await signedIn(service, email, PASSWORD);
      const app = await signedIn(service, email, PASSWORD);
      const user = await app.getUser({ or: "throw" });

      const wrong = await user.updatePassword({ oldPassword: "wrong password", newPassword: NEW_PASSWORD });
      assert.equal(wrong?.errorCode, "PASSWORD_CONFIRMATION_MISMATCH");
      const short = await user.updatePassword({ oldPassword: PASSWORD, newPassword: "short" });
      assert.equal(short?.errorCode, "PASSWORD_TOO_SHORT");

      assert.equal(await user.updatePassword({ oldPassword: PASSWORD, newPassword: NEW_PASSWORD }), undefined);
      assert.equal((await app.getUser()).id, id, "the caller's session is kept");
      assert.equal(await elsewhere.getUser(), null, "every other session ended");
      assert.equal((await (await signedIn(service, email, NEW_PASSWORD)).getUser()).id, id);
    });

    test("user.setPassword gives a user who signed up by code a password", async () => {
      const email = newEmail("set");
      const app = service.newClientApp();
      const sent = await app.sendMagicLinkEmail(email, { callbackUrl: CALLBACK_URL });
      assert.equal(sent.status, "ok");
      const signIn = await app.signInWithMagicLink(await service.linkCode(email), { noRedirect: true });
      assert.equal(signIn.status, "ok", `signInWithMagicLink: ${signIn.error}`);
      const user = await app.getUser({ or: "throw" });
      assert.equal(user.hasPassword, false);

      const short = await user.setPassword({ password: "short" });
      assert.equal(short?.errorCode, "PASSWORD_TOO_SHORT");
      assert.equal(await user.setPassword({ password: NEW_PASSWORD }), undefined);
      const after = await app.getUser({ or: "throw" });
      assert.equal(after.hasPassword, true);
      assert.equal(after.id, user.id, "no session changed");
      await assert.rejects(after.setPassword({ password: "yet another one" }), /already has a password/);

      assert.equal((await (await signedIn(service, email, NEW_PASSWORD)).getUser()).id, user.id);
    });
  });
}
