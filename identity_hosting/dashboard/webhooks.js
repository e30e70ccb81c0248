// Webhooks: the project's endpoints (add, edit, disable, delete, rotate the secret, send a test event) and each
// endpoint's recent deliveries with their attempts (replay one). An endpoint's secret is shown once, in a copy box,
// in the answer that made it (creation, rotation): the page keeps it nowhere, and the service never sends it again.

import { api, segment } from "./api.js";
import { badge, busy, confirmAction, empty, field, fill, form, formatTime, h, notice, section } from "./ui.js";

/** The event types an endpoint may subscribe to (the service's EVENT_TYPES). */
const EVENT_TYPES = [
  "user.created",
  "user.updated",
  "user.deleted",
  "team.created",
  "team.updated",
  "team.deleted",
  "team_membership.created",
  "team_membership.deleted",
  "team_permission.created",
  "team_permission.deleted",
  "project_permission.created",
  "project_permission.deleted",
];

export function renderWebhooks(view) {
  const status = h("div", { id: "webhooks-status", "aria-live": "polite" });
  const secretBox = h("div", { id: "webhook-secret-box" });
  const editor = h("div", { id: "webhook-editor" });
  const list = h("div", { id: "webhook-endpoints-list" });
  const deliveries = h("section", { class: "card", id: "webhook-deliveries", hidden: true });
  let endpoints = [];
  /** Reloads the deliveries panel (while it shows an endpoint's). */
  let reloadDeliveries = null;

  /** The secret an answer carried, once: a read-only box and a copy button; gone at the next change. */
  function showSecret(endpoint, what) {
    const input = h("input", { id: "webhook-secret", type: "text", readOnly: true, value: endpoint.secret, class: "mono", spellcheck: "false", autocomplete: "off" });
    const copied = h("span", { id: "webhook-secret-copied", class: "muted", "aria-live": "polite" });
    fill(
      secretBox,
      h(
        "div",
        { class: "banner ok" },
        h("strong", {}, what),
        h("p", {}, "Copy the signing secret now: it is shown only this once. Receivers verify signatures with it (svix, standardwebhooks)."),
        h(
          "div",
          { class: "copy-box" },
          input,
          h(
            "button",
            {
              type: "button",
              id: "webhook-secret-copy",
              onclick: async () => {
                input.select();
                try {
                  await navigator.clipboard.writeText(input.value);
                  fill(copied, "Copied.");
                } catch {
                  fill(copied, "Select the secret and copy it.");
                }
              },
            },
            "Copy",
          ),
          h("button", { type: "button", id: "webhook-secret-done", onclick: () => fill(secretBox) }, "Done"),
        ),
        endpoint.previous_secret_expires_at_millis
          ? h("p", { class: "muted" }, `The previous secret also signs until ${formatTime(endpoint.previous_secret_expires_at_millis)}.`)
          : null,
      ),
    );
  }

  async function act(work, done) {
    fill(secretBox);
    try {
      const answer = await work();
      notice(status, "ok", typeof done === "function" ? done(answer) : done);
      await load();
      return answer;
    } catch (error) {
      notice(status, "error", error);
      return null;
    }
  }

  function endpointForm(existing) {
    const url = h("input", { id: "webhook-url", type: "url", autocomplete: "off", spellcheck: "false", value: existing?.url ?? "", placeholder: "https://app.example.com/webhooks/identity" });
    const description = h("input", { id: "webhook-description", type: "text", autocomplete: "off", value: existing?.description ?? "" });
    const all = h("input", { id: "webhook-all-events", type: "checkbox", checked: !existing || existing.event_types === null });
    const boxes = EVENT_TYPES.map((type) =>
      h("input", { type: "checkbox", class: "webhook-event-type", value: type, "data-event-type": type, checked: Boolean(existing?.event_types?.includes(type)) }),
    );
    const syncBoxes = () => boxes.forEach((box) => (box.disabled = all.checked));
    all.addEventListener("change", syncBoxes);
    syncBoxes();
    const element = form(
      { id: "webhook-form", class: "stack" },
      () =>
        busy(element, async () => {
          const body = {
            url: url.value.trim(),
            description: description.value,
            event_types: all.checked ? null : boxes.filter((box) => box.checked).map((box) => box.value),
          };
          if (existing) {
            const saved = await act(() => api("PATCH", `/webhook-endpoints/${segment(existing.id)}`, { body }), `Saved ${body.url}.`);
            if (saved) fill(editor);
          } else {
            const created = await act(() => api("POST", "/webhook-endpoints", { body }), `Added ${body.url}.`);
            if (created) {
              fill(editor);
              showSecret(created, "Endpoint added.");
            }
          }
        }),
      field("URL", url, "Where the service POSTs each event (http or https)."),
      field("Description", description),
      h("label", { class: "check" }, all, h("span", {}, "Every event type")),
      h("div", { class: "event-types" }, boxes.map((box) => h("label", { class: "check" }, box, h("span", { class: "mono small" }, box.value)))),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "submit", class: "primary", id: "webhook-save" }, existing ? "Save endpoint" : "Add endpoint"),
        h("button", { type: "button", id: "webhook-cancel", onclick: () => fill(editor) }, "Cancel"),
      ),
    );
    fill(editor, h("h4", {}, existing ? "Edit the endpoint" : "Add an endpoint"), element);
  }

  async function rotate(endpoint) {
    const agreed = await confirmAction({
      title: "Rotate the signing secret?",
      message: "A new secret signs every message from now on; the current one keeps signing beside it for 24 hours, so receivers can switch.",
      confirmLabel: "Rotate secret",
    });
    if (!agreed) return;
    const rotated = await act(() => api("POST", `/webhook-endpoints/${segment(endpoint.id)}/rotate-secret`), "Secret rotated.");
    if (rotated) showSecret(rotated, "Secret rotated.");
  }

  async function remove(endpoint) {
    const agreed = await confirmAction({
      title: "Delete this endpoint?",
      message: `${endpoint.url} will receive nothing more; its pending deliveries are dropped.`,
      confirmLabel: "Delete endpoint",
    });
    if (!agreed) return;
    await act(() => api("DELETE", `/webhook-endpoints/${segment(endpoint.id)}`), "Endpoint deleted.");
    if (deliveries.dataset.endpointId === endpoint.id) deliveries.hidden = true;
  }

  function showDeliveries(endpoint) {
    deliveries.hidden = false;
    deliveries.dataset.endpointId = endpoint.id;
    const body = h("div", { id: "webhook-deliveries-body" });
    const load_ = () =>
      section(
        body,
        "deliveries",
        () => api("GET", `/webhook-endpoints/${segment(endpoint.id)}/deliveries`),
        (data) => deliveriesTable(endpoint, data.items ?? [], load_),
        view.isCurrent,
      );
    reloadDeliveries = load_;
    fill(
      deliveries,
      h(
        "div",
        { class: "card-head" },
        h("h3", {}, "Recent deliveries to ", h("span", { class: "mono" }, endpoint.url)),
        h("button", { type: "button", id: "webhook-deliveries-refresh", onclick: () => load_() }, "Refresh"),
      ),
      body,
    );
    load_();
  }

  function deliveriesTable(endpoint, items, reload) {
    if (items.length === 0) return empty("No deliveries yet.");
    return h(
      "table",
      { class: "table", id: "webhook-deliveries-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "Message"), h("th", {}, "Event"), h("th", {}, "State"), h("th", {}, "Attempts"), h("th", {}, ""))),
      h(
        "tbody",
        {},
        items.map((delivery) =>
          h(
            "tr",
            { "data-message-id": delivery.message_id },
            h("td", { class: "mono small" }, delivery.message_id, h("div", { class: "muted" }, formatTime(delivery.created_at_millis))),
            h("td", { class: "mono small" }, delivery.event_type),
            h(
              "td",
              { class: "small delivery-state" },
              badge(delivery.state, delivery.state === "succeeded" ? "ok" : delivery.state === "failed" ? "danger" : "warn"),
              delivery.next_attempt_at_millis ? h("div", { class: "muted" }, `next ${formatTime(delivery.next_attempt_at_millis)}`) : null,
            ),
            h(
              "td",
              { class: "small delivery-attempts" },
              delivery.attempts.length === 0
                ? h("span", { class: "muted" }, "none yet")
                : h(
                    "ol",
                    { class: "attempts" },
                    delivery.attempts.map((attempt) =>
                      h(
                        "li",
                        {},
                        `${formatTime(attempt.at_millis)}: `,
                        attempt.status_code === null ? "no answer" : `HTTP ${attempt.status_code}`,
                        ` in ${attempt.latency_ms} ms`,
                        attempt.error ? h("span", { class: "muted" }, ` (${attempt.error})`) : null,
                      ),
                    ),
                  ),
            ),
            h(
              "td",
              { class: "actions" },
              h(
                "button",
                {
                  type: "button",
                  class: "small-button replay-delivery",
                  onclick: async () => {
                    try {
                      await api("POST", `/webhook-endpoints/${segment(endpoint.id)}/deliveries/${segment(delivery.message_id)}/replay`);
                      notice(status, "ok", `Message ${delivery.message_id} will be sent again.`);
                    } catch (error) {
                      notice(status, "error", error);
                    }
                    reload();
                  },
                },
                "Replay",
              ),
            ),
          ),
        ),
      ),
    );
  }

  function endpointRow(endpoint) {
    const path = `/webhook-endpoints/${segment(endpoint.id)}`;
    return h(
      "tr",
      { "data-endpoint-id": endpoint.id },
      h("td", { class: "mono small webhook-url" }, endpoint.url, endpoint.description ? h("div", { class: "muted" }, endpoint.description) : null),
      h("td", { class: "small webhook-event-types" }, endpoint.event_types === null ? "every event" : endpoint.event_types.join(", ")),
      h("td", { class: "small webhook-state" }, endpoint.disabled ? badge("disabled", "warn") : badge("enabled", "ok")),
      h(
        "td",
        { class: "actions" },
        h("button", { type: "button", class: "small-button show-deliveries", onclick: () => showDeliveries(endpoint) }, "Deliveries"),
        h(
          "button",
          {
            type: "button",
            class: "small-button send-test",
            onclick: async () => {
              const sent = await act(() => api("POST", `${path}/test`), (answer) => `Test event ${answer.message_id} queued for ${endpoint.url}.`);
              // The panel shows the new delivery when it shows this endpoint's.
              if (sent && !deliveries.hidden && deliveries.dataset.endpointId === endpoint.id && reloadDeliveries) reloadDeliveries();
            },
          },
          "Send test",
        ),
        h("button", { type: "button", class: "small-button edit-endpoint", onclick: () => endpointForm(endpoint) }, "Edit"),
        h(
          "button",
          {
            type: "button",
            class: "small-button toggle-endpoint",
            onclick: () => act(() => api("PATCH", path, { body: { disabled: !endpoint.disabled } }), endpoint.disabled ? "Endpoint enabled." : "Endpoint disabled."),
          },
          endpoint.disabled ? "Enable" : "Disable",
        ),
        h("button", { type: "button", class: "small-button rotate-secret", onclick: () => rotate(endpoint) }, "Rotate secret"),
        h("button", { type: "button", class: "danger small-button delete-endpoint", onclick: () => remove(endpoint) }, "Delete"),
      ),
    );
  }

  async function load() {
    const data = await section(
      list,
      "webhook endpoints",
      () => api("GET", "/webhook-endpoints"),
      (answer) =>
        answer.items.length === 0
          ? empty("No webhook endpoints.")
          : h(
              "table",
              { class: "table", id: "webhook-endpoints-table" },
              h("thead", {}, h("tr", {}, h("th", {}, "URL"), h("th", {}, "Events"), h("th", {}, "State"), h("th", {}, ""))),
              h("tbody", {}, answer.items.map(endpointRow)),
            ),
      view.isCurrent,
    );
    if (data) endpoints = data.items;
    return endpoints;
  }

  fill(
    view.root,
    h(
      "div",
      { id: "webhooks-view" },
      h(
        "section",
        { class: "card" },
        h("div", { class: "card-head" }, h("h2", {}, "Webhooks"), h("button", { type: "button", id: "webhook-add", class: "primary", onclick: () => endpointForm(null) }, "Add an endpoint")),
        h("p", { class: "muted" }, "Every change to users, teams, memberships and permissions is sent, signed, to each enabled endpoint that subscribes to its type."),
        status,
        secretBox,
        editor,
        list,
      ),
      deliveries,
    ),
  );
  load();
}
