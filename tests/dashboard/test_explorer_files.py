"""The API explorer and dev mode's home page without a browser: the explorer's files (Swagger UI vendored with its
licence and the digests its note gives; a page with no inline script that loads only its own files), their routes
and headers in both hosts, the home page at `/` (dev mode, browsers only; API clients and production mode get the
core's 404 as before), and the start-up log's URL lines. The browser tests are test_api_explorer.py and
test_mounted_under_a_prefix.py."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from asgi_app import IdentityASGI
from identity_hosting.pages import EXPLORER_PREFIX, Explorer, hypercorn_bound_url, wants_html
from identity_hosting.settings import DEV_KEYS, DEV_PROJECT_ID, Settings
from identity_hosting.wsgi import IdentityWSGI
from identity_proto import SeededEntropy
from tests.dashboard.test_dashboard_files import FORBIDDEN, without_comments

EXPLORER_DIR = Path(__file__).resolve().parents[2] / "identity_hosting" / "explorer"
VENDORED = EXPLORER_DIR / "swagger-ui"
PRODUCTION = {
    "IDENTITY_PROJECT_ID": "5f0c6e5e-6a58-4c53-9f4b-3c1f0b8f7a10",
    "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_" + "p" * 30,
    "IDENTITY_SECRET_SERVER_KEY": "ssk_" + "s" * 30,
    "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_" + "a" * 30,
    "IDENTITY_PASSWORD_ROUNDS": "4",
}
BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"


# ------------------------------------------------------------------------------------------------------------
# The files


def test_swagger_ui_is_vendored_whole_with_its_licence_and_the_digests_its_note_gives() -> None:
    note = (VENDORED / "VENDORED.md").read_text()
    for name in ("LICENSE", "NOTICE", "swagger-ui-bundle.js.LICENSE.txt"):
        assert (VENDORED / name).is_file(), name
    assert "Apache License" in (VENDORED / "LICENSE").read_text()
    digests = dict(re.findall(r"\| `([\w.-]+)` \| `([0-9a-f]{64})` \|", note))
    assert set(digests) == {"swagger-ui-bundle.js", "swagger-ui.css"}
    for name, digest in digests.items():
        assert hashlib.sha256((VENDORED / name).read_bytes()).hexdigest() == digest, f"{name} differs from its note"


def test_the_page_has_no_inline_script_or_style_and_loads_only_its_own_files() -> None:
    html = (EXPLORER_DIR / "index.html").read_text()
    scripts = re.findall(r"(<script\b[^>]*>)(.*?)</script>", html, re.S)
    assert [re.search(r'src="([^"]+)"', tag).group(1) for tag, _ in scripts] == [  # type: ignore[union-attr]
        "swagger-ui/swagger-ui-bundle.js",
        "init.js",
    ]
    assert all(body.strip() == "" for _, body in scripts), "an inline script"
    assert "<style" not in html
    assert not re.search(r"\sstyle=", html), "an inline style"
    assert not re.search(r"\son[a-z]+=", html), "an inline event handler"
    for url in re.findall(r'\b(?:src|href)="([^"#]+)"', html):
        # relative to the page, so that it works wherever the service is mounted; nothing from another origin
        assert re.fullmatch(r"(\.\./)?[\w./-]+", url), f"the page loads {url} from elsewhere"
        assert not url.startswith("/"), url
        assert "//" not in url, url


def test_the_init_script_talks_to_this_origin_only_and_keeps_no_key() -> None:
    code = without_comments((EXPLORER_DIR / "init.js").read_text())
    for needle, reason in FORBIDDEN.items():
        if needle not in {"innerHTML", ".style."}:  # (rules of the dashboard's own rendering code)
            assert needle not in code, f"init.js contains {needle!r}: {reason}"
    assert "innerHTML" not in code
    assert not re.search(r"https?://", code), "no absolute URL: this origin only"
    assert 'new URL("api/v1/openapi.json", root)' in code
    assert "queryConfigEnabled: false" in code  # no ?url= may point it at another document
    assert "validatorUrl: null" in code  # the document is never sent to validator.swagger.io
    assert "persistAuthorization: false" in code  # keys typed into "Authorize" are not stored


def test_the_explorer_serves_every_file_with_its_media_type_and_strict_headers() -> None:
    explorer = Explorer()
    assert explorer.names() == [
        "explorer.css",
        "index.html",
        "init.js",
        "swagger-ui/swagger-ui-bundle.js",
        "swagger-ui/swagger-ui.css",
    ]
    types = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
    for name in explorer.names():
        response = explorer.response("GET", f"{EXPLORER_PREFIX}/{name}")
        assert response is not None
        assert response.status == 200
        headers = dict(response.headers)
        assert headers["content-type"].startswith(types[Path(name).suffix])
        assert response.body == (EXPLORER_DIR / name).read_bytes()
        csp = headers["content-security-policy"]
        assert "default-src 'self'" in csp
        assert "connect-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp
        assert "unsafe-eval" not in csp
        assert "https:" not in csp
        assert "*" not in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["x-frame-options"] == "DENY"


def test_the_explorer_redirects_refuses_writes_and_knows_its_files() -> None:
    explorer = Explorer()
    redirect = explorer.response("GET", "/explorer")
    assert redirect is not None
    assert (redirect.status, dict(redirect.headers)["location"]) == (308, "explorer/")  # relative: keeps the mount
    index = explorer.response("GET", "/explorer/")
    assert index is not None
    assert index.body == (EXPLORER_DIR / "index.html").read_bytes()
    head = explorer.response("HEAD", "/explorer/init.js")
    assert head is not None
    assert (head.status, head.body) == (200, b"")
    missing = explorer.response("GET", "/explorer/nothing.js")
    assert missing is not None
    assert missing.status == 404
    refused = explorer.response("POST", "/explorer/")
    assert refused is not None
    assert (refused.status, dict(refused.headers)["allow"]) == (405, "GET, HEAD")
    for other in ("/explorers", "/api/v1/explorer", "/"):
        assert explorer.response("GET", other) is None
    # Licences and the vendoring note are in the package, not served (only pages, scripts, styles, images are).
    for name in ("LICENSE", "NOTICE", "VENDORED.md", "swagger-ui-bundle.js.LICENSE.txt"):
        found = explorer.response("GET", f"/explorer/swagger-ui/{name}")
        assert found is not None
        assert found.status == 404


# ------------------------------------------------------------------------------------------------------------
# The hosts


def _wsgi_get(app: IdentityWSGI, path: str, headers: dict[str, str], script_name: str = "") -> httpx.Response:
    transport = httpx.WSGITransport(app=app, script_name=script_name)
    with httpx.Client(transport=transport, base_url="http://test") as client:
        return client.get(script_name + path, headers=headers)


def _asgi_get(app: IdentityASGI, path: str, headers: dict[str, str], root_path: str = "") -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, root_path=root_path)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get(root_path + path, headers=headers)

    return asyncio.run(main())


@pytest.fixture(params=["asgi", "wsgi"])
def get(request: pytest.FixtureRequest) -> Any:
    """GET through one host, built with the settings given (the first call's), in process."""
    apps: list[Any] = []

    def call(settings: Settings, path: str, headers: dict[str, str] | None = None, mount: str = "") -> httpx.Response:
        if not apps:
            if request.param == "asgi":
                apps.append(IdentityASGI(settings, entropy=SeededEntropy(1)))
            else:
                apps.append(IdentityWSGI(settings, entropy=SeededEntropy(1), webhook_delivery=False))
        app = apps[0]
        if request.param == "asgi":
            return _asgi_get(app, path, headers or {}, mount)
        return _wsgi_get(app, path, headers or {}, mount)

    yield call
    for app in apps:
        if isinstance(app, IdentityWSGI):
            app.close()


def test_the_hosts_serve_the_explorer_in_dev_and_in_production_mode(get: Any) -> None:
    for settings in (Settings(), Settings.from_env(PRODUCTION)):
        page = get(settings, "/explorer/")
        assert page.status_code == 200
        assert "swagger-ui/swagger-ui-bundle.js" in page.text
        assert "unsafe-inline" not in page.headers["content-security-policy"]
        bundle = get(settings, "/explorer/swagger-ui/swagger-ui-bundle.js")
        assert bundle.status_code == 200
        assert bundle.content == (VENDORED / "swagger-ui-bundle.js").read_bytes()
        document = get(settings, "/api/v1/openapi.json")  # what init.js loads, public in both modes
        assert document.status_code == 200
        assert "/api/v1/users" in document.json()["paths"]


def test_dev_mode_answers_a_browser_at_the_root_with_links_to_the_pages(get: Any) -> None:
    page = get(Settings(), "/", {"accept": BROWSER_ACCEPT})
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["vary"] == "accept"
    assert page.headers["content-security-policy"].startswith("default-src 'none';")
    links = re.findall(r'<a id="(\w+)" href="([^"]+)"', page.text)
    assert links == [("dashboard", "/dashboard/"), ("explorer", "/explorer/"), ("openapi", "/api/v1/openapi.json")]
    assert DEV_PROJECT_ID in page.text
    assert DEV_KEYS.super_secret_admin_key in page.text  # public dev values, printed at start-up and in the README
    assert DEV_KEYS.secret_server_key not in page.text
    assert "<script" not in page.text
    for _name, href in links:
        assert get(Settings(), href).status_code == 200, href


def test_the_root_pages_links_follow_the_mount_point(get: Any) -> None:
    page = get(Settings(), "/", {"accept": "text/html"}, mount="/auth")
    assert page.status_code == 200
    links = re.findall(r'href="([^"]+)"', page.text)
    assert links == ["/auth/dashboard/favicon.svg", "/auth/dashboard/", "/auth/explorer/", "/auth/api/v1/openapi.json"]


@pytest.mark.parametrize(
    "accept", [None, "*/*", "application/json", "text/plain", "text/html;q=0", "application/json, text/*;q=0.5"]
)
def test_api_clients_at_the_root_get_the_404_they_always_got(get: Any, accept: str | None) -> None:
    answer = get(Settings(), "/", {"accept": accept} if accept is not None else {})
    assert answer.status_code == 404
    assert answer.headers["x-service-known-error"] == "ROUTE_NOT_FOUND"
    assert answer.json()["code"] == "ROUTE_NOT_FOUND"


def test_production_mode_has_no_page_at_the_root(get: Any) -> None:
    answer = get(Settings.from_env(PRODUCTION), "/", {"accept": BROWSER_ACCEPT})
    assert answer.status_code == 404
    assert answer.json()["code"] == "ROUTE_NOT_FOUND"


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (BROWSER_ACCEPT, True),
        ("text/html", True),
        ("TEXT/HTML; charset=utf-8", True),
        ("application/json;q=1, text/html;q=0.1", True),
        ("text/html;q=0", False),
        ("text/html;q=0.0", False),
        ("text/html;q=x", False),
        ("*/*", False),
        ("text/*", False),
        ("application/json", False),
        ("", False),
        (None, False),
    ],
)
def test_wants_html(accept: str | None, html: bool) -> None:
    assert wants_html(accept) is html


# ------------------------------------------------------------------------------------------------------------
# The start-up log


def _announced(caplog: pytest.LogCaptureFixture, settings: Settings, bound_url: str | None) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="identity_service"):
        settings.announce(bound_url)
    return [record.getMessage() for record in caplog.records]


def test_dev_mode_logs_the_dashboard_and_the_explorer_one_line_each(caplog: pytest.LogCaptureFixture) -> None:
    lines = _announced(caplog, Settings(), "http://127.0.0.1:8123")
    assert "dashboard: http://127.0.0.1:8123/dashboard/" in lines
    assert (
        "API explorer: http://127.0.0.1:8123/explorer/ (OpenAPI document: http://127.0.0.1:8123/api/v1/openapi.json)"
        in lines
    )
    # The public URL the operator set wins (it is where a browser reaches the service, mount point included).
    lines = _announced(caplog, Settings(base_url="https://id.example.test/auth"), "http://127.0.0.1:8123")
    assert "dashboard: https://id.example.test/auth/dashboard/" in lines
    # Neither known (a WSGI server, an embedding application): the paths, on whatever address serves them.
    lines = _announced(caplog, Settings(), None)
    assert "dashboard: <this server's URL>/dashboard/" in lines


def test_production_mode_logs_no_page_urls(caplog: pytest.LogCaptureFixture) -> None:
    lines = _announced(caplog, Settings.from_env(PRODUCTION), "http://127.0.0.1:8123")
    assert not [line for line in lines if "dashboard" in line or "explorer" in line], lines


def test_the_bound_address_is_read_only_in_a_worker_of_hypercorns_command_line() -> None:
    assert hypercorn_bound_url() is None  # this process is pytest's
