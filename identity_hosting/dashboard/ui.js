// Small DOM helpers. Everything the service returns is put on the page as text (textContent), never as HTML.

/**
 * Build an element: h("a", { href: "#/x", class: "link" }, "text", child). Attributes named on* are event
 * listeners; `hidden`, `disabled`, `checked` and friends are properties; null/false children are skipped.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (["hidden", "disabled", "checked", "value", "open", "selected", "required", "readOnly"].includes(name)) {
      element[name] = value;
    } else if (name === "class") {
      element.className = value;
    } else {
      element.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(parent, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(child instanceof Node ? child : String(child));
  }
}

/** Replace the children of `parent`. */
export function fill(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
  return parent;
}

// ----------------------------------------------------------------------------------------------------------
// States: loading, empty, error

export function loading(what) {
  return h("p", { class: "state state-loading", role: "status", "aria-busy": "true" }, h("span", { class: "spinner" }), `Loading ${what}…`);
}

export function empty(text) {
  return h("p", { class: "state state-empty" }, text);
}

/** The known error of a failed request: its code and the service's message (and details.message when new). */
export function errorBox(error, prefix = "") {
  const code = error && error.code ? error.code : "ERROR";
  const message = error && error.message ? error.message : String(error);
  const detail = error && error.details && typeof error.details.message === "string" ? error.details.message : "";
  return h(
    "div",
    { class: "state state-error", role: "alert" },
    h("strong", { class: "error-code" }, code),
    h("span", { class: "error-message" }, prefix ? `${prefix}: ${message}` : message),
    detail && detail !== message ? h("pre", { class: "error-details" }, detail) : null,
  );
}

/** A line saying what just happened after a form was sent ("Saved."), or its error. */
export function notice(target, kind, content) {
  if (kind === "error") {
    fill(target, errorBox(content));
  } else {
    fill(target, h("p", { class: `state state-${kind}`, role: "status" }, content));
  }
}

/**
 * Render `render(data)` into `container` once `load()` resolves, with a loading state meanwhile and the known
 * error if it fails. `isCurrent()` says whether the view is still on screen (stale answers are dropped).
 */
export async function section(container, what, load, render, isCurrent = () => true) {
  fill(container, loading(what));
  let data;
  try {
    data = await load();
  } catch (error) {
    if (isCurrent()) fill(container, errorBox(error));
    return null;
  }
  if (!isCurrent()) return null;
  fill(container, render(data));
  return data;
}

// ----------------------------------------------------------------------------------------------------------
// Confirmation before anything destructive

/** Ask before a destructive action; resolves true only if the person confirms. */
export function confirmAction({ title, message, confirmLabel }) {
  const dialog = document.getElementById("confirm-dialog");
  fill(dialog.querySelector("#confirm-title"), title);
  fill(dialog.querySelector("#confirm-message"), message);
  const confirmButton = dialog.querySelector("#confirm-ok");
  const cancelButton = dialog.querySelector("#confirm-cancel");
  fill(confirmButton, confirmLabel);
  return new Promise((resolve) => {
    const finish = (answer) => {
      confirmButton.removeEventListener("click", onConfirm);
      cancelButton.removeEventListener("click", onCancel);
      dialog.removeEventListener("cancel", onCancel);
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const onConfirm = (event) => {
      event.preventDefault();
      finish(true);
    };
    const onCancel = (event) => {
      event.preventDefault();
      finish(false);
    };
    confirmButton.addEventListener("click", onConfirm);
    cancelButton.addEventListener("click", onCancel);
    dialog.addEventListener("cancel", onCancel);
    dialog.showModal();
    cancelButton.focus();
  });
}

// ----------------------------------------------------------------------------------------------------------
// Formatting

/** Milliseconds since the epoch as "2026-01-01 12:00:00 UTC" (the same on every machine). */
export function formatTime(millis) {
  if (typeof millis !== "number" || !Number.isFinite(millis)) return "—";
  return `${new Date(millis).toISOString().replace("T", " ").slice(0, 19)} UTC`;
}

/** A value of a record, shown faithfully: null as a dash, booleans as yes/no, objects as JSON. */
export function valueNode(name, value) {
  if (value === null || value === undefined) return h("span", { class: "null" }, "—");
  if (typeof value === "boolean") return h("span", { class: value ? "yes" : "no" }, value ? "yes" : "no");
  if (typeof value === "number" && name.endsWith("_millis")) {
    return h("span", {}, formatTime(value), " ", h("span", { class: "muted" }, `(${value})`));
  }
  if (typeof value === "object") return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
  return h("span", { class: typeof value === "string" && /^[0-9a-f-]{36}$/.test(value) ? "mono" : "" }, String(value));
}

/** Every field of a record, in the service's order, as a definition list. */
export function fieldList(record, { className = "fields" } = {}) {
  return h(
    "dl",
    { class: className },
    Object.entries(record).map(([name, value]) => [
      h("dt", {}, name),
      h("dd", { "data-field": name }, valueNode(name, value)),
    ]),
  );
}

/**
 * A profile picture. Only inline `data:image/` pictures are shown: a picture at another address would make the
 * browser call a server other than this service (the dashboard talks to this origin only); it stays a link-less
 * text in the field list.
 */
export function avatar(url, label, extraClass = "") {
  if (typeof url === "string" && url.startsWith("data:image/")) {
    return h("img", { src: url, alt: "", class: `avatar ${extraClass}`.trim() });
  }
  return h("div", { class: `avatar placeholder ${extraClass}`.trim() }, (label || "?").slice(0, 1).toUpperCase());
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}`.trim() }, text);
}

/** A form that never navigates (the page's CSP forbids form actions anyway): `onSubmit` gets the event. */
export function form(attributes, onSubmit, ...children) {
  return h(
    "form",
    {
      ...attributes,
      novalidate: true,
      onsubmit: (event) => {
        event.preventDefault();
        onSubmit(event);
      },
    },
    ...children,
  );
}

/** A labelled control; `control` is an input, select or textarea (inputs never get a `name`, so a form could
 * never serialize a key into a URL even if it were submitted without this script). */
export function field(label, control, hint) {
  return h("label", { class: "field" }, h("span", { class: "field-label" }, label), control, hint ? h("span", { class: "hint" }, hint) : null);
}

/** Disable a form's controls while `work()` runs. */
export async function busy(formElement, work) {
  const controls = [...formElement.querySelectorAll("button, input, select, textarea")];
  const before = controls.map((control) => control.disabled);
  controls.forEach((control) => {
    control.disabled = true;
  });
  formElement.setAttribute("aria-busy", "true");
  try {
    return await work();
  } finally {
    controls.forEach((control, index) => {
      control.disabled = before[index];
    });
    formElement.removeAttribute("aria-busy");
  }
}
