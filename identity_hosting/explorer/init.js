// The API explorer: Swagger UI (swagger-ui/, served by the service itself) on this service's OpenAPI document.
//
// Every URL is relative to this page, so that the explorer works wherever the service is mounted: the page is at
// <root>/explorer/, the document at <root>/api/v1/openapi.json. The document names no server (it describes paths
// from the service's root, /api/v1/...), so the one the explorer sends "Try it out" requests to is set here: this
// root, mount point included. Keys typed into "Authorize" stay in the page's memory (not persisted) and travel in
// request headers only.
"use strict";

(function start() {
  const status = document.getElementById("explorer-status");
  const root = new URL("../", document.baseURI);
  const documentUrl = new URL("api/v1/openapi.json", root);

  fetch(documentUrl, { headers: { accept: "application/json" }, credentials: "same-origin" })
    .then((response) => {
      if (!response.ok) {
        throw new Error(`GET ${documentUrl.pathname} answered ${response.status}`);
      }
      return response.json();
    })
    .then((spec) => {
      spec.servers = [{ url: root.href.replace(/\/$/, ""), description: "this service" }];
      status.textContent = "";
      window.SwaggerUIBundle({
        spec,
        dom_id: "#explorer",
        deepLinking: true,
        filter: true,
        docExpansion: "list",
        defaultModelsExpandDepth: 0,
        displayRequestDuration: true,
        persistAuthorization: false,
        // No query parameter may point the explorer at another document or configuration, and the document is
        // never sent to an outside validator: the page talks to this service only (its CSP says so too).
        queryConfigEnabled: false,
        validatorUrl: null,
      });
    })
    .catch((error) => {
      status.textContent = `The OpenAPI document could not be loaded: ${error.message}`;
    });
})();
