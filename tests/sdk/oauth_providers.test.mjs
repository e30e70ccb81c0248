// Linked and connected accounts through the unmodified official SDK, on the memory store and on Redis: a server
// links a provider account to a signed-in user (`POST /oauth-providers`, plain fetch: the SDK has no call for it);
// the user then lists it (`user.listOAuthProviders()`), turns connected accounts and sign-in off and on
// (`provider.update`), lists connected accounts (`user.listConnectedAccounts()`), asks one for a token (none is
// stored: the SDK maps OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE to an error result), and removes the account
// (`provider.delete()`).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { newEmail, startService } from "./support.mjs";

const PROVIDERS = [{ id: "github", type: "github", client_id: "gh-client", client_secret: "gh-secret-not-shown-0001" }];

for (const backend of ["memory", "redis"]) {
  describe(`OAuth providers (${backend})`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
      const configured = await service.api("PATCH", "/projects/current", {
        access: "admin",
        body: { config: { oauth_providers: PROVIDERS } },
      });
      assert.equal(configured.status, 200, JSON.stringify(configured.json));
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

    test("a linked account: listed, updated, a connected account without tokens, deleted", async () => {
      const { user } = await signedInClient("oauth");
      const linked = await service.api("POST", "/oauth-providers", {
        body: {
          user_id: user.id,
          provider_config_id: "github",
          account_id: "gh-4242",
          email: "octo@example.com",
          allow_sign_in: true,
          allow_connected_accounts: true,
        },
      });
      assert.equal(linked.status, 201, JSON.stringify(linked.json));

      const providers = await user.listOAuthProviders();
      assert.deepEqual(
        providers.map((p) => [p.id, p.type, p.userId, p.email, p.allowSignIn, p.allowConnectedAccounts]),
        [[linked.json.id, "github", user.id, "octo@example.com", true, true]],
      );

      const connected = await user.listConnectedAccounts();
      assert.deepEqual(
        connected.map((a) => [a.provider, a.providerAccountId]),
        [["github", "gh-4242"]],
      );
      const token = await connected[0].getAccessToken();
      assert.equal(token.status, "error", "no provider token is stored for an account a server linked");

      const updated = await providers[0].update({ allowSignIn: false, allowConnectedAccounts: false });
      assert.equal(updated.status, "ok", `update: ${updated.error}`);
      const [after] = await user.listOAuthProviders();
      assert.deepEqual([after.allowSignIn, after.allowConnectedAccounts], [false, false]);
      assert.deepEqual(await user.listConnectedAccounts(), []);

      await after.delete();
      assert.deepEqual(await user.listOAuthProviders(), []);
      const read = await service.api("GET", `/oauth-providers?user_id=${user.id}`);
      assert.deepEqual(read.json.items, []);
    });

    test("another user's accounts are not the client's", async () => {
      const { user: ada } = await signedInClient("ada");
      const { user: bob } = await signedInClient("bob");
      const linked = await service.api("POST", "/oauth-providers", {
        body: {
          user_id: ada.id,
          provider_config_id: "github",
          account_id: "gh-ada",
          allow_sign_in: true,
          allow_connected_accounts: true,
        },
      });
      assert.equal(linked.status, 201);
      assert.deepEqual(await bob.listOAuthProviders(), []);
      assert.deepEqual(await bob.listConnectedAccounts(), []);

      // Bob may link the same GitHub account without sign-in, but not turn sign-in on while Ada signs in with it.
      const bobs = await service.api("POST", "/oauth-providers", {
        body: {
          user_id: bob.id,
          provider_config_id: "github",
          account_id: "gh-ada",
          allow_sign_in: false,
          allow_connected_accounts: true,
        },
      });
      assert.equal(bobs.status, 201);
      const [bobsProvider] = await bob.listOAuthProviders();
      const refused = await bobsProvider.update({ allowSignIn: true });
      assert.equal(refused.status, "error");
      assert.equal(refused.error.errorCode, "OAUTH_PROVIDER_ACCOUNT_ID_ALREADY_USED_FOR_SIGN_IN");
      const project = await service.api("GET", "/projects/current", { access: "admin" });
      assert.ok(!JSON.stringify(project.json).includes(PROVIDERS[0].client_secret), "the secret is never read back");
    });
  });
}
