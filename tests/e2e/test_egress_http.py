"""Outbound requests over real HTTP, against a real Hypercorn in production mode: an OpenID Connect provider whose
issuer is on this machine (a loopback literal, or a name that resolves to loopback) is never called. The service's
OAuth client follows the same address rule as the webhook sender (`identity_proto.egress`): the sign-in fails with
the provider-failure error, and a listener on the issuer's port receives no connection at all."""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server

pytestmark = pytest.mark.e2e

PRODUCTION = {
    "IDENTITY_PROJECT_ID": "5b2e3f4a-6c7d-4e8f-9a0b-1c2d3e4f5a6b",
    "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_egress_client_key_0123456789",
    "IDENTITY_SECRET_SERVER_KEY": "ssk_egress_server_key_0123456789",
    "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_egress_admin_key_0123456789",
}


@dataclass
class Listener:
    """A loopback TCP listener that counts the connections it accepts (whatever they speak: TLS or plain HTTP)."""

    port: int
    accepted: list[str] = field(default_factory=list)


@contextmanager
def loopback_listener() -> Iterator[Listener]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)
    listener = Listener(server.getsockname()[1])
    stopping = threading.Event()

    def accept() -> None:
        while not stopping.is_set():
            try:
                connection, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            listener.accepted.append(f"{peer[0]}:{peer[1]}")
            connection.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        stopping.set()
        thread.join(timeout=5)
        server.close()


def _admin(base_url: str) -> httpx.Client:
    headers = {
        "x-service-access-type": "admin",
        "x-service-project-id": PRODUCTION["IDENTITY_PROJECT_ID"],
        "x-service-super-secret-admin-key": PRODUCTION["IDENTITY_SUPER_SECRET_ADMIN_KEY"],
    }
    return httpx.Client(base_url=f"{base_url}/api/v1", headers=headers, timeout=10.0)


def _authorize(base_url: str, provider: str) -> httpx.Response:
    """`app.signInWithOAuth` in json mode (the SDK's query)."""
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "client_id": PRODUCTION["IDENTITY_PROJECT_ID"],
        "client_secret": PRODUCTION["IDENTITY_PUBLISHABLE_CLIENT_KEY"],
        "redirect_uri": "http://localhost:3000/handler/oauth-callback",
        "scope": "legacy",
        "state": secrets.token_urlsafe(16),
        "grant_type": "authorization_code",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "response_type": "code",
        "type": "authenticate",
        "error_redirect_url": "http://localhost:3000/handler/error",
        "stack_response_mode": "json",
    }
    return httpx.get(f"{base_url}/api/v1/auth/oauth/authorize/{provider}", params=query, timeout=15.0)


@pytest.fixture(scope="module")
def production() -> Iterator[str]:
    server = start_hypercorn(PRODUCTION)
    try:
        yield server.base_url
    finally:
        stop_server(server)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]"])
def test_an_oidc_issuer_on_this_machine_is_never_called_in_production(production: str, host: str) -> None:
    with loopback_listener() as listener, _admin(production) as admin:
        issuer = f"https://{host}:{listener.port}"
        provider = {"id": "corp", "type": "oidc", "client_id": "corp-client", "client_secret": "corp-secret"}
        patched = admin.patch(
            "/projects/current",
            json={"config": {"allow_localhost": True, "oauth_providers": [{**provider, "issuer_url": issuer}]}},
        )
        assert patched.status_code == 200, patched.text
        started = _authorize(production, "corp")
        # The provider-failure error the flow gives any provider it cannot reach, not a 500.
        assert started.status_code == 503, started.text
        assert started.json()["code"] == "OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE"
        assert listener.accepted == []
