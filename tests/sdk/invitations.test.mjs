// Team invitations driven by the unmodified official SDK (@stackframe/js), on the memory store and on Redis: a team
// member invites by e-mail (`team.inviteUser`), the invitee reads the mail and joins with the link's code
// (`app.getTeamInvitationDetails`, `verifyTeamInvitationCode`, `acceptTeamInvitation`); another invitee, whose verified
// primary e-mail is the invited address, finds the invitation on their account (`user.listTeamInvitations()`) and
// accepts it (`accept()`); the team lists its open invitations (`team.listInvitations()`) and revokes one.
// Run: cd tests/sdk && node --test invitations.test.mjs

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

import { newEmail, startService } from "./support.mjs";

const INVITATION_CALLBACK = "http://localhost:3000/handler/team-invitation";

for (const backend of ["memory", "redis"]) {
  describe(`team invitations on ${backend}`, () => {
    let service;
    before(async () => {
      service = await startService({ backend });
    });
    after(() => service.stop());

    /** A user signed in through the SDK with a magic link mailed to `email` (so `email` is verified). */
    async function signedIn(email) {
      const app = service.newClientApp();
      const sent = await app.sendMagicLinkEmail(email, { callbackUrl: "http://localhost:3000/handler/magic-link-callback" });
      assert.equal(sent.status, "ok", `sendMagicLinkEmail: ${sent.error}`);
      const signed = await app.signInWithMagicLink(await service.linkCode(email), { noRedirect: true });
      assert.equal(signed.status, "ok", `signInWithMagicLink: ${signed.error}`);
      const user = await app.getUser();
      assert.ok(user, "signed in");
      assert.equal(user.primaryEmailVerified, true);
      return { app, user };
    }

    /** The team `owner` administers (created for them by the server), as the owner's client sees it. */
    async function ownedTeam(owner) {
      const name = `Crew ${randomUUID().slice(0, 8)}`;
      const created = await service.newServerApp().createTeam({ displayName: name, creatorUserId: owner.user.id });
      const team = await owner.user.getTeam(created.id);
      assert.ok(team, "the creator sees the team");
      return team;
    }

    test("an invitation sent by one user is accepted with the mailed code by another", async () => {
      const ada = await signedIn(newEmail("ada"));
      const bobEmail = newEmail("bob");
      const bob = await signedIn(bobEmail);
      const team = await ownedTeam(ada);

      await team.inviteUser({ email: bobEmail, callbackUrl: INVITATION_CALLBACK });
      const [mail] = await service.mails(bobEmail);
      assert.equal(mail.subject, `You have been invited to join ${team.displayName}`);
      const code = await service.linkCode(bobEmail);
      assert.ok(mail.text.includes(`${INVITATION_CALLBACK}?code=${code}`), mail.text);

      const details = await bob.app.getTeamInvitationDetails(code);
      assert.equal(details.status, "ok", `details: ${details.error}`);
      assert.equal(details.data.teamDisplayName, team.displayName);
      const checked = await bob.app.verifyTeamInvitationCode(code);
      assert.equal(checked.status, "ok", `check: ${checked.error}`);

      const accepted = await bob.app.acceptTeamInvitation(code);
      assert.equal(accepted.status, "ok", `accept: ${accepted.error}`);
      const teams = await bob.user.listTeams();
      assert.deepEqual(teams.map((t) => t.id), [team.id], "bob is a member now");

      const again = await bob.app.acceptTeamInvitation(code);
      assert.equal(again.status, "error");
      assert.equal(again.error.errorCode, "VERIFICATION_CODE_ALREADY_USED");
      const unknown = await bob.app.acceptTeamInvitation("x".repeat(45));
      assert.equal(unknown.status, "error");
      assert.equal(unknown.error.errorCode, "VERIFICATION_CODE_NOT_FOUND");
    });

    test("a user accepts an invitation to their verified address from their account; a team revokes one", async () => {
      const ada = await signedIn(newEmail("ada"));
      const carolEmail = newEmail("carol");
      const carol = await signedIn(carolEmail);
      const team = await ownedTeam(ada);
      const strangerEmail = newEmail("stranger");

      await team.inviteUser({ email: carolEmail, callbackUrl: INVITATION_CALLBACK });
      await team.inviteUser({ email: strangerEmail, callbackUrl: INVITATION_CALLBACK });
      const sent = await team.listInvitations();
      assert.deepEqual(sent.map((i) => i.recipientEmail), [carolEmail, strangerEmail]);
      assert.ok(sent.every((i) => i.expiresAt > new Date()), "open for 7 days");

      const received = await carol.user.listTeamInvitations();
      assert.equal(received.length, 1);
      assert.equal(received[0].teamId, team.id);
      assert.equal(received[0].teamDisplayName, team.displayName);
      assert.equal(received[0].recipientEmail, carolEmail);
      await received[0].accept();
      assert.deepEqual((await carol.user.listTeams()).map((t) => t.id), [team.id]);
      assert.deepEqual(await carol.user.listTeamInvitations(), []);

      const open = await team.listInvitations();
      assert.deepEqual(open.map((i) => i.recipientEmail), [strangerEmail], "the accepted one is gone");
      await open[0].revoke();
      assert.deepEqual(await team.listInvitations(), []);
      const revokedCode = await service.linkCode(strangerEmail);
      const stranger = service.newClientApp();
      const refused = await stranger.verifyTeamInvitationCode(revokedCode);
      assert.equal(refused.status, "error");
      assert.equal(refused.error.errorCode, "VERIFICATION_CODE_NOT_FOUND");
    });
  });
}
