"""Callback URLs through the service: a URL that a browser would open at another origin than the one we checked
is refused, stores no code and sends no mail; what is mailed is the normalised URL whose origin was trusted.

The origin a browser opens is computed with ada (the WHATWG URL parser of Node.js), independent of our code.
"""

from __future__ import annotations

from typing import Any

import ada_url
import pytest

from tests.support import PROJECT_ID, Harness, Reply, admin_headers, client_headers

TRUSTED = "https://app.example.com"


def _harness(**config: Any) -> Harness:
    h = Harness()
    config = {"allow_localhost": False, "domains": [{"domain": TRUSTED}], **config}
    assert h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": config}).status == 200
    return h


def _send(h: Harness, callback: str) -> Reply:
    body = {"email": "victim@example.com", "callback_url": callback}
    return h.request("POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), json=body)


def _assert_refused(h: Harness, reply: Reply) -> None:
    assert reply.status == 400, reply.body
    assert reply.known_error in {"SCHEMA_ERROR", "REDIRECT_URL_NOT_WHITELISTED"}
    assert h.outbox("victim@example.com") == []
    assert h.store.tenant(PROJECT_ID).codes == {}


def _mailed_link(h: Harness) -> str:
    (mail,) = h.outbox("victim@example.com")
    (link,) = [line for line in mail.text.splitlines() if line.startswith("http")]
    return link


def test_backslash_callback_is_refused() -> None:
    # urlsplit reads host app.example.com; a browser opens evil.example with the victim's code in the query.
    h = _harness()
    callback = "https://evil.example\\@app.example.com/handler"
    assert ada_url.URL(callback).host == "evil.example"
    _assert_refused(h, _send(h, callback))


@pytest.mark.parametrize(
    "callback",
    [
        pytest.param("https://evil.example\\.app.example.com/handler", id="backslash-in-host"),
        pytest.param("https://app.example.com\\@evil.example/handler", id="backslash-then-userinfo"),
        pytest.param("https://app.example.com@evil.example/handler", id="userinfo-host"),
        pytest.param("https://user:pass@app.example.com/handler", id="userinfo-on-trusted-host"),
        pytest.param("https://evil.example%2f@app.example.com/handler", id="encoded-slash-userinfo"),
        pytest.param("https://app.exa\tmple.com/handler", id="tab-in-host"),
        pytest.param("https://app.exa\nmple.com/handler", id="newline-in-host"),
        pytest.param("https://evil.example\r\n@app.example.com/handler", id="crlf-userinfo"),
        pytest.param("https://app.example.com\x00.evil.example/handler", id="nul-in-host"),
        pytest.param("\x01https://app.example.com/handler", id="leading-control"),
        pytest.param("https://app.example.com/han\tdler", id="tab-in-path"),
        pytest.param("https://%61pp.example.com/handler", id="percent-encoded-host"),
        pytest.param("https://app.example.com%2eevil.example/handler", id="percent-encoded-dot"),
        pytest.param("https://app.exampl\u0435.com/handler", id="cyrillic-e-host"),
        pytest.param("https://app\uff0eexample.com/handler", id="full-width-dot"),
        pytest.param("https://app.example.com./handler", id="trailing-dot-host"),
        pytest.param("javascript:alert(document.domain)//https://app.example.com/", id="javascript"),
        pytest.param("data:text/html,<script>alert(1)</script>", id="data"),
        pytest.param("https:app.example.com/handler", id="no-slashes"),
        pytest.param("https:/app.example.com/handler", id="one-slash"),
        pytest.param("https:///evil.example/handler", id="three-slashes"),
        pytest.param("https://app.example.com:/handler", id="empty-port"),
        pytest.param("https://app.example.com:99999/handler", id="port-out-of-range"),
    ],
)
def test_a_callback_a_browser_reads_differently_is_refused(callback: str) -> None:
    h = _harness()
    _assert_refused(h, _send(h, callback))


@pytest.mark.parametrize(
    ("callback", "mailed"),
    [
        pytest.param("https://APP.Example.COM/handler", "https://app.example.com/handler", id="uppercase-host"),
        pytest.param("HTTPS://app.example.com/handler", "https://app.example.com/handler", id="uppercase-scheme"),
        pytest.param("https://app.example.com:443/handler", "https://app.example.com/handler", id="default-port"),
        pytest.param("https://app.example.com", "https://app.example.com/", id="empty-path"),
        pytest.param("https://app.example.com?next=/x", "https://app.example.com/?next=%2Fx", id="query-no-path"),
    ],
)
def test_a_trusted_callback_is_mailed_in_the_form_a_browser_opens(callback: str, mailed: str) -> None:
    h = _harness()
    reply = _send(h, callback)
    assert reply.status == 200, reply.body
    link = _mailed_link(h)
    assert link.startswith(f"{mailed}{'&' if '?' in mailed else '?'}code=")
    assert ada_url.URL(link).origin == TRUSTED


@pytest.mark.parametrize(
    "callback",
    [
        "https://app.example.com:8443/handler",
        "http://app.example.com/handler",
        "https://app.example.com.evil.example/handler",
        "https://evilapp.example.com/handler",
        "https://eu.app.example.com/handler",
    ],
)
def test_only_the_trusted_origin_is_trusted(callback: str) -> None:
    h = _harness()
    reply = _send(h, callback)
    assert (reply.status, reply.known_error) == (400, "REDIRECT_URL_NOT_WHITELISTED")
    assert h.outbox("victim@example.com") == []


def test_a_wildcard_domain_trusts_subdomains_only() -> None:
    h = _harness(domains=[{"domain": "https://*.example.com"}])
    assert _send(h, "https://eu.example.com/handler").status == 200
    assert ada_url.URL(_mailed_link(h)).host == "eu.example.com"
    assert _send(h, "https://example.com/handler").known_error == "REDIRECT_URL_NOT_WHITELISTED"
    assert _send(h, "https://eu.example.com\\@evil.example/handler").known_error == "SCHEMA_ERROR"


@pytest.mark.parametrize(
    ("domain", "trusted", "untrusted"),
    [
        ("http://**.localhost", "http://a.b.localhost/cb", "http://localhost/cb"),
        ("http://stack-test.*", "http://stack-test.localhost/cb", "http://stack-test.localhost:3000/cb"),
        ("http://api-*:8114", "http://api-v2:8114/cb", "http://localhost:8114/cb"),
        ("https://*.example.com", "https://eu.example.com/cb", "https://a.eu.example.com/cb"),
    ],
)
def test_the_originals_wildcard_patterns_are_accepted_and_trusted(domain: str, trusted: str, untrusted: str) -> None:
    h = _harness(domains=[{"domain": domain}])
    assert _send(h, trusted).status == 200
    assert ada_url.URL(_mailed_link(h)).host == ada_url.URL(trusted).host
    assert _send(h, untrusted).known_error == "REDIRECT_URL_NOT_WHITELISTED"


@pytest.mark.parametrize(
    "domain",
    [
        "https://evil.example\\@app.example.com",
        "https://user@app.example.com",
        "https://app.example.com.",
        "https://%61pp.example.com",
        "https://app.exampl\u0435.com",
        "https://app.example.com\t",
        "javascript://app.example.com",
        "https://*.0.0.1",
    ],
)
def test_an_ambiguous_trusted_domain_is_refused_and_changes_nothing(domain: str) -> None:
    h = Harness()
    before = h.project()
    body = {"config": {"domains": [{"domain": domain}]}}
    reply = h.request("PATCH", "/api/v1/projects/current", admin_headers(), json=body)
    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR")
    assert "body.config.domains[0].domain is not a valid URL" in reply.json["details"]["message"]
    assert h.project() == before


def test_localhost_callbacks_follow_the_same_rule() -> None:
    h = _harness(allow_localhost=True)
    assert _send(h, "http://LOCALHOST:3000/cb").status == 200
    assert ada_url.URL(_mailed_link(h)).host == "localhost:3000"
    assert _send(h, "http://[::1]:3000/cb").status == 200
    assert _send(h, "http://localhost\\@evil.example/cb").known_error == "SCHEMA_ERROR"
    assert _send(h, "http://evil.example\\@localhost:3000/cb").known_error == "SCHEMA_ERROR"


def test_the_verification_callback_of_password_sign_up_follows_the_same_rule() -> None:
    h = _harness(credential_enabled=True)
    body = {"email": "victim@example.com", "password": "a long password", "verification_callback_url": ""}
    for bad in ("https://evil.example\\@app.example.com/verify", "javascript:alert(1)"):
        reply = h.request(
            "POST", "/api/v1/auth/password/sign-up", client_headers(), json={**body, "verification_callback_url": bad}
        )
        assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR")
        assert h.store.tenant(PROJECT_ID).users == {}
