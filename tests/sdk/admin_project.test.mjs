// The project through the unmodified official SDK's admin app, on the memory store and on Redis: `getProject()`
// reads the original's admin view (`GET /internal/projects/current`), `project.update({...})` sends the original's
// update (`PATCH /internal/projects/current`), and the change is what the service then enforces.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { StackAdminApp } from "@stackframe/js";

import {
  PROJECT_ID,
  PUBLISHABLE_CLIENT_KEY,
  SECRET_SERVER_KEY,
  SUPER_SECRET_ADMIN_KEY,
  newEmail,
  startService,
} from "./support.mjs";

for (const backend of ["memory", "redis"]) {
  describe(`admin project (${backend})`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
    });
    after(() => service.stop());

    function adminApp() {
      return new StackAdminApp({
        baseUrl: service.baseUrl,
        projectId: PROJECT_ID,
        publishableClientKey: PUBLISHABLE_CLIENT_KEY,
        secretServerKey: SECRET_SERVER_KEY,
        superSecretAdminKey: SUPER_SECRET_ADMIN_KEY,
        tokenStore: "memory",
      });
    }

    test("getProject, then project.update: renamed, sign-up off, default permissions set", async () => {
      const project = await adminApp().getProject();
      assert.equal(project.id, PROJECT_ID);
      assert.equal(project.config.signUpEnabled, true);

      await project.update({
        displayName: "Renamed by the SDK",
        config: {
          signUpEnabled: false,
          teamCreatorDefaultPermissions: [{ id: "team_admin" }, { id: "team_member" }],
        },
      });

      const again = await adminApp().getProject();
      assert.equal(again.displayName, "Renamed by the SDK");
      assert.equal(again.config.signUpEnabled, false);
      assert.deepEqual(
        again.config.teamCreatorDefaultPermissions.map((p) => p.id),
        ["team_admin", "team_member"],
      );
      // what the service enforces now: a password sign-up is refused
      const client = service.newClientApp();
      await assert.rejects(
        client.signUpWithCredential({
          email: newEmail("admin-project"),
          password: "correct horse battery staple",
          noRedirect: true,
          noVerificationCallback: true,
        }),
        (error) => error.errorCode === "SIGN_UP_NOT_ENABLED",
      );
    });
  });
}
