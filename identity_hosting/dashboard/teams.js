// Teams: every team of the project, and one team with its members, their member profiles and permissions, and its
// open invitations (revocable).

import { api, segment } from "./api.js";
import { avatar, badge, confirmAction, empty, errorBox, fieldList, fill, formatTime, h, notice, section } from "./ui.js";
import { userLabel } from "./users.js";

export function renderTeams(view) {
  const results = h("div", { id: "teams-results" });
  fill(
    view.root,
    h(
      "section",
      { class: "card", id: "teams-view" },
      h("h2", {}, "Teams"),
      h("p", { class: "muted" }, "Every team of the project, oldest first."),
      results,
    ),
  );
  section(
    results,
    "teams",
    () => api("GET", "/teams"),
    (data) => {
      const items = data.items ?? [];
      if (items.length === 0) return empty("No teams yet.");
      return h(
        "table",
        { class: "table clickable", id: "teams-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Team"), h("th", {}, "Id"), h("th", {}, "Created"))),
        h(
          "tbody",
          {},
          items.map((team) =>
            h(
              "tr",
              {
                "data-team-id": team.id,
                onclick: (event) => {
                  if (!(event.target instanceof HTMLAnchorElement)) view.navigate(`teams/${team.id}`);
                },
              },
              h("td", {}, h("a", { href: `#/teams/${encodeURIComponent(team.id)}`, class: "row-link" }, team.display_name || "(no name)")),
              h("td", { class: "mono small" }, team.id),
              h("td", { class: "small" }, formatTime(team.created_at_millis)),
            ),
          ),
        ),
      );
    },
    view.isCurrent,
  );
}

export function renderTeam(view, teamId) {
  const body = h("div", { id: "team-view" });
  fill(view.root, h("p", { class: "breadcrumbs" }, h("a", { href: "#/teams" }, "← Teams")), body);
  section(
    body,
    "the team",
    () => api("GET", `/teams/${segment(teamId)}`),
    (team) => {
      const members = h("div", { id: "team-members" });
      loadMembers(view, members, team.id);
      const invitations = h("div", { id: "team-invitations" });
      loadInvitations(view, invitations, team.id);
      return [
        h(
          "section",
          { class: "card", id: "team-summary" },
          h("h2", { id: "team-title" }, team.display_name || "(no name)"),
          fieldList(team),
        ),
        h("section", { class: "card" }, h("h3", {}, "Members"), members),
        h("section", { class: "card" }, h("h3", {}, "Open invitations"), invitations),
      ];
    },
    view.isCurrent,
  );
}

function loadMembers(view, container, teamId) {
  section(
    container,
    "members",
    async () => {
      // One request for the profiles, one for every member's permissions (user_id is optional for admins).
      const [profiles, permissions] = await Promise.all([
        api("GET", "/team-member-profiles", { query: { team_id: teamId } }).then((data) => data.items ?? []),
        api("GET", "/team-permissions", { query: { team_id: teamId } }).then(
          (data) => ({ items: data.items ?? [] }),
          (error) => ({ error }),
        ),
      ]);
      return profiles.map((profile) => ({
        profile,
        permissions: permissions.error
          ? permissions
          : { items: permissions.items.filter((permission) => permission.user_id === profile.user_id) },
      }));
    },
    (rows) => {
      if (rows.length === 0) return empty("This team has no members.");
      return h(
        "table",
        { class: "table", id: "team-members-table" },
        h(
          "thead",
          {},
          h("tr", {}, h("th", {}, ""), h("th", {}, "Member profile"), h("th", {}, "User"), h("th", {}, "Permissions")),
        ),
        h(
          "tbody",
          {},
          rows.map(({ profile, permissions }) =>
            h(
              "tr",
              { "data-user-id": profile.user_id },
              h(
                "td",
                {},
                avatar(profile.profile_image_url, profile.display_name || userLabel(profile.user), "small-avatar"),
              ),
              h(
                "td",
                {},
                h("div", {}, profile.display_name ?? h("span", { class: "null" }, "no profile name")),
              ),
              h(
                "td",
                {},
                h("a", { href: `#/users/${encodeURIComponent(profile.user_id)}` }, userLabel(profile.user)),
                h("div", { class: "muted small" }, profile.user.primary_email ?? ""),
                h("div", { class: "mono muted small" }, profile.user_id),
              ),
              h(
                "td",
                { class: "permissions" },
                permissions.error
                  ? errorBox(permissions.error)
                  : permissions.items.length
                    ? permissions.items.map((permission) => badge(permission.id, "perm"))
                    : h("span", { class: "null" }, "none"),
              ),
            ),
          ),
        ),
      );
    },
    view.isCurrent,
  );
}

// --- team invitations ---

function loadInvitations(view, container, teamId) {
  const status = h("div", { id: "team-invitations-status" });
  const list = h("div", {});
  fill(container, status, list);
  const load = () =>
    section(
      list,
      "invitations",
      () => api("GET", "/team-invitations", { query: { team_id: teamId } }).then((data) => data.items ?? []),
      (items) => {
        if (items.length === 0) return empty("No open invitations.");
        return h(
          "table",
          { class: "table", id: "team-invitations-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Sent to"), h("th", {}, "Expires"), h("th", {}, "Id"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            items.map((invitation) =>
              h(
                "tr",
                { "data-invitation-id": invitation.id },
                h("td", {}, invitation.recipient_email),
                h("td", { class: "small" }, formatTime(invitation.expires_at_millis)),
                h("td", { class: "mono small" }, invitation.id),
                h(
                  "td",
                  {},
                  h("button", { type: "button", class: "danger", onclick: () => revoke(invitation) }, "Revoke"),
                ),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );

  async function revoke(invitation) {
    const agreed = await confirmAction({
      title: "Revoke this invitation?",
      message: `The link mailed to ${invitation.recipient_email} will no longer let anyone join the team.`,
      confirmLabel: "Revoke invitation",
    });
    if (!agreed) return;
    try {
      await api("DELETE", `/team-invitations/${segment(invitation.id)}`, { query: { team_id: teamId } });
      notice(status, "ok", `The invitation to ${invitation.recipient_email} was revoked.`);
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  load();
}
