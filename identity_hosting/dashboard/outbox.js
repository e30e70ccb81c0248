// The outbox: mail the service kept instead of sending it (IDENTITY_MAIL=outbox), newest first, with the sign-in
// code and magic link of each one picked out.

import { api } from "./api.js";
import { empty, field, fill, form, formatTime, h, section } from "./ui.js";

const filter = { to: "" };

/** The 6-character one-time code of a sign-in mail (its `code` field; older mail: "... Your code is AB12CD"), or null. */
export function codeOf(mail) {
  if (mail.code) return mail.code;
  const match = /\bcode is ([0-9A-Z]{6})\b/.exec(mail.subject ?? "") ?? /\bcode for .*? is ([0-9A-Z]{6})\b/.exec(mail.text ?? "");
  return match ? match[1] : null;
}

/** The links of a mail that carry a code (magic links): its `magic_link` field, or those found in its text. */
export function magicLinksOf(mail) {
  if (mail.magic_link) return [mail.magic_link];
  const links = (mail.text ?? "").match(/https?:\/\/[^\s<>"]+/g) ?? [];
  return links.filter((link) => {
    try {
      return new URL(link).searchParams.has("code");
    } catch {
      return false;
    }
  });
}

export function renderOutbox(view) {
  const toInput = h("input", { id: "outbox-to", type: "search", value: filter.to, placeholder: "recipient e-mail (all when empty)", autocomplete: "off" });
  const results = h("div", { id: "outbox-results" });
  const filterForm = form(
    { id: "outbox-form", class: "toolbar" },
    () => {
      filter.to = toInput.value.trim();
      load();
    },
    field("To", toInput),
    h("div", { class: "actions" }, h("button", { type: "submit", class: "primary", id: "outbox-refresh" }, "Refresh")),
  );

  function load() {
    return section(
      results,
      "the outbox",
      () => api("GET", "/emails/outbox", { query: { to: filter.to } }),
      (data) => {
        const mails = [...(data.items ?? [])].sort((a, b) => (b.created_at_millis ?? 0) - (a.created_at_millis ?? 0));
        if (mails.length === 0) return empty(filter.to ? `No mail to ${filter.to}.` : "The outbox is empty.");
        return h("ol", { class: "mails", id: "outbox-list" }, mails.map(mailItem));
      },
      view.isCurrent,
    );
  }

  fill(
    view.root,
    h(
      "section",
      { class: "card", id: "outbox-view" },
      h("h2", {}, "Outbox"),
      h("p", { class: "muted" }, "Mail kept by the service (IDENTITY_MAIL=outbox), newest first."),
      filterForm,
      results,
    ),
  );
  load();
}

function mailItem(mail) {
  const code = codeOf(mail);
  const links = magicLinksOf(mail);
  return h(
    "li",
    { class: "mail", "data-mail-id": mail.id, "data-to": mail.to },
    h(
      "div",
      { class: "mail-head" },
      h("strong", { class: "mail-to" }, mail.to),
      h("span", { class: "muted small" }, formatTime(mail.created_at_millis)),
    ),
    h("div", { class: "mail-subject" }, mail.subject),
    code ? h("div", { class: "mail-code-line" }, "Code ", h("code", { class: "mail-code" }, code)) : null,
    links.map((link) => h("div", { class: "mail-link-line" }, "Magic link ", h("code", { class: "mail-link" }, link))),
    h("details", {}, h("summary", {}, "Full text"), h("pre", { class: "mail-text" }, mail.text)),
  );
}
