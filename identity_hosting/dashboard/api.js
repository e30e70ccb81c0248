// The dashboard's only way to the service: admin requests to its API, with the keys in headers.
//
// Keys live in sessionStorage (this tab's session only): never in a URL, never in localStorage, never logged.

const ADMIN_SLOT = "identity-dashboard:admin";
const INTERNAL_SLOT = "identity-dashboard:internal";

/** The dev project's values: fixed, public and documented in the README; offered only on localhost. */
export const DEV = Object.freeze({
  projectId: "00000000-0000-4000-8000-000000000000",
  adminKey: "sak_dev_super_secret_admin_key_not_secret",
  internalAdminKey: "sak_dev_internal_admin_key_not_secret",
});

export const INTERNAL_PROJECT_ID = "internal";

/**
 * The API's base URL: `api/v1` next to the dashboard's own directory, so that the page works wherever the service
 * is mounted (`/dashboard/api.js` -> `/api/v1`, `/auth/dashboard/api.js` -> `/auth/api/v1`).
 */
export const API_BASE = new URL("../api/v1", import.meta.url).href;

export function isLocalhost() {
  return ["localhost", "127.0.0.1", "[::1]", "::1"].includes(window.location.hostname);
}

function read(slot) {
  try {
    const parsed = JSON.parse(window.sessionStorage.getItem(slot) ?? "null");
    if (parsed && typeof parsed.projectId === "string" && typeof parsed.adminKey === "string") {
      return { projectId: parsed.projectId, adminKey: parsed.adminKey };
    }
  } catch {
    // storage unavailable or a damaged value: treat as signed out
  }
  return null;
}

function write(slot, credentials) {
  window.sessionStorage.setItem(
    slot,
    JSON.stringify({ projectId: credentials.projectId, adminKey: credentials.adminKey }),
  );
}

/** The admin credentials of the project being administered, or null. */
export const credentials = {
  get: () => read(ADMIN_SLOT),
  set: (value) => write(ADMIN_SLOT, value),
  clear: () => window.sessionStorage.removeItem(ADMIN_SLOT),
};

/** The internal project's admin key (it lists and creates projects), or null. */
export const internalCredentials = {
  get: () => read(INTERNAL_SLOT),
  set: (adminKey) => write(INTERNAL_SLOT, { projectId: INTERNAL_PROJECT_ID, adminKey }),
  clear: () => window.sessionStorage.removeItem(INTERNAL_SLOT),
};

/** A failed request: the service's known error (`code`, `error`, `details`) or a transport problem. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.details = details ?? null;
  }
}

/**
 * One admin request. `path` is under /api/v1 (path segments must already be encoded with `segment`);
 * `query` values that are null, undefined or "" are left out. Resolves to the parsed JSON body, rejects with an
 * ApiError.
 */
export async function api(method, path, { query = {}, body, auth } = {}) {
  const who = auth ?? credentials.get();
  if (!who) {
    throw new ApiError(0, "NOT_CONNECTED", "Enter a project id and its admin key first.");
  }
  const url = new URL(`${API_BASE}${path}`);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") {
      url.searchParams.set(name, String(value));
    }
  }
  const headers = {
    "x-service-access-type": "admin",
    "x-service-project-id": who.projectId,
    "x-service-super-secret-admin-key": who.adminKey,
  };
  const init = {
    method,
    headers,
    credentials: "omit",
    cache: "no-store",
    redirect: "error",
    referrerPolicy: "no-referrer",
  };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    throw new ApiError(0, "NETWORK_ERROR", `The service could not be reached (${error.message}).`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const known = response.headers.get("x-service-known-error");
    const code = known || (data && typeof data.code === "string" ? data.code : `HTTP_${response.status}`);
    const message =
      data && typeof data.error === "string" ? data.error : text.slice(0, 300) || response.statusText;
    throw new ApiError(response.status, code, message, data ? data.details : null);
  }
  return data;
}

/** A path segment (an id from the service or typed by a person), safely encoded. */
export function segment(value) {
  return encodeURIComponent(String(value));
}

/**
 * Where a mailed link of the project leads (`name`: "password-reset", "magic-link-callback", "team-invitation"): the
 * first trusted domain's handler, else a handler on this page's own origin (accepted on localhost, which projects
 * allow by default). The service checks it against the project's config: the person may change it before sending.
 */
export async function handlerUrl(name) {
  let base = new URL("/handler", window.location.origin).href;
  try {
    const project = await api("GET", "/projects/current");
    const domain = (project.config?.domains ?? [])[0];
    if (domain && typeof domain.domain === "string") {
      base = `${domain.domain.replace(/\/+$/, "")}${domain.handler_path || "/handler"}`;
    }
  } catch {
    // the default stands; the service says so if it refuses it
  }
  return `${base.replace(/\/+$/, "")}/${name}`;
}
