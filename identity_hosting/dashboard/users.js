// Users: the searchable, paginated list, and one user with every field, their teams and sessions, and edits.

import { API_BASE, api, credentials, handlerUrl, segment } from "./api.js";
import { linkedAccountsCard } from "./oauth.js"; // OAuth accounts
import {
  avatar,
  badge,
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

// The list's state survives going to a user and back (kept in memory, never in the URL).
const list = { query: "", limit: 25, cursors: [null], page: 0 };
const PAGE_SIZES = [10, 25, 50, 100];

export function userLabel(user) {
  return user.display_name || user.primary_email || (user.is_anonymous ? "Anonymous user" : user.id);
}

function userBadges(user) {
  return [
    user.restricted_by_admin ? badge("restricted by admin", "danger") : null,
    !user.restricted_by_admin && user.is_restricted ? badge("restricted", "danger") : null,
    user.is_anonymous ? badge("anonymous") : null,
    user.primary_email && !user.primary_email_verified ? badge("e-mail not verified", "warn") : null,
    user.primary_email && user.primary_email_verified ? badge("verified", "ok") : null,
    user.has_password ? badge("password") : null,
    user.requires_totp_mfa ? badge("2FA") : null,
    user.passkey_auth_enabled ? badge("passkey") : null,
  ];
}

// ----------------------------------------------------------------------------------------------------------
// The list

export function renderUsers(view) {
  const searchInput = h("input", {
    id: "user-search",
    type: "search",
    value: list.query,
    placeholder: "E-mail, display name or user id",
    autocomplete: "off",
    spellcheck: "false",
  });
  const limitSelect = h(
    "select",
    { id: "user-limit" },
    PAGE_SIZES.map((size) => h("option", { value: String(size), selected: size === list.limit }, String(size))),
  );
  const results = h("div", { id: "users-results" });

  const searchForm = form(
    { id: "users-search-form", class: "toolbar" },
    () => {
      list.query = searchInput.value.trim();
      list.limit = Number(limitSelect.value);
      list.cursors = [null];
      list.page = 0;
      load();
    },
    field("Search", searchInput),
    field("Per page", limitSelect),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "user-search-submit" }, "Search")),
  );

  function load() {
    return section(
      results,
      "users",
      () =>
        api("GET", "/users", {
          query: {
            limit: list.limit,
            cursor: list.cursors[list.page],
            query: list.query,
            include_restricted: "true",
            include_anonymous: "true",
          },
        }),
      renderPage,
      view.isCurrent,
    );
  }

  function renderPage(data) {
    const items = data.items ?? [];
    const nextCursor = data.pagination?.next_cursor ?? null;
    let content;
    if (items.length === 0) {
      let text = "No users yet.";
      if (list.page > 0) text = "No more users.";
      else if (list.query) text = `No user matches “${list.query}”.`;
      content = empty(text);
    } else {
      content = h(
        "table",
        { class: "table clickable", id: "users-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "User"), h("th", {}, "Id"), h("th", {}, "Signed up"), h("th", {}, "State"))),
        h(
          "tbody",
          {},
          items.map((user) =>
            h(
              "tr",
              { "data-user-id": user.id, onclick: (event) => {
                if (!(event.target instanceof HTMLAnchorElement)) view.navigate(`users/${user.id}`);
              } },
              h(
                "td",
                {},
                h("a", { href: `#/users/${encodeURIComponent(user.id)}`, class: "row-link" }, userLabel(user)),
                user.display_name && user.primary_email ? h("div", { class: "muted small" }, user.primary_email) : null,
              ),
              h("td", { class: "mono small" }, user.id),
              h("td", { class: "small" }, formatTime(user.signed_up_at_millis)),
              h("td", {}, userBadges(user)),
            ),
          ),
        ),
      );
    }
    const pager = h(
      "div",
      { class: "pager" },
      h(
        "button",
        {
          type: "button",
          id: "users-previous",
          disabled: list.page === 0,
          onclick: () => {
            list.page -= 1;
            load();
          },
        },
        "← Previous",
      ),
      h("span", { id: "users-page" }, `Page ${list.page + 1}`, items.length ? ` · ${items.length} shown` : ""),
      h(
        "button",
        {
          type: "button",
          id: "users-next",
          disabled: nextCursor === null,
          onclick: () => {
            list.cursors = list.cursors.slice(0, list.page + 1);
            list.cursors.push(nextCursor);
            list.page += 1;
            load();
          },
        },
        "Next →",
      ),
    );
    return [content, pager];
  }

  fill(
    view.root,
    h(
      "section",
      { class: "card", id: "users-view" },
      h("h2", {}, "Users"),
      h("p", { class: "muted" }, "Every user of the project, restricted and anonymous ones included, oldest first."),
      searchForm,
      results,
    ),
    createUserCard(view, load),
  );
  load();
}

/** A new user (POST /users): an e-mail that signs in, a display name and a password, each optional. */
function createUserCard(view, reload) {
  const email = h("input", { id: "new-user-email", type: "email", autocomplete: "off", spellcheck: "false", placeholder: "ada@example.com" });
  const verified = h("input", { id: "new-user-email-verified", type: "checkbox" });
  const name = h("input", { id: "new-user-display-name", type: "text", autocomplete: "off" });
  const password = h("input", { id: "new-user-password", type: "password", autocomplete: "new-password" });
  const status = h("div", { id: "new-user-status", "aria-live": "polite" });
  const element = form(
    { id: "new-user-form", class: "stack" },
    () =>
      busy(element, async () => {
        const body = {};
        const address = email.value.trim();
        if (address) {
          body.primary_email = address;
          body.primary_email_auth_enabled = true;
          body.primary_email_verified = verified.checked;
        }
        if (name.value.trim()) body.display_name = name.value.trim();
        if (password.value) body.password = password.value;
        let user;
        try {
          user = await api("POST", "/users", { body });
        } catch (error) {
          notice(status, "error", error);
          return;
        }
        for (const input of [email, name, password]) input.value = "";
        verified.checked = false;
        fill(
          status,
          h(
            "p",
            { class: "state state-ok", role: "status" },
            "Created ",
            h("a", { href: `#/users/${encodeURIComponent(user.id)}`, id: "new-user-link", "data-user-id": user.id }, userLabel(user)),
            ".",
          ),
        );
        if (view.isCurrent()) reload();
      }),
    h(
      "div",
      { class: "toolbar" },
      field("E-mail", email, "Signs in with a code, a link or the password."),
      field("Display name", name, "Optional."),
      field("Password", password, "Optional."),
    ),
    h("label", { class: "check" }, verified, h("span", {}, "The e-mail is verified")),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "new-user-submit" }, "Create user")),
    status,
  );
  return h("section", { class: "card", id: "new-user" }, h("h3", {}, "Create a user"), element);
}

// ----------------------------------------------------------------------------------------------------------
// One user

export function renderUser(view, userId) {
  const body = h("div", { id: "user-view" });
  fill(view.root, h("p", { class: "breadcrumbs" }, h("a", { href: "#/users", id: "back-to-users" }, "← Users")), body);
  section(body, "the user", () => api("GET", `/users/${segment(userId)}`), (user) => userPage(view, user), view.isCurrent);
}

function userPage(view, initial) {
  let user = initial;
  const summary = h("section", { class: "card", id: "user-summary" });
  const fields = h("section", { class: "card", id: "user-fields" });
  const nameForm = h("div");
  const emailForm = h("div");
  const restrictionForm = h("div");
  const metadataForm = h("div");

  function show(next) {
    user = next;
    fill(summary, summaryContent(user));
    fill(fields, h("h3", {}, "Every field"), fieldList(user));
  }

  function patch(target, body, done) {
    return api("PATCH", `/users/${segment(user.id)}`, { body }).then(
      (updated) => {
        show(updated);
        notice(target, "ok", done);
        return updated;
      },
      (error) => {
        notice(target, "error", error);
        return null;
      },
    );
  }

  // Display name
  {
    const input = h("input", { id: "user-display-name", type: "text", value: user.display_name ?? "", autocomplete: "off" });
    const status = h("div", { id: "user-display-name-status", "aria-live": "polite" });
    const element = form(
      { id: "user-display-name-form", class: "stack" },
      () => busy(element, () => patch(status, { display_name: input.value === "" ? null : input.value }, "Display name saved.")),
      field("Display name", input, "Empty clears it."),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "user-display-name-save" }, "Save display name")),
      status,
    );
    fill(nameForm, h("h3", {}, "Profile"), element);
  }

  // E-mail verification
  {
    const status = h("div", { id: "user-email-status", "aria-live": "polite" });
    if (!user.primary_email) {
      fill(emailForm, h("h3", {}, "E-mail verification"), empty("This user has no primary e-mail."));
    } else {
      const checkbox = h("input", { id: "user-email-verified", type: "checkbox", checked: Boolean(user.primary_email_verified) });
      const element = form(
        { id: "user-email-form", class: "stack" },
        () =>
          busy(element, () =>
            patch(
              status,
              { primary_email_verified: checkbox.checked },
              checkbox.checked ? "E-mail marked verified." : "E-mail marked not verified.",
            ),
          ),
        h("label", { class: "check" }, checkbox, h("span", {}, "Primary e-mail ", h("strong", {}, user.primary_email), " is verified")),
        h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "user-email-save" }, "Save verification")),
        status,
      );
      fill(emailForm, h("h3", {}, "E-mail verification"), element);
    }
  }

  // Restriction
  {
    const checkbox = h("input", { id: "user-restricted", type: "checkbox", checked: Boolean(user.restricted_by_admin) });
    const reason = h("input", { id: "user-restriction-reason", type: "text", value: user.restricted_by_admin_reason ?? "", autocomplete: "off" });
    const details = h("textarea", { id: "user-restriction-details", rows: "3" });
    details.value = user.restricted_by_admin_private_details ?? "";
    const status = h("div", { id: "user-restriction-status", "aria-live": "polite" });
    const sync = () => {
      reason.disabled = !checkbox.checked;
      details.disabled = !checkbox.checked;
    };
    checkbox.addEventListener("change", sync);
    sync();
    const element = form(
      { id: "user-restriction-form", class: "stack" },
      () => {
        const body = checkbox.checked
          ? {
              restricted_by_admin: true,
              restricted_by_admin_reason: reason.value.trim() || null,
              restricted_by_admin_private_details: details.value.trim() || null,
            }
          : { restricted_by_admin: false };
        return busy(element, async () => {
          const updated = await patch(status, body, checkbox.checked ? "User restricted." : "Restriction lifted.");
          if (updated) {
            reason.value = updated.restricted_by_admin_reason ?? "";
            details.value = updated.restricted_by_admin_private_details ?? "";
          }
        }).then(sync);
      },
      h("label", { class: "check" }, checkbox, h("span", {}, "Restricted by an admin")),
      field("Reason (the user can see it)", reason),
      field("Private details (admins only)", details),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "user-restriction-save" }, "Save restriction")),
      status,
    );
    fill(restrictionForm, h("h3", {}, "Restriction"), element);
  }

  // Metadata: a JSON editor per kind; everything is parsed first and nothing is sent while any is invalid.
  {
    const kinds = [
      ["client_metadata", "Client metadata", "the user and client code read and write it"],
      ["client_read_only_metadata", "Client read-only metadata", "clients read it, servers write it"],
      ["server_metadata", "Server metadata", "servers only"],
    ];
    const status = h("div", { id: "user-metadata-status", "aria-live": "polite" });
    const editors = kinds.map(([name, label, hint]) => {
      const area = h("textarea", {
        id: `user-${name.replaceAll("_", "-")}`,
        class: "json-editor",
        rows: "5",
        spellcheck: "false",
        "data-field": name,
      });
      area.value = user[name] === null || user[name] === undefined ? "" : JSON.stringify(user[name], null, 2);
      area.addEventListener("input", () => area.removeAttribute("aria-invalid"));
      return { name, area, control: field(label, area, `JSON; empty means null. ${hint[0].toUpperCase()}${hint.slice(1)}.`) };
    });
    const element = form(
      { id: "user-metadata-form", class: "stack" },
      () => {
        const body = {};
        const problems = [];
        for (const { name, area } of editors) {
          const text = area.value.trim();
          let value = null;
          if (text !== "") {
            try {
              value = JSON.parse(text);
            } catch (error) {
              area.setAttribute("aria-invalid", "true");
              problems.push(`${name}: ${error.message}`);
              continue;
            }
          }
          area.removeAttribute("aria-invalid");
          if (JSON.stringify(value) !== JSON.stringify(user[name] ?? null)) body[name] = value;
        }
        if (problems.length) {
          notice(status, "error", { code: "INVALID_JSON", message: `Not sent, fix the JSON first. ${problems.join("; ")}` });
          return null;
        }
        if (Object.keys(body).length === 0) {
          notice(status, "ok", "Nothing changed.");
          return null;
        }
        return busy(element, () => patch(status, body, "Metadata saved."));
      },
      editors.map((editor) => editor.control),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "user-metadata-save" }, "Save metadata")),
      status,
    );
    fill(metadataForm, h("h3", {}, "Metadata"), element);
  }

  const signIn = h("section", { class: "card", id: "user-sign-in" });
  signInCard(view, signIn, () => user, patch);
  const teams = h("section", { class: "card", id: "user-teams" });
  const sessions = h("section", { class: "card", id: "user-sessions" });
  const danger = dangerZone(view, () => user);
  show(user);
  loadTeams(view, teams, user.id);
  const reloadSessions = sessionsCard(view, sessions, () => user);
  signIn.addEventListener("session-started", () => reloadSessions());
  // API keys
  const apiKeys = h("section", { class: "card", id: "user-api-keys" });
  apiKeysCard(view, apiKeys, () => user);
  // Contact channels and project permissions
  const channels = h("section", { class: "card", id: "user-channels" });
  channelsCard(view, channels, () => user, (updated) => show(updated));
  const permissions = h("section", { class: "card", id: "user-project-permissions" });
  projectPermissionsCard(view, permissions, () => user);
  // OAuth accounts: the user's linked provider accounts
  const linkedAccounts = h("section", { class: "card", id: "user-linked-accounts" });
  linkedAccountsCard(view, linkedAccounts, () => user);
  // passkeys
  const passkeys = h("section", { class: "card", id: "user-passkeys" });
  passkeysCard(view, passkeys, () => user, (updated) => show(updated));

  return [
    summary,
    h("div", { class: "grid" }, h("div", { class: "column" }, fields), h("div", { class: "column" }, h("section", { class: "card", id: "user-edits" }, nameForm, emailForm, restrictionForm, metadataForm))),
    signIn,
    h("div", { class: "grid" }, h("div", { class: "column" }, teams), h("div", { class: "column" }, sessions)),
    h("div", { class: "grid" }, h("div", { class: "column" }, channels), h("div", { class: "column" }, permissions)),
    apiKeys,
    linkedAccounts, // OAuth accounts
    passkeys,
    danger,
  ];
}

// ----------------------------------------------------------------------------------------------------------
// Passkeys: the user's registered WebAuthn credentials (GET /users/{id}/passkeys), removed by
// PATCH /users/{id} {"passkey_auth_enabled": false}

function passkeysCard(view, container, currentUser, onChanged) {
  const status = h("div", { id: "passkeys-status", "aria-live": "polite" });
  const body = h("div", { id: "passkeys-body" });

  async function remove() {
    const agreed = await confirmAction({
      title: "Remove this user's passkey?",
      message: "The passkey will no longer sign this user in; they can register a new one once signed in.",
      confirmLabel: "Remove passkey",
    });
    if (!agreed) return;
    try {
      const updated = await api("PATCH", `/users/${segment(currentUser().id)}`, { body: { passkey_auth_enabled: false } });
      notice(status, "ok", "Passkey removed.");
      onChanged(updated);
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  function load() {
    return section(
      body,
      "passkeys",
      () => api("GET", `/users/${segment(currentUser().id)}/passkeys`),
      (data) => {
        const items = data.items ?? [];
        if (items.length === 0) return empty("No passkey.");
        return h(
          "table",
          { class: "table", id: "passkeys-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Credential"), h("th", {}, "Signs in at"), h("th", {}, "Registered"), h("th", {}, "Uses"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            items.map((passkey) =>
              h(
                "tr",
                { "data-passkey-id": passkey.id },
                h("td", { class: "mono small" }, passkey.id, h("div", { class: "muted" }, (passkey.transports ?? []).join(", "))),
                h("td", { class: "mono small" }, passkey.rp_id),
                h("td", { class: "small" }, formatTime(passkey.created_at_millis)),
                h("td", { class: "small" }, String(passkey.sign_count)),
                h("td", { class: "actions" }, h("button", { type: "button", class: "danger small-button remove-passkey", onclick: remove }, "Remove")),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );
  }

  fill(container, h("div", { class: "card-head" }, h("h3", {}, "Passkeys")), status, body);
  load();
}

function summaryContent(user) {
  const restriction = [];
  if (user.restricted_by_admin) {
    restriction.push(
      h(
        "div",
        { class: "banner danger", id: "user-restriction-banner", role: "note" },
        h("strong", {}, "Restricted by an admin."),
        " Reason: ",
        h("span", { id: "user-restriction-reason-shown" }, user.restricted_by_admin_reason ?? "none given"),
        user.restricted_by_admin_private_details
          ? h("div", { class: "small" }, "Private details: ", h("span", { id: "user-restriction-details-shown" }, user.restricted_by_admin_private_details))
          : null,
      ),
    );
  } else if (user.is_restricted) {
    restriction.push(
      h(
        "div",
        { class: "banner warn", id: "user-restriction-banner", role: "note" },
        h("strong", {}, "Restricted."),
        " Reason: ",
        h("span", { id: "user-restriction-reason-shown" }, user.restricted_reason?.type ?? "unknown"),
      ),
    );
  } else {
    restriction.push(h("p", { class: "muted", id: "user-restriction-banner" }, "Not restricted."));
  }
  return [
    h(
      "div",
      { class: "summary-head" },
      avatar(user.profile_image_url, userLabel(user)),
      h(
        "div",
        {},
        h("h2", { id: "user-title" }, userLabel(user)),
        h("div", { class: "muted" }, user.primary_email ?? "no e-mail", " · ", h("span", { class: "mono" }, user.id)),
        h("div", { class: "badges" }, userBadges(user)),
      ),
    ),
    restriction,
  ];
}

function loadTeams(view, container, userId) {
  fill(container, h("h3", {}, "Teams"));
  const body = h("div");
  container.append(body);
  section(
    body,
    "teams",
    () => api("GET", "/teams", { query: { user_id: userId } }),
    (data) => {
      const items = data.items ?? [];
      if (items.length === 0) return empty("Not a member of any team.");
      return h(
        "ul",
        { class: "plain-list", id: "user-teams-list" },
        items.map((team) =>
          h(
            "li",
            {},
            h("a", { href: `#/teams/${encodeURIComponent(team.id)}` }, team.display_name || team.id),
            " ",
            h("span", { class: "mono muted small" }, team.id),
          ),
        ),
      );
    },
    view.isCurrent,
  );
}

function sessionsCard(view, container, currentUser) {
  const status = h("div", { id: "sessions-status", "aria-live": "polite" });
  const body = h("div", { id: "sessions-body" });
  let current = [];
  const revokeAll = h(
    "button",
    {
      type: "button",
      class: "danger",
      id: "revoke-all-sessions",
      disabled: true,
      onclick: async () => {
        const count = current.length;
        const agreed = await confirmAction({
          title: "Revoke every session?",
          message: `${userLabel(currentUser())} will be signed out everywhere: ${count} session${count === 1 ? "" : "s"} will be revoked.`,
          confirmLabel: `Revoke ${count} session${count === 1 ? "" : "s"}`,
        });
        if (!agreed) return;
        const failures = [];
        for (const session of current) {
          try {
            await api("DELETE", `/auth/sessions/${segment(session.id)}`);
          } catch (error) {
            failures.push(error);
          }
        }
        if (failures.length) {
          notice(status, "error", { code: failures[0].code, message: `${failures.length} of ${count} could not be revoked: ${failures[0].message}` });
        } else {
          notice(status, "ok", `${count} session${count === 1 ? "" : "s"} revoked.`);
        }
        load();
      },
    },
    "Revoke all sessions",
  );

  async function revoke(session) {
    const agreed = await confirmAction({
      title: "Revoke this session?",
      message: `The session ${session.id} (created ${formatTime(session.created_at)}) will be signed out; its refresh token stops working.`,
      confirmLabel: "Revoke session",
    });
    if (!agreed) return;
    try {
      await api("DELETE", `/auth/sessions/${segment(session.id)}`);
      notice(status, "ok", "Session revoked.");
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  function load() {
    revokeAll.disabled = true;
    return section(
      body,
      "sessions",
      () => api("GET", "/auth/sessions", { query: { user_id: currentUser().id } }),
      (data) => {
        current = data.items ?? [];
        revokeAll.disabled = current.length === 0;
        if (current.length === 0) return empty("No active sessions.");
        return h(
          "table",
          { class: "table", id: "sessions-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Session"), h("th", {}, "Created"), h("th", {}, "Last used"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            current.map((session) =>
              h(
                "tr",
                { "data-session-id": session.id },
                h("td", { class: "mono small" }, session.id, session.is_impersonation ? [" ", badge("impersonation", "warn")] : null),
                h("td", { class: "small" }, formatTime(session.created_at)),
                h("td", { class: "small" }, formatTime(session.last_used_at)),
                h("td", {}, h("button", { type: "button", class: "danger small-button revoke-session", onclick: () => revoke(session) }, "Revoke")),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );
  }

  fill(container, h("div", { class: "card-head" }, h("h3", {}, "Sessions"), revokeAll), status, body);
  load();
  return load;
}

// ----------------------------------------------------------------------------------------------------------
// Sign-in: set the password, mail a reset link or a sign-in code, and start a session as the user (impersonation)

function signInCard(view, container, currentUser, patch) {
  const status = h("div", { id: "sign-in-status", "aria-live": "polite" });
  const impersonation = h("div", { id: "impersonation-result", "aria-live": "polite" });

  const password = h("input", { id: "user-password", type: "password", autocomplete: "new-password" });
  const passwordForm = form(
    { id: "user-password-form", class: "stack" },
    () =>
      busy(passwordForm, async () => {
        if (!password.value) {
          notice(status, "error", { code: "MISSING_FIELDS", message: "Type the new password first." });
          return;
        }
        const updated = await patch(status, { password: password.value }, "Password set.");
        if (updated) password.value = "";
      }),
    field("New password", password, "Replaces the user's password (they keep their sessions)."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "user-password-save" }, "Set password")),
  );

  /** A form that mails the user's primary e-mail a link to `path` (its target editable, checked by the service). */
  function mailForm(id, label, hint, handler, path, done) {
    const callback = h("input", { id: `${id}-callback`, type: "url", autocomplete: "off", spellcheck: "false" });
    handlerUrl(handler).then((url) => {
      if (!callback.value) callback.value = url;
    });
    const element = form(
      { id: `${id}-form`, class: "stack" },
      () =>
        busy(element, async () => {
          const email = currentUser().primary_email;
          if (!email) {
            notice(status, "error", { code: "NO_PRIMARY_EMAIL", message: "This user has no primary e-mail to mail." });
            return;
          }
          try {
            await api("POST", path, { body: { email, callback_url: callback.value.trim() } });
            notice(status, "ok", done(email));
          } catch (error) {
            notice(status, "error", error);
          }
        }),
      field("Link leads to", callback, hint),
      h("div", { class: "actions" }, h("button", { type: "submit", id: `${id}-submit` }, label)),
    );
    return element;
  }

  const minutes = h("input", { id: "impersonate-minutes", type: "number", min: "1", max: "1440", value: "60" });
  const impersonateForm = form(
    { id: "impersonate-form", class: "stack" },
    () =>
      busy(impersonateForm, async () => {
        const user = currentUser();
        const lifetime = Math.round(Number(minutes.value) * 60 * 1000);
        let tokens;
        try {
          tokens = await api("POST", "/auth/sessions", {
            body: { user_id: user.id, is_impersonation: true, ...(lifetime > 0 ? { expires_in_millis: lifetime } : {}) },
          });
        } catch (error) {
          notice(status, "error", error);
          return;
        }
        fill(impersonation, impersonationBanner(user, tokens));
        notice(status, "ok", `Impersonation session started for ${userLabel(user)}.`);
        container.dispatchEvent(new CustomEvent("session-started"));
      }),
    field("Lasts (minutes)", minutes),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "danger", id: "impersonate-submit" }, "Impersonate")),
  );

  fill(
    container,
    h("h3", {}, "Sign-in"),
    status,
    h(
      "div",
      { class: "grid" },
      h("div", { class: "column" }, passwordForm),
      h(
        "div",
        { class: "column" },
        mailForm("reset-password", "Send password reset", "Where the mailed reset link opens.", "password-reset", "/auth/password/send-reset-code", (email) => `A password reset link was mailed to ${email}.`),
        mailForm("sign-in-code", "Send sign-in code", "Where the mailed magic link opens; the mail also carries the code.", "magic-link-callback", "/auth/otp/send-sign-in-code", (email) => `A sign-in code was mailed to ${email}.`),
      ),
    ),
    h("h4", {}, "Impersonate"),
    h("p", { class: "muted" }, "Start a session as this user, marked as an impersonation (listed with the sessions, revocable there)."),
    impersonateForm,
    impersonation,
  );
}

/** The tokens of an impersonation session, and a request that uses them, in read-only boxes (shown once). */
function impersonationBanner(user, tokens) {
  const project = credentials.get()?.projectId ?? "";
  const snippet = [
    `curl ${API_BASE}/users/me \\`,
    "  -H 'x-service-access-type: client' \\",
    `  -H 'x-service-project-id: ${project}' \\`,
    `  -H 'x-service-access-token: ${tokens.access_token}'`,
  ].join("\n");
  const box = (id, label, value) =>
    field(label, h("input", { id, type: "text", readOnly: true, value, class: "mono", spellcheck: "false", autocomplete: "off" }));
  const code = h("textarea", { id: "impersonation-snippet", class: "json-editor", rows: "6", readOnly: true, spellcheck: "false" });
  code.value = snippet;
  return h(
    "div",
    { class: "banner warn", id: "impersonation-banner", role: "note" },
    h("strong", {}, `Impersonation session for ${userLabel(user)}`),
    h("p", {}, "Anything done with these tokens is done as this user. They are shown only here; revoke the session when done."),
    box("impersonation-access-token", "Access token", tokens.access_token),
    box("impersonation-refresh-token", "Refresh token", tokens.refresh_token),
    field("Try it", code, "The user, as the service sees this session (add the publishable client key if the project requires it)."),
    h("div", { class: "actions" }, h("button", { type: "button", id: "impersonation-done", onclick: (event) => event.target.closest("#impersonation-banner").remove() }, "Done")),
  );
}

// ----------------------------------------------------------------------------------------------------------
// API keys: the user's keys (newest first, by their last four characters), each revocable

function apiKeysCard(view, container, currentUser) {
  const status = h("div", { id: "api-keys-status", "aria-live": "polite" });
  const body = h("div", { id: "api-keys-body" });

  async function revoke(key) {
    const agreed = await confirmAction({
      title: "Revoke this API key?",
      message: `The key "${key.description}" (…${key.value.last_four}) will stop working at once. Keys cannot be un-revoked.`,
      confirmLabel: "Revoke key",
    });
    if (!agreed) return;
    try {
      await api("PATCH", `/user-api-keys/${segment(key.id)}`, { body: { revoked: true } });
      notice(status, "ok", "API key revoked.");
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  function state(key) {
    if (key.manually_revoked_at_millis !== undefined) return badge(`revoked ${formatTime(key.manually_revoked_at_millis)}`, "warn");
    if (key.expires_at_millis !== undefined && key.expires_at_millis <= Date.now()) return badge("expired", "warn");
    return badge(key.expires_at_millis !== undefined ? `valid until ${formatTime(key.expires_at_millis)}` : "valid", "ok");
  }

  function load() {
    return section(
      body,
      "API keys",
      async () => {
        // Asked only when the project allows user API keys: the service refuses the listing otherwise.
        const project = await api("GET", "/projects/current");
        if (project.config?.allow_user_api_keys === false) return { off: true };
        try {
          return await api("GET", "/user-api-keys", { query: { user_id: currentUser().id } });
        } catch (error) {
          // A plain 400 (no known error): the project has user API keys switched off.
          if (error.status === 400 && error.code === "HTTP_400") return { off: true };
          throw error;
        }
      },
      (data) => {
        if (data.off) return empty("User API keys are off for this project (allow_user_api_keys in the project view).");
        const keys = data.items ?? [];
        if (keys.length === 0) return empty("No API keys.");
        return h(
          "table",
          { class: "table", id: "api-keys-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Description"), h("th", {}, "Key"), h("th", {}, "Created"), h("th", {}, "State"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            keys.map((key) =>
              h(
                "tr",
                { "data-api-key-id": key.id },
                h("td", {}, key.description, key.is_public ? [" ", badge("public")] : null),
                h("td", { class: "mono small" }, `${key.is_public ? "pk" : "sk"}_…${key.value.last_four}`),
                h("td", { class: "small" }, formatTime(key.created_at_millis)),
                h("td", { class: "small" }, state(key)),
                h(
                  "td",
                  {},
                  key.manually_revoked_at_millis === undefined
                    ? h("button", { type: "button", class: "danger small-button revoke-api-key", onclick: () => revoke(key) }, "Revoke")
                    : null,
                ),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );
  }

  fill(container, h("div", { class: "card-head" }, h("h3", {}, "API keys")), status, body);
  load();
}

// Contact channels: the user's e-mail addresses (the primary one is the user's primary e-mail), each verifiable and
// removable, any of them made primary.

function channelsCard(view, container, currentUser, userChanged) {
  const status = h("div", { id: "channels-status", "aria-live": "polite" });
  const body = h("div", { id: "channels-body" });

  async function change(channel, method, patch, done) {
    if (method === "DELETE") {
      const agreed = await confirmAction({
        title: "Remove this address?",
        message: `${channel.value} will no longer belong to this user${channel.used_for_auth ? " nor sign them in" : ""}.`,
        confirmLabel: "Remove address",
      });
      if (!agreed) return;
    }
    try {
      const path = `/contact-channels/${segment(currentUser().id)}/${segment(channel.id)}`;
      await api(method, path, method === "DELETE" ? {} : { body: patch });
      notice(status, "ok", done);
      // The primary channel is the user's primary e-mail: show the user as it is now.
      userChanged(await api("GET", `/users/${segment(currentUser().id)}`));
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  function load() {
    return section(
      body,
      "contact channels",
      () => api("GET", "/contact-channels", { query: { user_id: currentUser().id } }),
      (data) => {
        const items = data.items ?? [];
        if (items.length === 0) return empty("No e-mail addresses.");
        return h(
          "table",
          { class: "table", id: "channels-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Address"), h("th", {}, "State"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            items.map((channel) =>
              h(
                "tr",
                { "data-channel-id": channel.id },
                h("td", { class: "mono small" }, channel.value),
                h(
                  "td",
                  { class: "small" },
                  channel.is_primary ? [badge("primary", "ok"), " "] : null,
                  badge(channel.is_verified ? "verified" : "unverified", channel.is_verified ? "ok" : "warn"),
                  channel.used_for_auth ? [" ", badge("signs in")] : null,
                ),
                h(
                  "td",
                  { class: "actions" },
                  channel.is_verified
                    ? null
                    : h("button", { type: "button", class: "small-button verify-channel", onclick: () => change(channel, "PATCH", { is_verified: true }, "Address marked verified.") }, "Mark verified"),
                  channel.is_primary
                    ? null
                    : h("button", { type: "button", class: "small-button make-primary", onclick: () => change(channel, "PATCH", { is_primary: true }, "Primary e-mail changed.") }, "Make primary"),
                  h("button", { type: "button", class: "danger small-button remove-channel", onclick: () => change(channel, "DELETE", null, "Address removed.") }, "Remove"),
                ),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );
  }

  fill(container, h("div", { class: "card-head" }, h("h3", {}, "E-mail addresses")), status, body);
  load();
}

// Project permissions: what the user holds directly (granted and revoked here), and what that gives them with the
// contained permissions.

function projectPermissionsCard(view, container, currentUser) {
  const status = h("div", { id: "project-permissions-status", "aria-live": "polite" });
  const body = h("div", { id: "project-permissions-body" });
  const input = h("input", { id: "grant-permission-id", type: "text", autocomplete: "off", placeholder: "permission id" });
  const grantForm = form(
    { id: "grant-permission-form", class: "stack" },
    () =>
      busy(grantForm, async () => {
        const id = input.value.trim();
        if (!id) return;
        try {
          await api("POST", `/project-permissions/${segment(currentUser().id)}/${segment(id)}`, { body: {} });
          notice(status, "ok", `Granted ${id}.`);
          input.value = "";
        } catch (error) {
          notice(status, "error", error);
        }
        load();
      }),
    field("Grant a project permission", input),
    h("button", { type: "submit", class: "primary", id: "grant-permission-submit" }, "Grant"),
  );

  async function revoke(id) {
    try {
      await api("DELETE", `/project-permissions/${segment(currentUser().id)}/${segment(id)}`);
      notice(status, "ok", `Revoked ${id}.`);
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  function load() {
    return section(
      body,
      "project permissions",
      async () => {
        const query = { user_id: currentUser().id };
        const [direct, all] = await Promise.all([
          api("GET", "/project-permissions", { query: { ...query, recursive: "false" } }),
          api("GET", "/project-permissions", { query: { ...query, recursive: "true" } }),
        ]);
        return { direct: direct.items ?? [], all: all.items ?? [] };
      },
      ({ direct, all }) => {
        if (all.length === 0) return empty("No project permissions.");
        const held = new Set(direct.map((p) => p.id));
        return h(
          "table",
          { class: "table", id: "project-permissions-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Permission"), h("th", {}, "How"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            all.map((permission) =>
              h(
                "tr",
                { "data-permission-id": permission.id },
                h("td", { class: "mono small" }, permission.id),
                h("td", { class: "small" }, held.has(permission.id) ? badge("granted", "ok") : badge("contained")),
                h(
                  "td",
                  {},
                  held.has(permission.id)
                    ? h("button", { type: "button", class: "danger small-button revoke-permission", onclick: () => revoke(permission.id) }, "Revoke")
                    : null,
                ),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );
  }

  fill(container, h("div", { class: "card-head" }, h("h3", {}, "Project permissions")), status, body, grantForm);
  load();
}

function dangerZone(view, currentUser) {
  const status = h("div", { id: "user-delete-status", "aria-live": "polite" });
  return h(
    "section",
    { class: "card danger-zone", id: "user-danger" },
    h("h3", {}, "Delete"),
    h("p", { class: "muted" }, "Deleting a user removes them, their sessions and memberships. It cannot be undone."),
    h(
      "button",
      {
        type: "button",
        class: "danger",
        id: "user-delete",
        onclick: async () => {
          const user = currentUser();
          const agreed = await confirmAction({
            title: "Delete this user?",
            message: `${userLabel(user)} (${user.id}) will be deleted with their sessions and memberships. This cannot be undone.`,
            confirmLabel: "Delete user",
          });
          if (!agreed) return;
          try {
            await api("DELETE", `/users/${segment(user.id)}`);
          } catch (error) {
            fill(status, errorBox(error));
            return;
          }
          view.navigate("users");
        },
      },
      "Delete user",
    ),
    status,
  );
}
