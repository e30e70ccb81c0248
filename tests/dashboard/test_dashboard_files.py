"""The dashboard's files, without a browser: what the page's CSP and the issue forbid is absent, every module it
imports exists, and the hosts serve each file with its media type."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from identity_hosting.settings import DASHBOARD_DIR, Dashboard

SCRIPTS = sorted(DASHBOARD_DIR.glob("*.js"))
INDEX = DASHBOARD_DIR / "index.html"

#: What no script may contain, and why.
FORBIDDEN = {
    "console.": "the dashboard never logs (a key could end up in a log)",
    "localStorage": "keys are kept for the tab's session only (sessionStorage)",
    "innerHTML": "the service's data is put on the page as text only",
    "outerHTML": "the service's data is put on the page as text only",
    "insertAdjacentHTML": "the service's data is put on the page as text only",
    "document.write": "the service's data is put on the page as text only",
    "eval(": "the CSP forbids evaluating strings",
    "new Function": "the CSP forbids evaluating strings",
    ".style.": "styles live in style.css (the CSP forbids inline styles)",
    'setAttribute("style"': "styles live in style.css (the CSP forbids inline styles)",
}


def without_comments(source: str) -> str:
    """The script without its comments (block comments, and line comments that start a line or follow code)."""
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    return re.sub(r"(^|\s)//.*$", "", source, flags=re.M)


def test_the_page_has_no_inline_script_or_style_and_loads_only_its_own_files() -> None:
    html = INDEX.read_text()
    for tag, body in re.findall(r"(<script\b[^>]*>)(.*?)</script>", html, re.S):
        assert re.search(r'\bsrc="[\w.-]+\.js"', tag), f"a script from elsewhere: {tag}"
        assert body.strip() == "", f"an inline script: {body[:80]}"
    assert "<style" not in html
    assert not re.search(r"\sstyle=", html), "an inline style"
    assert not re.search(r"\son[a-z]+=", html), "an inline event handler"
    for url in re.findall(r'\b(?:src|href)="([^"#]+)"', html):
        # relative to the page, so that it works wherever the service is mounted
        assert re.fullmatch(r"[\w.-]+", url), f"the page loads {url} from elsewhere"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_scripts_never_log_never_write_html_and_talk_to_this_origin_only(script: Path) -> None:
    source = script.read_text()
    code = without_comments(source)
    for needle, reason in FORBIDDEN.items():
        assert needle not in code, f"{script.name} contains {needle!r}: {reason}"
    # The only absolute URL allowed is the example in the trusted-domains hint.
    assert not re.search(r"https?://(?!app\.example\.com)", source), "no absolute URL: this origin only"
    for imported in re.findall(r'from "(\./[\w.-]+\.js)"', source):
        assert (DASHBOARD_DIR / imported).is_file(), f"{script.name} imports {imported}, which does not exist"


def test_keys_travel_in_headers_only() -> None:
    source = (DASHBOARD_DIR / "api.js").read_text()
    assert '"x-service-super-secret-admin-key": who.adminKey' in source
    assert "window.sessionStorage" in source
    for script in SCRIPTS:
        text = script.read_text()
        assert not re.search(r"searchParams\.set\([^)]*[Kk]ey", text), f"{script.name} puts a key in a URL"


def test_the_hosts_serve_every_file_with_its_media_type() -> None:
    dashboard = Dashboard()
    expected = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
    names = [path.name for path in DASHBOARD_DIR.iterdir() if path.suffix in expected]
    assert {"index.html", "app.js", "api.js", "ui.js", "style.css", "favicon.svg"} <= set(names)
    for name in names:
        response = dashboard.response("GET", f"/dashboard/{name}")
        assert response is not None, name
        assert response.status == 200, name
        headers = dict(response.headers)
        assert headers["content-type"].startswith(expected[Path(name).suffix]), name
        assert "default-src 'self'" in headers["content-security-policy"]
    index = dashboard.response("GET", "/dashboard/")
    assert index is not None
    assert index.body == INDEX.read_bytes()
    redirect = dashboard.response("GET", "/dashboard")
    assert redirect is not None
    assert (redirect.status, redirect.header("location")) == (308, "dashboard/")
