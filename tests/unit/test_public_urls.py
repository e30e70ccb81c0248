"""The URLs the service makes (the token issuer, and with it the JWKS URL a verifier derives) follow where it is
served: the request's scheme, Host and mount point (`Request.root_path`, which the hosts fill from ASGI `root_path`
and WSGI `SCRIPT_NAME`), unless a base URL is configured, which is then the whole public URL before /api/v1."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from identity_proto import MalformedRequest, Request, Service, ServiceOptions, run
from identity_proto.tokens import unverified_claims
from tests.support import PROJECT_ID, Harness, server_headers


def _issuer(h: Harness, **request: Any) -> str:
    """The `iss` of a token issued through a request made with `request`'s extra fields."""
    headers = (("host", "app.example.test"), ("content-type", "application/json"), *server_headers().items())

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        sent = Request("POST", path, headers, orjson.dumps(body), **request)
        response = run(h.service.handle(sent, h.now_ms, h.entropy), h.store)
        assert response.status in (200, 201), response.body
        data: dict[str, Any] = orjson.loads(response.body)
        return data

    user = post("/api/v1/users", {"display_name": "Ada"})
    token = post("/api/v1/auth/sessions", {"user_id": user["id"]})["access_token"]
    claims = unverified_claims(token)
    assert claims is not None
    return str(claims["iss"])


def test_the_issuer_is_the_host_at_the_root() -> None:
    assert _issuer(Harness()) == f"http://app.example.test/api/v1/projects/{PROJECT_ID}"


def test_the_issuer_includes_the_mount_point() -> None:
    assert _issuer(Harness(), root_path="/auth") == f"http://app.example.test/auth/api/v1/projects/{PROJECT_ID}"


def test_the_issuer_takes_the_scheme_the_request_came_in_on() -> None:
    assert _issuer(Harness(), scheme="https", root_path="/a/b") == (
        f"https://app.example.test/a/b/api/v1/projects/{PROJECT_ID}"
    )


def test_a_mount_point_is_percent_encoded_in_the_issuer() -> None:
    assert _issuer(Harness(), root_path="/my auth/ü") == (
        f"http://app.example.test/my%20auth/%C3%BC/api/v1/projects/{PROJECT_ID}"
    )


def test_a_configured_base_url_is_the_whole_public_url_and_wins_over_the_mount_point() -> None:
    h = Harness(service=Service(ServiceOptions(password_rounds=4, base_url="https://id.example.com/identity")))
    assert _issuer(h, root_path="/auth") == f"https://id.example.com/identity/api/v1/projects/{PROJECT_ID}"


@pytest.mark.parametrize("root_path", ["auth", "/auth/", "/", "/a\nb"])
def test_a_malformed_mount_point_is_refused(root_path: str) -> None:
    with pytest.raises(MalformedRequest, match="mount point"):
        Request("GET", "/api/v1", root_path=root_path)


@pytest.mark.parametrize("scheme", ["ftp", "HTTP", ""])
def test_a_scheme_other_than_http_or_https_is_refused(scheme: str) -> None:
    with pytest.raises(MalformedRequest, match="scheme"):
        Request("GET", "/api/v1", scheme=scheme)
