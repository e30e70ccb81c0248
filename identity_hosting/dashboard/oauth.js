// OAuth: the project's providers (list, add, edit, remove; a client secret is shown only as "set, ending in
// xxxx" and is never read back, so an edit that leaves the secret field empty keeps it) and the account merge
// strategy, through PATCH /projects/current; and a user's linked accounts (list, turn sign-in and connected
// accounts on and off, remove) through /oauth-providers.

import { api, segment } from "./api.js";
import { badge, busy, confirmAction, empty, field, fill, form, h, notice, section } from "./ui.js";

const TYPES = ["google", "github", "microsoft", "discord", "gitlab", "bitbucket", "spotify", "oidc", "mock"];
const STRATEGIES = [
  ["link_method", "Link to the user with that e-mail"],
  ["raise_error", "Refuse the sign-in"],
  ["allow_duplicates", "Create another user"],
];
/** What PATCH accepts of a provider as an admin reads it (the secret is never among them). */
const WRITABLE = ["id", "type", "client_id", "issuer_url", "microsoft_tenant_id", "allow_sign_in", "allow_connected_accounts"];

function writable(provider) {
  const out = {};
  for (const key of WRITABLE) {
    if (provider[key] !== null && provider[key] !== undefined) out[key] = provider[key];
  }
  return out;
}

function secretText(provider) {
  if (!provider.client_secret_set) return "not set";
  return provider.client_secret_last_four ? `set, ending in ${provider.client_secret_last_four}` : "set";
}

/** The project's providers and merge strategy; `getProject()` is the project as last read, `saved(project)` shows
 * the project a PATCH answered. */
export function oauthProvidersCard(view, getProject, saved) {
  const card = h("section", { class: "card", id: "oauth-providers" });
  const status = h("div", { id: "oauth-status", "aria-live": "polite" });
  const list = h("div", { id: "oauth-providers-list" });
  const editor = h("div", { id: "oauth-provider-editor" });

  const providers = () => getProject().config?.oauth_providers ?? [];

  async function save(nextProviders, extra, done) {
    try {
      const updated = await api("PATCH", "/projects/current", { body: { config: { oauth_providers: nextProviders, ...extra } } });
      saved(updated);
      notice(status, "ok", done);
      render();
      return true;
    } catch (error) {
      notice(status, "error", error);
      return false;
    }
  }

  async function remove(provider) {
    const agreed = await confirmAction({
      title: `Remove ${provider.id}?`,
      message: "Users can no longer sign in with it; their linked accounts stay listed. Its client secret is forgotten.",
      confirmLabel: "Remove provider",
    });
    if (!agreed) return;
    await save(providers().filter((p) => p.id !== provider.id).map(writable), {}, `Removed ${provider.id}.`);
  }

  function providerForm(existing) {
    const id = h("input", { id: "oauth-id", type: "text", autocomplete: "off", value: existing?.id ?? "", placeholder: "github" });
    if (existing) id.readOnly = true;
    const type = h("select", { id: "oauth-type" }, TYPES.map((t) => h("option", { value: t, selected: (existing?.type ?? "github") === t }, t)));
    const clientId = h("input", { id: "oauth-client-id", type: "text", autocomplete: "off", value: existing?.client_id ?? "" });
    const secret = h("input", {
      id: "oauth-client-secret",
      type: "password",
      autocomplete: "new-password",
      placeholder: existing?.client_secret_set ? `${secretText(existing)}: leave empty to keep it` : "",
    });
    const issuer = h("input", { id: "oauth-issuer-url", type: "url", autocomplete: "off", value: existing?.issuer_url ?? "", placeholder: "issuer URL (https)" });
    const tenant = h("input", { id: "oauth-tenant", type: "text", autocomplete: "off", value: existing?.microsoft_tenant_id ?? "" });
    const signIn = h("input", { id: "oauth-allow-sign-in", type: "checkbox", checked: existing ? existing.allow_sign_in : true });
    const connected = h("input", { id: "oauth-allow-connected", type: "checkbox", checked: existing ? existing.allow_connected_accounts : true });
    const element = form(
      { id: "oauth-provider-form", class: "stack" },
      () =>
        busy(element, async () => {
          const entry = { id: id.value.trim(), type: type.value, allow_sign_in: signIn.checked, allow_connected_accounts: connected.checked };
          if (clientId.value.trim()) entry.client_id = clientId.value.trim();
          if (secret.value) entry.client_secret = secret.value;
          if (issuer.value.trim()) entry.issuer_url = issuer.value.trim();
          if (tenant.value.trim()) entry.microsoft_tenant_id = tenant.value.trim();
          const others = providers().filter((p) => p.id !== (existing?.id ?? entry.id)).map(writable);
          const position = providers().findIndex((p) => p.id === existing?.id);
          const next = [...others];
          next.splice(position < 0 ? next.length : position, 0, entry);
          const ok = await save(next, {}, existing ? `Saved ${entry.id}.` : `Added ${entry.id}.`);
          secret.value = "";
          if (ok) fill(editor);
        }),
      field("Provider id", id, "Lower-case letters, digits, _ and -: the {provider_id} of the callback URL."),
      field("Type", type),
      field("Client id", clientId, 'MOCK (dev mode) uses the built-in mock provider.'),
      field("Client secret", secret, "Write-only: never shown again."),
      field("Issuer URL (oidc)", issuer),
      field("Microsoft tenant (microsoft)", tenant),
      h("label", { class: "check" }, signIn, h("span", {}, "Allow sign-in")),
      h("label", { class: "check" }, connected, h("span", {}, "Allow connected accounts")),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "submit", class: "primary", id: "oauth-provider-save" }, existing ? "Save provider" : "Add provider"),
        h("button", { type: "button", id: "oauth-provider-cancel", onclick: () => fill(editor) }, "Cancel"),
      ),
    );
    fill(editor, h("h4", {}, existing ? `Edit ${existing.id}` : "Add a provider"), element);
  }

  function strategyForm() {
    const current = getProject().config?.oauth_account_merge_strategy ?? "link_method";
    const select = h("select", { id: "oauth-merge-strategy" }, STRATEGIES.map(([value, label]) => h("option", { value, selected: value === current }, label)));
    const element = form(
      { id: "oauth-merge-form", class: "stack" },
      () =>
        busy(element, async () => {
          try {
            const updated = await api("PATCH", "/projects/current", { body: { config: { oauth_account_merge_strategy: select.value } } });
            saved(updated);
            notice(status, "ok", "Merge strategy saved.");
            render();
          } catch (error) {
            notice(status, "error", error);
          }
        }),
      field("When a provider's e-mail already signs someone in", select),
      h("div", { class: "actions" }, h("button", { type: "submit", id: "oauth-merge-save" }, "Save strategy")),
    );
    return element;
  }

  function render() {
    const items = providers();
    fill(
      list,
      items.length === 0
        ? empty("No OAuth providers.")
        : h(
            "table",
            { class: "table", id: "oauth-providers-table" },
            h("thead", {}, h("tr", {}, h("th", {}, "Id"), h("th", {}, "Type"), h("th", {}, "Client id"), h("th", {}, "Secret"), h("th", {}, "Allows"), h("th", {}, ""))),
            h(
              "tbody",
              {},
              items.map((provider) =>
                h(
                  "tr",
                  { "data-provider-id": provider.id },
                  h("td", { class: "mono small" }, provider.id),
                  h("td", { class: "small" }, provider.type),
                  h("td", { class: "mono small" }, provider.client_id ?? ""),
                  h("td", { class: "small oauth-secret" }, secretText(provider)),
                  h(
                    "td",
                    { class: "small" },
                    provider.allow_sign_in ? badge("sign-in", "ok") : badge("no sign-in"),
                    " ",
                    provider.allow_connected_accounts ? badge("connected accounts", "ok") : null,
                  ),
                  h(
                    "td",
                    { class: "actions" },
                    h("button", { type: "button", class: "small-button edit-provider", onclick: () => providerForm(provider) }, "Edit"),
                    h("button", { type: "button", class: "danger small-button remove-provider", onclick: () => remove(provider) }, "Remove"),
                  ),
                ),
              ),
            ),
          ),
      h("div", { class: "actions" }, h("button", { type: "button", id: "oauth-add-provider", onclick: () => providerForm(null) }, "Add a provider")),
      strategyForm(),
    );
  }

  fill(card, h("div", { class: "card-head" }, h("h3", {}, "OAuth providers")), status, list, editor);
  render();
  return card;
}

/** A user's linked provider accounts: listed, sign-in and connected accounts toggled, removed. */
export function linkedAccountsCard(view, container, currentUser) {
  const status = h("div", { id: "linked-accounts-status", "aria-live": "polite" });
  const body = h("div", { id: "linked-accounts-body" });

  async function change(account, method, patch, done) {
    if (method === "DELETE") {
      const agreed = await confirmAction({
        title: "Remove this linked account?",
        message: `${account.provider_config_id} account ${account.account_id} will no longer belong to this user${account.allow_sign_in ? " nor sign them in" : ""}.`,
        confirmLabel: "Remove account",
      });
      if (!agreed) return;
    }
    try {
      const path = `/oauth-providers/${segment(currentUser().id)}/${segment(account.id)}`;
      await api(method, path, method === "DELETE" ? {} : { body: patch });
      notice(status, "ok", done);
    } catch (error) {
      notice(status, "error", error);
    }
    load();
  }

  function load() {
    return section(
      body,
      "linked accounts",
      () => api("GET", "/oauth-providers", { query: { user_id: currentUser().id } }),
      (data) => {
        const items = data.items ?? [];
        if (items.length === 0) return empty("No linked accounts.");
        return h(
          "table",
          { class: "table", id: "linked-accounts-table" },
          h("thead", {}, h("tr", {}, h("th", {}, "Provider"), h("th", {}, "Account"), h("th", {}, "Allows"), h("th", {}, ""))),
          h(
            "tbody",
            {},
            items.map((account) =>
              h(
                "tr",
                { "data-account-id": account.id },
                h("td", { class: "small" }, h("span", { class: "mono" }, account.provider_config_id), ` (${account.type})`),
                h("td", { class: "mono small" }, account.account_id, account.email ? h("div", { class: "muted" }, account.email) : null),
                h(
                  "td",
                  { class: "small" },
                  account.allow_sign_in ? badge("sign-in", "ok") : badge("no sign-in"),
                  " ",
                  account.allow_connected_accounts ? badge("connected accounts", "ok") : badge("no connected accounts"),
                ),
                h(
                  "td",
                  { class: "actions" },
                  h(
                    "button",
                    {
                      type: "button",
                      class: "small-button toggle-sign-in",
                      onclick: () => change(account, "PATCH", { allow_sign_in: !account.allow_sign_in }, account.allow_sign_in ? "Sign-in turned off." : "Sign-in turned on."),
                    },
                    account.allow_sign_in ? "Turn sign-in off" : "Turn sign-in on",
                  ),
                  h(
                    "button",
                    {
                      type: "button",
                      class: "small-button toggle-connected",
                      onclick: () =>
                        change(
                          account,
                          "PATCH",
                          { allow_connected_accounts: !account.allow_connected_accounts },
                          account.allow_connected_accounts ? "Connected accounts turned off." : "Connected accounts turned on.",
                        ),
                    },
                    account.allow_connected_accounts ? "Turn connected accounts off" : "Turn connected accounts on",
                  ),
                  h("button", { type: "button", class: "danger small-button remove-linked-account", onclick: () => change(account, "DELETE", null, "Linked account removed.") }, "Remove"),
                ),
              ),
            ),
          ),
        );
      },
      view.isCurrent,
    );
  }

  fill(container, h("div", { class: "card-head" }, h("h3", {}, "Linked accounts (OAuth)")), status, body);
  load();
}
