// Teams: every team of the project (and a new one), and one team: renamed or deleted (asked first), its members
// with their member profiles and permissions (added, removed after a confirmation, permissions granted and revoked),
// and its open invitations (sent, revoked).

import { api, handlerUrl, segment } from "./api.js";
import {
  avatar,
  busy,
  confirmAction,
  empty,
  errorBox,
  field,
  fieldList,
  fill,
  form,
  formatTime,
  h,
  notice,
  section,
} from "./ui.js";
import { userLabel } from "./users.js";

export function renderTeams(view) {
  const results = h("div", { id: "teams-results" });
  const status = h("div", { id: "new-team-status", "aria-live": "polite" });
  const name = h("input", { id: "new-team-name", type: "text", autocomplete: "off", placeholder: "Engineering" });
  const creator = h("input", { id: "new-team-creator", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "optional" });
  const createForm = form(
    { id: "new-team-form", class: "toolbar" },
    () =>
      busy(createForm, async () => {
        const displayName = name.value.trim();
        if (!displayName) {
          notice(status, "error", { code: "MISSING_FIELDS", message: "Give the new team a display name." });
          return;
        }
        const body = { display_name: displayName };
        try {
          if (creator.value.trim()) body.creator_user_id = await findUserId(creator.value);
          const team = await api("POST", "/teams", { body });
          name.value = "";
          creator.value = "";
          fill(
            status,
            h("p", { class: "state state-ok", role: "status" }, "Created ", h("a", { href: `#/teams/${encodeURIComponent(team.id)}`, id: "new-team-link", "data-team-id": team.id }, team.display_name), "."),
          );
        } catch (error) {
          notice(status, "error", error);
          return;
        }
        if (view.isCurrent()) load();
      }),
    field("New team", name),
    field("Creator (user id or e-mail)", creator, "Becomes its first member, with the creator's default permissions."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "new-team-submit" }, "Create team")),
  );
  fill(
    view.root,
    h(
      "section",
      { class: "card", id: "teams-view" },
      h("h2", {}, "Teams"),
      h("p", { class: "muted" }, "Every team of the project, oldest first."),
      createForm,
      status,
      results,
    ),
  );
  const load = () => section(
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
  load();
}

/**
 * A user's id from what a person typed: a user id as it is, or an e-mail looked up among the users (exactly that
 * primary e-mail). Rejects with the error to show.
 */
async function findUserId(typed) {
  const value = typed.trim();
  if (!value.includes("@")) return value;
  const found = await api("GET", "/users", { query: { query: value, limit: 100, include_restricted: "true", include_anonymous: "true" } });
  const user = (found.items ?? []).find((item) => (item.primary_email ?? "").toLowerCase() === value.toLowerCase());
  if (!user) throw { code: "USER_NOT_FOUND", message: `No user has the primary e-mail ${value}.` };
  return user.id;
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
      const summary = h("section", { class: "card", id: "team-summary" });
      const show = (current) => fill(summary, h("h2", { id: "team-title" }, current.display_name || "(no name)"), fieldList(current));
      show(team);
      return [
        summary,
        h("section", { class: "card", id: "team-edits" }, renameForm(team, show), deleteTeam(view, team)),
        h("section", { class: "card" }, h("h3", {}, "Members"), members),
        h("section", { class: "card" }, h("h3", {}, "Open invitations"), invitations),
      ];
    },
    view.isCurrent,
  );
}

function renameForm(team, show) {
  const input = h("input", { id: "team-display-name", type: "text", autocomplete: "off", value: team.display_name ?? "" });
  const status = h("div", { id: "team-rename-status", "aria-live": "polite" });
  const element = form(
    { id: "team-rename-form", class: "stack" },
    () =>
      busy(element, async () => {
        try {
          const updated = await api("PATCH", `/teams/${segment(team.id)}`, { body: { display_name: input.value.trim() } });
          show(updated);
          notice(status, "ok", `Renamed to ${updated.display_name}.`);
        } catch (error) {
          notice(status, "error", error);
        }
      }),
    field("Display name", input),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "team-rename-save" }, "Rename team")),
    status,
  );
  return [h("h3", {}, "Edit"), element];
}

function deleteTeam(view, team) {
  const status = h("div", { id: "team-delete-status", "aria-live": "polite" });
  return h(
    "div",
    { class: "danger-zone", id: "team-danger" },
    h("h3", {}, "Delete"),
    h("p", { class: "muted" }, "Deleting a team removes its memberships, their permissions and its invitations. It cannot be undone."),
    h(
      "button",
      {
        type: "button",
        class: "danger",
        id: "team-delete",
        onclick: async () => {
          const agreed = await confirmAction({
            title: "Delete this team?",
            message: `${team.display_name || "(no name)"} (${team.id}) will be deleted with its memberships and invitations. This cannot be undone.`,
            confirmLabel: "Delete team",
          });
          if (!agreed) return;
          try {
            await api("DELETE", `/teams/${segment(team.id)}`);
          } catch (error) {
            fill(status, errorBox(error));
            return;
          }
          view.navigate("teams");
        },
      },
      "Delete team",
    ),
    status,
  );
}

function loadMembers(view, container, teamId) {
  const status = h("div", { id: "team-members-status", "aria-live": "polite" });
  const list = h("div", {});
  const userInput = h("input", { id: "add-member-user", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "user id or e-mail" });
  const addForm = form(
    { id: "add-member-form", class: "toolbar" },
    () =>
      busy(addForm, async () => {
        if (!userInput.value.trim()) {
          notice(status, "error", { code: "MISSING_FIELDS", message: "Name the user to add (their id or primary e-mail)." });
          return;
        }
        try {
          const userId = await findUserId(userInput.value);
          await api("POST", `/team-memberships/${segment(teamId)}/${segment(userId)}`, { body: {} });
          notice(status, "ok", `Added ${userInput.value.trim()}.`);
          userInput.value = "";
        } catch (error) {
          notice(status, "error", error);
          return;
        }
        load();
      }),
    field("Add a member", userInput, "They get the team member's default permissions."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "add-member-submit" }, "Add member")),
  );
  fill(container, status, list, addForm);

  let definitions = [];

  async function act(work, done) {
    try {
      await work();
      notice(status, "ok", done);
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  async function remove(profile) {
    const label = userLabel(profile.user);
    const agreed = await confirmAction({
      title: "Remove this member?",
      message: `${label} will leave the team and lose its permissions.`,
      confirmLabel: "Remove member",
    });
    if (!agreed) return;
    await act(() => api("DELETE", `/team-memberships/${segment(teamId)}/${segment(profile.user_id)}`), `Removed ${label}.`);
  }

  function permissionsCell(profile, permissions) {
    if (permissions.error) return errorBox(permissions.error);
    const held = new Set(permissions.items.map((permission) => permission.id));
    const path = (id) => `/team-permissions/${segment(teamId)}/${segment(profile.user_id)}/${segment(id)}`;
    const choices = definitions.filter((definition) => !held.has(definition.id));
    const select = h(
      "select",
      { class: "grant-team-permission-select", "aria-label": "Permission to grant" },
      choices.map((definition) => h("option", { value: definition.id }, definition.id)),
    );
    return [
      permissions.items.length
        ? permissions.items.map((permission) =>
            h(
              "span",
              { class: "badge perm", "data-permission-id": permission.id },
              permission.id,
              h(
                "button",
                {
                  type: "button",
                  class: "badge-remove revoke-team-permission",
                  "aria-label": `Revoke ${permission.id}`,
                  title: `Revoke ${permission.id}`,
                  onclick: () => act(() => api("DELETE", path(permission.id)), `Revoked ${permission.id} from ${userLabel(profile.user)}.`),
                },
                "×",
              ),
            ),
          )
        : h("span", { class: "null" }, "none"),
      choices.length
        ? h(
            "div",
            { class: "inline-grant" },
            select,
            h(
              "button",
              {
                type: "button",
                class: "small-button grant-team-permission",
                onclick: () => act(() => api("POST", path(select.value), { body: {} }), `Granted ${select.value} to ${userLabel(profile.user)}.`),
              },
              "Grant",
            ),
          )
        : null,
    ];
  }

  const load = () => section(
    list,
    "members",
    async () => {
      // One request for the profiles, one for every member's permissions (user_id is optional for admins), one
      // for the permissions that can be granted (direct grants only: recursive=false).
      const [profiles, permissions, defined] = await Promise.all([
        api("GET", "/team-member-profiles", { query: { team_id: teamId } }).then((data) => data.items ?? []),
        api("GET", "/team-permissions", { query: { team_id: teamId, recursive: "false" } }).then(
          (data) => ({ items: data.items ?? [] }),
          (error) => ({ error }),
        ),
        api("GET", "/team-permission-definitions").then(
          (data) => data.items ?? [],
          () => [],
        ),
      ]);
      // The project's own permissions first, then the system ones ($…).
      definitions = [...defined.filter((d) => !d.id.startsWith("$")), ...defined.filter((d) => d.id.startsWith("$"))];
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
          h("tr", {}, h("th", {}, ""), h("th", {}, "Member profile"), h("th", {}, "User"), h("th", {}, "Permissions"), h("th", {}, "")),
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
              h("td", { class: "permissions" }, permissionsCell(profile, permissions)),
              h("td", {}, h("button", { type: "button", class: "danger small-button remove-member", onclick: () => remove(profile) }, "Remove")),
            ),
          ),
        ),
      );
    },
    view.isCurrent,
  );
  load();
}

// --- team invitations ---

function loadInvitations(view, container, teamId) {
  const status = h("div", { id: "team-invitations-status", "aria-live": "polite" });
  const list = h("div", {});
  const email = h("input", { id: "invite-email", type: "email", autocomplete: "off", spellcheck: "false", placeholder: "grace@example.com" });
  const callback = h("input", { id: "invite-callback", type: "url", autocomplete: "off", spellcheck: "false" });
  handlerUrl("team-invitation").then((url) => {
    if (!callback.value) callback.value = url;
  });
  const inviteForm = form(
    { id: "invite-form", class: "toolbar" },
    () =>
      busy(inviteForm, async () => {
        const address = email.value.trim();
        if (!address) {
          notice(status, "error", { code: "MISSING_FIELDS", message: "Type the e-mail address to invite." });
          return;
        }
        try {
          await api("POST", "/team-invitations/send-code", { body: { team_id: teamId, email: address, callback_url: callback.value.trim() } });
          notice(status, "ok", `An invitation was mailed to ${address}.`);
          email.value = "";
        } catch (error) {
          notice(status, "error", error);
          return;
        }
        load();
      }),
    field("Invite by e-mail", email),
    field("Link leads to", callback, "Where the mailed invitation opens (a trusted domain of the project)."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "invite-submit" }, "Send invitation")),
  );
  fill(container, status, list, inviteForm);
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
