// The dashboard's entry point: the connect form, the header, and a hash router over the views.

import { DEV, api, credentials, isLocalhost } from "./api.js";
import { renderOutbox } from "./outbox.js";
import { renderProject, renderProjects } from "./projects.js";
import { renderTeam, renderTeams } from "./teams.js";
import { busy, errorBox, field, fill, form, h } from "./ui.js";
import { renderUser, renderUsers } from "./users.js";
import { renderWebhooks } from "./webhooks.js"; // webhook endpoints

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");

/** Incremented on every navigation: a view's late answers are dropped once another view is on screen. */
let generation = 0;

const ROUTES = [
  [/^users$/, (view) => renderUsers(view)],
  [/^users\/([^/]+)$/, (view, id) => renderUser(view, id)],
  [/^teams$/, (view) => renderTeams(view)],
  [/^teams\/([^/]+)$/, (view, id) => renderTeam(view, id)],
  [/^outbox$/, (view) => renderOutbox(view)],
  [/^webhooks$/, (view) => renderWebhooks(view)], // webhook endpoints
  [/^project$/, (view) => renderProject(view)],
  [/^projects$/, (view) => renderProjects(view)],
];

/** The views that work without a project's admin key (the internal project has its own). */
const WITHOUT_PROJECT = new Set(["projects"]);

function currentRoute() {
  const raw = window.location.hash.replace(/^#\/?/, "");
  return raw === "" ? "users" : raw;
}

export function navigate(route) {
  const target = `#/${route}`;
  if (window.location.hash === target) {
    route_();
  } else {
    window.location.hash = target;
  }
}

function route_() {
  generation += 1;
  const mine = generation;
  const route = currentRoute();
  const view = {
    root: main,
    isCurrent: () => mine === generation,
    navigate,
    refreshHeader,
  };
  const connected = credentials.get();
  highlightNav(route);
  if (!connected && !WITHOUT_PROJECT.has(route)) {
    renderConnect(view);
    return;
  }
  for (const [pattern, render] of ROUTES) {
    const match = pattern.exec(route);
    if (match) {
      render(view, ...match.slice(1).map(decodeURIComponent));
      return;
    }
  }
  fill(main, h("section", { class: "card" }, h("h2", {}, "Not found"), h("p", {}, "This page does not exist. "), h("a", { href: "#/users" }, "Go to users")));
}

function highlightNav(route) {
  const top = route.split("/")[0];
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.route === top) {
      link.setAttribute("aria-current", "page");
    } else {
      link.removeAttribute("aria-current");
    }
  }
}

async function refreshHeader() {
  const connected = credentials.get();
  const projectLabel = document.getElementById("who-project");
  nav.hidden = false;
  for (const link of nav.querySelectorAll("a")) {
    link.hidden = !connected && !WITHOUT_PROJECT.has(link.dataset.route);
  }
  who.hidden = !connected;
  if (!connected) {
    fill(projectLabel);
    return;
  }
  fill(projectLabel, h("span", { class: "mono" }, connected.projectId));
  try {
    const project = await api("GET", "/projects/current");
    if (credentials.get()?.projectId === connected.projectId) {
      fill(projectLabel, h("strong", { id: "who-project-name" }, project.display_name), " ", h("span", { class: "mono muted" }, project.id));
    }
  } catch {
    // the view on screen shows the error
  }
}

function renderConnect(view) {
  const projectInput = h("input", {
    id: "connect-project-id",
    type: "text",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "00000000-0000-4000-8000-000000000000",
    required: true,
  });
  const keyInput = h("input", {
    id: "connect-admin-key",
    type: "password",
    autocomplete: "off",
    spellcheck: "false",
    placeholder: "sak_…",
    required: true,
  });
  const status = h("div", { id: "connect-status", "aria-live": "polite" });

  async function connect(projectId, adminKey, formElement) {
    projectId = projectId.trim();
    adminKey = adminKey.trim();
    if (!projectId || !adminKey) {
      fill(status, errorBox({ code: "MISSING_FIELDS", message: "Enter the project id and its super secret admin key." }));
      return;
    }
    fill(status, h("p", { class: "state state-loading", role: "status" }, h("span", { class: "spinner" }), "Checking the key…"));
    await busy(formElement, async () => {
      try {
        await api("GET", "/projects/current", { auth: { projectId, adminKey } });
      } catch (error) {
        fill(status, errorBox(error));
        return;
      }
      credentials.set({ projectId, adminKey });
      keyInput.value = "";
      refreshHeader();
      if (currentRoute() === "users") {
        navigate("users");
      } else {
        route_();
      }
    });
  }

  const connectForm = form(
    { id: "connect-form", class: "stack" },
    () => connect(projectInput.value, keyInput.value, connectForm),
    field("Project id", projectInput),
    field("Super secret admin key", keyInput, "Kept in this browser tab only (session storage) until you forget it or close the tab."),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", id: "connect-submit", class: "primary" }, "Connect"),
      isLocalhost()
        ? h(
            "button",
            {
              type: "button",
              id: "connect-dev",
              onclick: () => {
                projectInput.value = DEV.projectId;
                keyInput.value = DEV.adminKey;
                connect(DEV.projectId, DEV.adminKey, connectForm);
              },
            },
            "Use dev project",
          )
        : null,
    ),
    status,
  );
  fill(
    view.root,
    h(
      "section",
      { class: "card narrow", id: "connect" },
      h("h2", {}, "Connect to a project"),
      h("p", { class: "muted" }, "The dashboard talks to this service's admin API with the project's super secret admin key."),
      connectForm,
    ),
  );
  projectInput.focus();
}

document.getElementById("disconnect").addEventListener("click", () => {
  credentials.clear();
  refreshHeader();
  navigate("users");
});

window.addEventListener("hashchange", route_);
refreshHeader();
route_();
