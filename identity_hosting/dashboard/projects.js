// The current project's config (read and edit), and the internal project's list of projects (list, create, and
// delete after a confirmation).

import { DEV, INTERNAL_PROJECT_ID, api, credentials, internalCredentials, isLocalhost, segment } from "./api.js";
import { oauthProvidersCard } from "./oauth.js"; // OAuth accounts
import { permissionDefinitionsCard } from "./permissions.js";
import { busy, confirmAction, empty, errorBox, field, fieldList, fill, form, formatTime, h, notice, section } from "./ui.js";

/** Config keys PATCH /projects/current accepts: booleans as checkboxes, lists as JSON. Others are read-only. */
const BOOLEAN_KEYS = [
  ["sign_up_enabled", "Sign-up enabled"],
  ["magic_link_enabled", "Magic links enabled"],
  ["credential_enabled", "Password sign-in enabled"],
  ["passkey_enabled", "Passkey sign-in enabled"],
  ["allow_localhost", "Allow localhost callbacks"],
  ["client_team_creation_enabled", "Clients may create teams"],
  ["client_user_deletion_enabled", "Clients may delete their user"],
  ["create_team_on_sign_up", "Create a team on sign-up"],
  ["require_email_verification", "Require e-mail verification"],
  ["require_publishable_client_key", "Require the publishable client key"],
  // API keys
  ["allow_user_api_keys", "Users may have API keys"],
  ["allow_team_api_keys", "Teams may have API keys"],
];
const JSON_KEYS = [
  ["domains", "Trusted domains", 'A JSON array of {"domain": "https://app.example.com", "handler_path": "/handler"}.'],
  ["team_creator_default_permissions", "Team creator's default permissions", 'A JSON array of permission ids, e.g. ["team_admin"].'],
  ["team_member_default_permissions", "Team member's default permissions", 'A JSON array of permission ids, e.g. ["team_member"].'],
  ["user_default_permissions", "New users' project permissions", 'A JSON array of project permission ids, e.g. ["read_reports"].'],
];

// ----------------------------------------------------------------------------------------------------------
// The current project

export function renderProject(view) {
  const body = h("div", { id: "project-view" });
  fill(view.root, body);
  section(body, "the project", () => api("GET", "/projects/current"), (project) => projectPage(view, project), view.isCurrent);
}

function projectPage(view, initial) {
  let project = initial;
  const summary = h("section", { class: "card", id: "project-summary" });
  const editor = h("section", { class: "card", id: "project-editor" });

  function show(next) {
    project = next;
    fill(
      summary,
      h("h2", { id: "project-title" }, project.display_name),
      h("div", { class: "muted" }, h("span", { class: "mono" }, project.id), " · created ", formatTime(project.created_at_millis)),
      h("h3", {}, "Config"),
      fieldList(project.config ?? {}, { className: "fields config" }),
    );
    fill(editor, editForm(project));
  }

  function editForm(current) {
    const config = current.config ?? {};
    const status = h("div", { id: "project-status", "aria-live": "polite" });
    const nameInput = h("input", { id: "project-display-name", type: "text", value: current.display_name ?? "", autocomplete: "off" });
    const checkboxes = BOOLEAN_KEYS.filter(([key]) => key in config).map(([key, label]) => ({
      key,
      input: h("input", { type: "checkbox", id: `config-${key.replaceAll("_", "-")}`, checked: Boolean(config[key]) }),
      label,
    }));
    const areas = JSON_KEYS.filter(([key]) => key in config).map(([key, label, hint]) => {
      const area = h("textarea", { id: `config-${key.replaceAll("_", "-")}`, class: "json-editor", spellcheck: "false" });
      area.value = JSON.stringify(config[key], null, 2);
      area.rows = Math.min(12, Math.max(3, area.value.split("\n").length));
      area.addEventListener("input", () => area.removeAttribute("aria-invalid"));
      return { key, area, control: field(label, area, hint) };
    });
    const element = form(
      { id: "project-form", class: "stack" },
      () => {
        const patch = {};
        const changes = {};
        const problems = [];
        const name = nameInput.value.trim();
        if (!name) problems.push("display name: must not be empty");
        else if (name !== current.display_name) patch.display_name = name;
        for (const { key, input } of checkboxes) {
          if (input.checked !== Boolean(config[key])) changes[key] = input.checked;
        }
        for (const { key, area } of areas) {
          let value;
          try {
            value = JSON.parse(area.value);
          } catch (error) {
            area.setAttribute("aria-invalid", "true");
            problems.push(`${key}: ${error.message}`);
            continue;
          }
          if (!Array.isArray(value)) {
            area.setAttribute("aria-invalid", "true");
            problems.push(`${key}: must be a JSON array`);
            continue;
          }
          area.removeAttribute("aria-invalid");
          if (JSON.stringify(value) !== JSON.stringify(config[key])) changes[key] = value;
        }
        if (problems.length) {
          notice(status, "error", { code: "INVALID_INPUT", message: `Not sent, fix these first. ${problems.join("; ")}` });
          return null;
        }
        if (Object.keys(changes).length) patch.config = changes;
        if (Object.keys(patch).length === 0) {
          notice(status, "ok", "Nothing changed.");
          return null;
        }
        return busy(element, async () => {
          try {
            const updated = await api("PATCH", "/projects/current", { body: patch });
            show(updated);
            notice(document.getElementById("project-status"), "ok", "Project saved.");
            view.refreshHeader();
          } catch (error) {
            notice(status, "error", error);
          }
        });
      },
      field("Display name", nameInput),
      h("fieldset", { class: "checks" }, h("legend", {}, "Sign-in and teams"), checkboxes.map(({ input, label }) => h("label", { class: "check" }, input, h("span", {}, label)))),
      areas.map((area) => area.control),
      h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "project-save" }, "Save project")),
      status,
    );
    return [h("h3", {}, "Edit"), element];
  }

  show(project);
  return [
    h("div", { class: "grid" }, h("div", { class: "column" }, summary), h("div", { class: "column" }, editor)),
    permissionDefinitionsCard(view), // permissions
    oauthProvidersCard(view, () => project, (updated) => show(updated)), // OAuth accounts
  ];
}

// ----------------------------------------------------------------------------------------------------------
// Projects (the internal project's admin key)

export function renderProjects(view) {
  const body = h("div", { id: "projects-view" });
  fill(view.root, body);
  if (!internalCredentials.get()) {
    fill(body, internalKeyForm(view));
    return;
  }
  const list = h("div", { id: "projects-results" });
  const created = h("div", { id: "project-created", "aria-live": "polite" });
  const status = h("div", { id: "projects-status", "aria-live": "polite" });
  const nameInput = h("input", { id: "new-project-name", type: "text", autocomplete: "off", placeholder: "My app" });
  const createForm = form(
    { id: "new-project-form", class: "toolbar" },
    () => {
      const name = nameInput.value.trim();
      if (!name) {
        fill(created, errorBox({ code: "MISSING_FIELDS", message: "Give the new project a display name." }));
        return null;
      }
      return busy(createForm, async () => {
        let project;
        try {
          project = await api("POST", "/internal/projects", { body: { display_name: name }, auth: internalCredentials.get() });
        } catch (error) {
          fill(created, errorBox(error));
          return;
        }
        nameInput.value = "";
        fill(created, createdKeys(view, project));
        load();
      });
    },
    field("New project", nameInput),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "new-project-submit" }, "Create project")),
  );

  // The internal project is never listed (nor deleted: the service refuses it); the dev project may be, and dev
  // mode makes it again, empty, at the next request that names it.
  async function remove(project) {
    const agreed = await confirmAction({
      title: "Delete this project?",
      message:
        `${project.display_name} (${project.id}) will be deleted with every user, team, key and setting it has. This cannot be undone.` +
        (project.id === DEV.projectId ? " Dev mode makes the dev project again, empty, at its next request." : ""),
      confirmLabel: "Delete project",
    });
    if (!agreed) return;
    try {
      await api("DELETE", `/internal/projects/${segment(project.id)}`, { auth: internalCredentials.get() });
      notice(status, "ok", `Project “${project.display_name}” deleted.`);
      if (credentials.get()?.projectId === project.id) {
        credentials.clear();
        view.refreshHeader();
      }
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  function load() {
    return section(
      list,
      "projects",
      () => api("GET", "/internal/projects", { auth: internalCredentials.get() }),
      (data) => {
        const items = data.items ?? [];
        if (items.length === 0) return empty("No projects.");
        const connected = credentials.get()?.projectId;
        return h(
          "table",
          { class: "table", id: "projects-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Project"), h("th", {}, "Id"), h("th", {}, "Created"), h("th", {}, "Sign-up"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            items.map((project) =>
              h(
                "tr",
                { "data-project-id": project.id },
                h("td", {}, h("strong", {}, project.display_name), project.id === connected ? [" ", h("span", { class: "badge ok" }, "connected")] : null),
                h("td", { class: "mono small" }, project.id),
                h("td", { class: "small" }, formatTime(project.created_at_millis)),
                h("td", { class: "small" }, project.config?.sign_up_enabled ? "open" : "closed"),
                h("td", {}, h("button", { type: "button", class: "danger small-button delete-project", onclick: () => remove(project) }, "Delete")),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );
  }

  fill(
    body,
    h(
      "section",
      { class: "card" },
      h(
        "div",
        { class: "card-head" },
        h("h2", {}, "Projects"),
        h(
          "button",
          {
            type: "button",
            id: "forget-internal-key",
            onclick: () => {
              internalCredentials.clear();
              renderProjects(view);
            },
          },
          "Forget internal key",
        ),
      ),
      h("p", { class: "muted" }, "Every project of this service (project id ", h("code", {}, INTERNAL_PROJECT_ID), ", internal admin key)."),
      createForm,
      created,
      status,
      list,
    ),
  );
  load();
}

function createdKeys(view, project) {
  const keys = [
    ["Publishable client key", project.publishable_client_key],
    ["Secret server key", project.secret_server_key],
    ["Super secret admin key", project.super_secret_admin_key],
  ];
  return h(
    "div",
    { class: "banner ok", id: "created-project-keys" },
    h("strong", {}, `Project “${project.display_name}” created.`),
    h("p", {}, "Copy its keys now: they are shown only once."),
    h("dl", { class: "fields" }, h("dt", {}, "Project id"), h("dd", { class: "mono" }, project.id), keys.map(([label, value]) => [h("dt", {}, label), h("dd", { class: "mono" }, value)])),
    h(
      "button",
      {
        type: "button",
        class: "primary",
        id: "administer-created-project",
        onclick: () => {
          credentials.set({ projectId: project.id, adminKey: project.super_secret_admin_key });
          view.refreshHeader();
          view.navigate("users");
        },
      },
      "Administer this project",
    ),
  );
}

function internalKeyForm(view) {
  const keyInput = h("input", { id: "internal-admin-key", type: "password", autocomplete: "off", spellcheck: "false", placeholder: "sak_…" });
  const status = h("div", { id: "internal-status", "aria-live": "polite" });
  async function connect(adminKey, element) {
    adminKey = adminKey.trim();
    if (!adminKey) {
      fill(status, errorBox({ code: "MISSING_FIELDS", message: "Enter the internal project's admin key." }));
      return;
    }
    await busy(element, async () => {
      try {
        await api("GET", "/internal/projects", { auth: { projectId: INTERNAL_PROJECT_ID, adminKey } });
      } catch (error) {
        fill(status, errorBox(error));
        return;
      }
      internalCredentials.set(adminKey);
      renderProjects(view);
    });
  }
  const element = form(
    { id: "internal-key-form", class: "stack" },
    () => connect(keyInput.value, element),
    field("Internal admin key", keyInput, "The admin key of the project “internal”; kept in this browser tab only."),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", class: "primary", id: "internal-key-submit" }, "Show projects"),
      isLocalhost()
        ? h(
            "button",
            {
              type: "button",
              id: "internal-dev",
              onclick: () => {
                keyInput.value = DEV.internalAdminKey;
                connect(DEV.internalAdminKey, element);
              },
            },
            "Use dev internal key",
          )
        : null,
    ),
    status,
  );
  return h(
    "section",
    { class: "card narrow" },
    h("h2", {}, "Projects"),
    h("p", { class: "muted" }, "Listing and creating projects takes the internal project's admin key."),
    element,
  );
}
