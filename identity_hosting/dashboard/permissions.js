// The project's permission definitions, team and project scope: listed, created, replaced (a new id renames the
// definition everywhere) and deleted (asked first), through /team-permission-definitions and
// /project-permission-definitions with the admin key.

import { api } from "./api.js";
import { busy, confirmAction, empty, field, fill, form, h, notice, section } from "./ui.js";

const SCOPES = [
  ["team", "Team permissions"],
  ["project", "Project permissions"],
];

/** The card: one table per scope and a form that creates a definition, or replaces the one whose id it names. */
export function permissionDefinitionsCard(view) {
  const card = h("section", { class: "card", id: "permission-definitions" });
  const tables = h("div", { id: "permission-definitions-results" });
  const status = h("div", { id: "permission-status", "aria-live": "polite" });

  function load() {
    return section(
      tables,
      "permission definitions",
      async () => {
        const [team, project] = await Promise.all(SCOPES.map(([scope]) => api("GET", `/${scope}-permission-definitions`)));
        return { team: team.items ?? [], project: project.items ?? [] };
      },
      (data) => SCOPES.map(([scope, title]) => definitionsTable(scope, title, data[scope])),
      view.isCurrent,
    );
  }

  function definitionsTable(scope, title, items) {
    const custom = items.filter((d) => !d.id.startsWith("$"));
    const system = items.filter((d) => d.id.startsWith("$"));
    return h(
      "div",
      { class: "stack" },
      h("h3", {}, title),
      custom.length === 0
        ? empty(`No ${scope} permissions defined.`)
        : h(
            "table",
            { class: "table", id: `${scope}-definitions-table` },
            h("thead", {}, h("tr", {}, h("th", {}, "Id"), h("th", {}, "Description"), h("th", {}, "Contains"), h("th", {}, ""))),
            h(
              "tbody",
              {},
              custom.map((d) =>
                h(
                  "tr",
                  { "data-permission-id": d.id },
                  h("td", { class: "mono" }, d.id),
                  h("td", {}, d.description ?? ""),
                  h("td", { class: "mono small" }, d.contained_permission_ids.join(", ")),
                  h("td", {}, h("button", { type: "button", class: "danger small-button", onclick: () => remove(scope, d.id) }, "Delete")),
                ),
              ),
            ),
          ),
      system.length ? h("p", { class: "muted small" }, "System permissions: ", h("span", { class: "mono" }, system.map((d) => d.id).join(", "))) : null,
    );
  }

  async function remove(scope, id) {
    const confirmed = await confirmAction({
      title: `Delete ${id}?`,
      message: "It is removed from every definition that contains it, from the default lists and from every user and member holding it.",
      confirmLabel: "Delete permission",
    });
    if (!confirmed) return;
    try {
      await api("DELETE", `/${scope}-permission-definitions/${encodeURIComponent(id)}`);
      notice(status, "ok", `Deleted ${id}.`);
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  const scopeSelect = h(
    "select",
    { id: "permission-scope" },
    SCOPES.map(([scope, title]) => h("option", { value: scope }, title)),
  );
  const idInput = h("input", { id: "permission-id", type: "text", autocomplete: "off", placeholder: "read_reports" });
  const renameInput = h("input", { id: "permission-new-id", type: "text", autocomplete: "off" });
  const descriptionInput = h("input", { id: "permission-description", type: "text", autocomplete: "off" });
  const containedInput = h("input", { id: "permission-contained", type: "text", autocomplete: "off", placeholder: "$read_members, team_member" });
  const editor = form(
    { id: "permission-form", class: "stack" },
    () => {
      const scope = scopeSelect.value;
      const id = idInput.value.trim();
      if (!id) {
        notice(status, "error", { code: "MISSING_FIELDS", message: "Give the permission an id." });
        return null;
      }
      const body = {};
      const description = descriptionInput.value.trim();
      if (description) body.description = description;
      body.contained_permission_ids = containedInput.value
        .split(",")
        .map((part) => part.trim())
        .filter(Boolean);
      const rename = renameInput.value.trim();
      return busy(editor, async () => {
        try {
          const existing = await api("GET", `/${scope}-permission-definitions`);
          const known = (existing.items ?? []).some((d) => d.id === id && !id.startsWith("$"));
          if (known) {
            if (rename) body.id = rename;
            await api("PATCH", `/${scope}-permission-definitions/${encodeURIComponent(id)}`, { body });
            notice(status, "ok", rename ? `Saved ${id} as ${rename}.` : `Saved ${id}.`);
          } else {
            await api("POST", `/${scope}-permission-definitions`, { body: { id, ...body } });
            notice(status, "ok", `Created ${id}.`);
          }
          for (const input of [idInput, renameInput, descriptionInput, containedInput]) input.value = "";
          load();
        } catch (error) {
          notice(status, "error", error);
        }
      });
    },
    field("Scope", scopeSelect),
    field("Id", idInput, "A new id creates a definition; an existing one is replaced (omitted fields become empty)."),
    field("Rename to", renameInput, "Optional: a new id for an existing definition, renamed in every grant."),
    field("Description", descriptionInput),
    field("Contains", containedInput, "Permission ids of the same scope, comma-separated (team: system ids too)."),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "permission-save" }, "Save permission")),
    status,
  );

  fill(card, h("h2", {}, "Permissions"), tables, h("h3", {}, "Define or edit"), editor);
  load();
  return card;
}
