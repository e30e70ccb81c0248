// API keys through the unmodified official SDK, on the memory store and on Redis: a user creates a key
// (`user.createApiKey`), lists it, a server app resolves it to its user (`serverApp.getUser({ apiKey })`), the user
// revokes it (`key.revoke()`), and the check then answers null; the same for a team key. The admin key switches
// both families on first (they are off by default).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { newEmail, startService } from "./support.mjs";

/** The same key with its last character changed (to another hex digit: "0" unless it is "0" already). */
function otherKey(key) {
  return key.slice(0, -1) + (key.endsWith("0") ? "1" : "0");
}

for (const backend of ["memory", "redis"]) {
  describe(`API keys (${backend})`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
      const switched = await service.api("PATCH", "/projects/current", {
        access: "admin",
        body: { config: { allow_user_api_keys: true, allow_team_api_keys: true, client_team_creation_enabled: true } },
      });
      assert.equal(switched.status, 200, JSON.stringify(switched.json));
    });
    after(() => service.stop());

    async function signedInClient(tag) {
      const client = service.newClientApp();
      const signedUp = await client.signUpWithCredential({
        email: newEmail(tag),
        password: "correct horse battery staple",
        noRedirect: true,
        noVerificationCallback: true,
      });
      assert.equal(signedUp.status, "ok", `signUpWithCredential: ${signedUp.error}`);
      const user = await client.getUser();
      assert.ok(user, "signed in");
      return { client, user };
    }

    test("a user key: created, listed, checked by a server app, revoked, then no longer valid", async () => {
      const { user } = await signedInClient("user-key");

      const created = await user.createApiKey({ description: "CI script", expiresAt: null });
      assert.match(created.value, /^sk_[0-9a-z]{45}[0-9a-f]{32}user1574ck4u7h[0-9a-f]{8}$/);
      assert.equal(created.description, "CI script");
      assert.equal(created.type, "user");
      assert.equal(created.userId, user.id);
      assert.equal(created.isValid(), true);

      const listed = await user.listApiKeys();
      assert.deepEqual(
        listed.map((key) => [key.id, key.description, key.value.lastFour]),
        [[created.id, "CI script", created.value.slice(-4)]],
      );

      const serverApp = service.newServerApp();
      const owner = await serverApp.getUser({ apiKey: created.value });
      assert.ok(owner, "the key resolves to its user");
      assert.equal(owner.id, user.id);
      assert.equal(await serverApp.getUser({ apiKey: otherKey(created.value) }), null, "a wrong key");

      await listed[0].revoke();
      const [revoked] = await user.listApiKeys();
      assert.ok(revoked.manuallyRevokedAt instanceof Date, "revoked keys stay listed");
      assert.equal(revoked.whyInvalid(), "manually-revoked");
      // A fresh server app: the SDK caches what a check answered.
      assert.equal(await service.newServerApp().getUser({ apiKey: created.value }), null);
    });

    test("a team key: created by the team's admin, resolved to its team, revoked", async () => {
      const { user } = await signedInClient("team-key");
      const team = await user.createTeam({ displayName: "Key holders" });

      const created = await team.createApiKey({ description: "deploys", expiresAt: null, isPublic: true });
      assert.match(created.value, /^pk_.{77}team3574ck4u7h[0-9a-f]{8}$/);
      assert.equal(created.teamId, team.id);
      assert.deepEqual((await team.listApiKeys()).map((key) => key.id), [created.id]);

      const found = await service.newServerApp().getTeam({ apiKey: created.value });
      assert.ok(found, "the key resolves to its team");
      assert.equal(found.id, team.id);
      assert.equal(await service.newServerApp().getUser({ apiKey: created.value }), null, "not a user key");

      const [key] = await team.listApiKeys();
      await key.revoke();
      assert.equal(await service.newServerApp().getTeam({ apiKey: created.value }), null);
    });
  });
}
