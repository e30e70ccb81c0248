// Contact channels through the unmodified official SDK, on the memory store and on Redis: a signed-in user adds a
// channel, verifies it with the code its mail carries (app.verifyEmail), makes it primary (user.primaryEmail
// follows), and a server app sees the same; the legacy user.sendVerificationEmail verifies the primary e-mail.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { CALLBACK_URL, newEmail, startService } from "./support.mjs";

/** A user signed in through a magic link mailed to `email`, on a fresh client app. */
async function signedInClient(service, email) {
  const client = service.newClientApp();
  await client.sendMagicLinkEmail(email, { callbackUrl: CALLBACK_URL });
  const signedIn = await client.signInWithMagicLink(await service.linkCode(email), { noRedirect: true });
  assert.equal(signedIn.status, "ok", `signInWithMagicLink: ${signedIn.error}`);
  return client;
}

for (const backend of ["memory", "redis"]) {
  describe(`contact channels (${backend})`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
    });
    after(() => service.stop());

    test("a channel added, verified through the mailed code, made primary", async () => {
      const email = newEmail("channels");
      const work = newEmail("work");
      const client = await signedInClient(service, email);
      const user = await client.getUser({ or: "throw" });

      const channel = await user.createContactChannel({ type: "email", value: work, usedForAuth: true });
      assert.equal(channel.value, work);
      assert.equal(channel.isPrimary, false);
      assert.equal(channel.isVerified, false, "a client's channel starts unverified");
      const listed = await user.listContactChannels();
      assert.deepEqual(
        listed.map((c) => [c.value, c.isPrimary, c.isVerified]),
        [
          [email, true, true],
          [work, false, false],
        ],
      );

      await channel.sendVerificationEmail({ callbackUrl: "http://localhost:3000/handler/email-verification" });
      const [mail] = await service.mails(work);
      assert.match(mail.subject, /^Verify your email at /);
      const verified = await client.verifyEmail(await service.linkCode(work));
      assert.equal(verified.status, "ok", `verifyEmail: ${verified.error}`);
      const again = await client.verifyEmail(await service.linkCode(work));
      assert.equal(again.status, "error");
      assert.equal(again.error.errorCode, "VERIFICATION_CODE_ALREADY_USED");
      const afterVerify = (await user.listContactChannels()).find((c) => c.id === channel.id);
      assert.equal(afterVerify.isVerified, true);

      await afterVerify.update({ isPrimary: true });
      const fresh = await client.getUser({ or: "throw" });
      assert.equal(fresh.primaryEmail, work);
      assert.equal(fresh.primaryEmailVerified, true);
      const serverUser = await service.newServerApp().getUser(user.id);
      assert.equal(serverUser.primaryEmail, work);
      assert.deepEqual(
        (await serverUser.listContactChannels()).map((c) => [c.value, c.isPrimary]),
        [
          [email, false],
          [work, true],
        ],
      );

      // The new primary signs in: a magic link to it reaches the same user.
      const other = await signedInClient(service, work);
      assert.equal((await other.getUser({ or: "throw" })).id, user.id);
    });

    test("user.sendVerificationEmail verifies the primary e-mail", async () => {
      const email = newEmail("legacy");
      const serverApp = service.newServerApp();
      const created = await serverApp.createUser({ primaryEmail: email, primaryEmailAuthEnabled: true, password: "correct horse 1" });
      assert.equal(created.primaryEmailVerified, false);
      const client = service.newClientApp();
      const signedIn = await client.signInWithCredential({ email, password: "correct horse 1", noRedirect: true });
      assert.equal(signedIn.status, "ok", `signInWithCredential: ${signedIn.error}`);
      const user = await client.getUser({ or: "throw" });
      const sent = await user.sendVerificationEmail({ callbackUrl: "http://localhost:3000/handler/email-verification" });
      assert.equal(sent, undefined, "nothing returned: the mail went out");
      assert.equal((await client.verifyEmail(await service.linkCode(email))).status, "ok");
      assert.equal((await client.getUser({ or: "throw" })).primaryEmailVerified, true);
      const twice = await user.sendVerificationEmail({ callbackUrl: "http://localhost:3000/handler/email-verification" });
      assert.equal(twice.errorCode, "EMAIL_ALREADY_VERIFIED", "the 409 is returned as a value");
    });
  });
}
