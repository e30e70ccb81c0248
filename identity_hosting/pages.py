"""The pages the hosts serve themselves, before handing a request to the core: the admin dashboard (`/dashboard/`,
see `settings.Dashboard`), the API explorer (`/explorer/`), and in dev mode a home page at `/` for browsers, which
links both and the OpenAPI document.

The API explorer is Swagger UI (its standalone build, vendored in `explorer/swagger-ui/` with its licence) started by
`explorer/init.js` on the document the service serves at `/api/v1/openapi.json`. Every file comes from the package:
the page loads nothing from elsewhere, and its CSP forbids it to (no inline script, no other origin).

It is served in production mode too, on the same terms as the dashboard: it is static files and shows only what the
public OpenAPI document says (production's document has no test-only route); the requests it sends ("Try it out")
go to this service alone, with keys typed into the page, which keeps them in memory only.

The home page answers only in dev mode and only a browser (an `Accept` that names `text/html`): any other client
gets what `/` has always answered, the core's 404 `ROUTE_NOT_FOUND`, and production mode has no page there.
"""

from __future__ import annotations

import functools
import html
import importlib.resources
import multiprocessing
import socket
from collections.abc import Sequence
from importlib.resources.abc import Traversable
from pathlib import Path
from urllib.parse import quote

from identity_proto import ProjectSeed, Request, Response

__all__ = [
    "DASHBOARD_PATH",
    "EXPLORER_PATH",
    "EXPLORER_PREFIX",
    "OPENAPI_PATH",
    "Explorer",
    "Pages",
    "StaticFiles",
    "hypercorn_bound_url",
    "page_urls",
    "wants_html",
]

Headers = Sequence[tuple[str, str]]

_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}

#: Where each page is, from the service's root (its mount point when embedded).
DASHBOARD_PATH = "/dashboard/"
EXPLORER_PREFIX = "/explorer"
EXPLORER_PATH = EXPLORER_PREFIX + "/"
OPENAPI_PATH = "/api/v1/openapi.json"

#: The explorer talks only to this service: its own files, and the API (the document, "Try it out"). Swagger UI's
#: stylesheet draws its icons with `data:` images; nothing else needs more than 'self'.
_EXPLORER_HEADERS = (
    ("cache-control", "no-store, max-age=0"),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    (
        "content-security-policy",
        "default-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; "
        "base-uri 'none'; form-action 'none'",
    ),
)

#: The dev home page: plain HTML, no script, no style; only its icon is loaded.
_HOME_HEADERS = (
    ("cache-control", "no-store, max-age=0"),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("content-security-policy", "default-src 'none'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'"),
    ("vary", "accept"),
)


class StaticFiles:
    """A folder of files (read once, at start-up) served under `prefix`: GET and HEAD only; `prefix` itself redirects
    to `prefix/`, whose page is `index.html`.

    Pages name their files and the API by relative URLs, so that they work wherever the service is mounted: the
    redirect's `Location` is relative too, which keeps the mount point the browser sees."""

    def __init__(self, prefix: str, root: Traversable, headers: Headers) -> None:
        self.prefix = prefix
        self._headers = tuple(headers)
        self._files: dict[str, tuple[str, bytes]] = {}
        if root.is_dir():
            self._add(root, "")

    def _add(self, folder: Traversable, prefix: str) -> None:
        for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
            suffix = Path(entry.name).suffix
            if entry.is_dir():
                self._add(entry, f"{prefix}{entry.name}/")
            elif suffix in _MEDIA_TYPES:
                self._files[prefix + entry.name] = (_MEDIA_TYPES[suffix], entry.read_bytes())

    def names(self) -> list[str]:
        """The files served, by their path under the prefix."""
        return sorted(self._files)

    def response(self, method: str, path: str) -> Response | None:
        """The file for `path`, a 404 under the prefix, or None when the path is not under it."""
        prefix = self.prefix
        if path != prefix and not path.startswith(prefix + "/"):
            return None
        if method not in {"GET", "HEAD"}:
            return Response(405, (("allow", "GET, HEAD"), *self._headers))
        if path == prefix:
            return Response(308, (("location", prefix.rsplit("/", 1)[-1] + "/"), *self._headers))
        name = path[len(prefix) :].lstrip("/") or "index.html"
        found = self._files.get(name)
        if found is None:
            return Response(404, (("content-type", "text/plain; charset=utf-8"), *self._headers), b"Not found")
        media_type, body = found
        return Response(200, (("content-type", media_type), *self._headers), b"" if method == "HEAD" else body)


class Explorer(StaticFiles):
    """The API explorer's files (package data of `identity_hosting`, so an installed wheel serves them too), under
    /explorer."""

    def __init__(self, directory: Traversable | None = None) -> None:
        root = directory if directory is not None else importlib.resources.files("identity_hosting") / "explorer"
        super().__init__(EXPLORER_PREFIX, root, _EXPLORER_HEADERS)


class Pages:
    """What a host asks before handing a request to the core: the dashboard's and the explorer's files, and in dev
    mode (`dev_project` given: the dev project, whose public id and admin key the page shows) the home page at `/`.
    None: the request is the core's."""

    def __init__(
        self, dashboard: StaticFiles, *, dev_project: ProjectSeed | None, explorer: StaticFiles | None = None
    ) -> None:
        self.dev_project = dev_project
        self.dashboard = dashboard
        self._explorer = explorer

    @property
    def explorer(self) -> StaticFiles:
        """The explorer's files: those given, or the package's, read at the first request for one of them and shared
        by every host of the process (2 MB, mostly Swagger UI: not read by each app a test suite builds)."""
        return self._explorer if self._explorer is not None else _package_explorer()

    def response(self, request: Request) -> Response | None:
        """The page for `request`, or None."""
        path = request.path
        if path == "/":
            dev = self.dev_project
            if dev is not None and request.method in {"GET", "HEAD"} and wants_html(request.header("accept")):
                body = home_page(request.root_path, dev)
                return Response(
                    200,
                    (("content-type", "text/html; charset=utf-8"), *_HOME_HEADERS),
                    b"" if request.method == "HEAD" else body,
                )
            return None
        found = self.dashboard.response(request.method, path)
        if found is None and (path == EXPLORER_PREFIX or path.startswith(EXPLORER_PATH)):
            found = self.explorer.response(request.method, path)
        return found


@functools.cache
def _package_explorer() -> Explorer:
    return Explorer()


def wants_html(accept: str | None) -> bool:
    """Whether an `Accept` header asks for HTML (`text/html` named with a weight above 0): what browsers send when
    they open a page. API clients (`*/*`, `application/json`, none) do not."""
    for item in (accept or "").split(","):
        media_type, *parameters = (part.strip() for part in item.split(";"))
        if media_type.lower() != "text/html":
            continue
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    return float(value) > 0
                except ValueError:
                    return False
        return True
    return False


def page_urls(base: str) -> dict[str, str]:
    """The pages' URLs under `base` (the service's URL, mount point included, no final slash)."""
    return {"dashboard": base + DASHBOARD_PATH, "explorer": base + EXPLORER_PATH, "openapi": base + OPENAPI_PATH}


def home_page(root_path: str, dev_project: ProjectSeed) -> bytes:
    """The dev home page. Its links start from the mount point (`root_path`): the service's root is `/` whether the
    browser asked for `/auth` or `/auth/`, so a relative link could not know which one it is under."""
    project_id = html.escape(dev_project.id)
    admin_key = html.escape(dev_project.keys.super_secret_admin_key)
    root = html.escape(quote(root_path, safe="/"), quote=True)
    urls = {name: html.escape(url) for name, url in page_urls(root).items()}
    text = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Identity service (dev mode)</title>
<link rel="icon" href="{root}/dashboard/favicon.svg" type="image/svg+xml">
</head>
<body>
<h1>Identity service</h1>
<p>Running in dev mode.</p>
<ul>
<li><a id="dashboard" href="{urls["dashboard"]}">Admin dashboard</a></li>
<li><a id="explorer" href="{urls["explorer"]}">API explorer</a> (Swagger UI)</li>
<li><a id="openapi" href="{urls["openapi"]}">OpenAPI document</a> (JSON)</li>
</ul>
<p>The dev project (fixed, public dev values; never use them in production): project id
<code>{project_id}</code>, admin key <code>{admin_key}</code>.</p>
</body>
</html>
"""
    return text.encode()


def hypercorn_bound_url() -> str | None:
    """The URL of the address this process serves on, when it is a worker of Hypercorn's command line (`hypercorn
    asgi_app:app`, `identity-service`): the worker is handed the sockets its master bound, so the address is the real
    one (`--bind 127.0.0.1:0` included). An unspecified address (0.0.0.0, ::) is given as loopback, which a browser
    on this machine can open. None elsewhere (another server, Hypercorn serving in its own process, a Unix socket)."""
    process = multiprocessing.current_process()
    target = getattr(process, "_target", None)
    if not str(getattr(target, "__module__", "")).startswith("hypercorn."):
        return None
    sockets = (getattr(process, "_kwargs", None) or {}).get("sockets")
    for scheme, bound in (("https", "secure_sockets"), ("http", "insecure_sockets")):
        for sock in getattr(sockets, bound, None) or ():
            if not isinstance(sock, socket.socket) or sock.family not in {socket.AF_INET, socket.AF_INET6}:
                continue
            try:
                host, port = sock.getsockname()[:2]
            except OSError:
                continue
            if host in {"0.0.0.0", ""}:  # noqa: S104 - read, not bound
                host = "127.0.0.1"
            elif host == "::":
                host = "::1"
            return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"
    return None
