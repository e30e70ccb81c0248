// Permissions (reference part 2 §6) driven by the official SDK, unmodified, on the memory store and on Redis:
// definitions made by an admin (plain fetch with the admin key), granted and revoked by a server app, read by the
// signed-in client, project permissions and team permissions with contained ones read recursively.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { newEmail, startService } from "./support.mjs";

const PASSWORD = "correct horse battery staple";

function uniqueId(name) {
  return `${name}_${randomUUID().slice(0, 8)}`;
}

async function define(service, scope, body) {
  const { status, json } = await service.api("POST", `/${scope}-permission-definitions`, { body, access: "admin" });
  assert.equal(status, 201, `define ${body.id}: ${JSON.stringify(json)}`);
  return json;
}

/** A new client app with a user signed up by password (a fresh app: the SDK caches what it listed). */
async function signedUp(service, email) {
  const client = service.newClientApp();
  const result = await client.signUpWithCredential({
    email,
    password: PASSWORD,
    noRedirect: true,
    verificationCallbackUrl: "http://localhost:3000/handler/email-verification",
  });
  assert.equal(result.status, "ok", `signUpWithCredential: ${result.error}`);
  return client;
}

async function signedIn(service, email) {
  const client = service.newClientApp();
  const result = await client.signInWithCredential({ email, password: PASSWORD, noRedirect: true });
  assert.equal(result.status, "ok", `signInWithCredential: ${result.error}`);
  return client;
}

for (const backend of ["memory", "redis"]) {
  describe(`permissions on ${backend}`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
    });
    after(() => service.stop());

    test("a project permission defined by admin, granted by a server app, read by the client", async () => {
      const child = uniqueId("read_reports");
      const parent = uniqueId("manage_reports");
      await define(service, "project", { id: child, description: "Read reports" });
      const made = await define(service, "project", { id: parent, contained_permission_ids: [child] });
      assert.deepEqual(made, { id: parent, contained_permission_ids: [child] });

      const email = newEmail("perm");
      const client = await signedUp(service, email);
      const user = await client.getUser();
      const serverApp = service.newServerApp();
      const serverUser = await serverApp.getUser(user.id);
      await serverUser.grantPermission(parent);
      assert.equal(await serverUser.hasPermission(parent), true, "the server app sees its grant");

      // The SDK lists recursively by default: the contained permission is there too.
      const listed = await user.listPermissions();
      assert.deepEqual(listed.map((p) => p.id).sort(), [child, parent].sort());
      assert.deepEqual((await user.listPermissions({ recursive: false })).map((p) => p.id), [parent]);
      assert.equal(await user.hasPermission(child), true);
      assert.equal((await user.getPermission(parent))?.id, parent);
      assert.equal(await user.hasPermission(uniqueId("never_defined")), false);

      await serverUser.revokePermission(parent);
      const again = await (await signedIn(service, email)).getUser();
      assert.deepEqual(await again.listPermissions(), [], "revoked: nothing held, nothing contained");
    });

    test("a team permission containing a system one, read recursively by the member", async () => {
      const moderator = uniqueId("moderator");
      await define(service, "team", { id: moderator, contained_permission_ids: ["$remove_members"] });
      const teams = await service.api("GET", "/team-permission-definitions", { access: "admin" });
      assert.ok(teams.json.items.some((d) => d.id === "$manage_api_keys"), "the system permissions are listed");

      const client = await signedUp(service, newEmail("member"));
      const user = await client.getUser();
      const serverApp = service.newServerApp();
      const team = await serverApp.createTeam({ displayName: `Perm Team ${randomUUID().slice(0, 8)}` });
      await team.addUser(user.id); // a member gets the project's member default: team_member
      const serverUser = await serverApp.getUser(user.id);
      await serverUser.grantPermission(team, moderator);

      const clientTeam = await user.getTeam(team.id);
      assert.ok(clientTeam, "the member sees the team");
      const recursive = (await user.listPermissions(clientTeam)).map((p) => p.id).sort();
      assert.deepEqual(recursive, ["$invite_members", "$read_members", "$remove_members", moderator, "team_member"].sort());
      const direct = (await user.listPermissions(clientTeam, { recursive: false })).map((p) => p.id).sort();
      assert.deepEqual(direct, [moderator, "team_member"].sort());
      assert.equal(await user.hasPermission(clientTeam, "$remove_members"), true);
      assert.equal(await user.hasPermission(clientTeam, "$update_team"), false);
    });
  });
}
