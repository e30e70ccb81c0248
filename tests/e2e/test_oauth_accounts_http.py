"""Linked and connected accounts over real HTTP (reference part 2 §7.6), against a real Hypercorn on the memory
store and on Redis: a project configured with a provider through the internal project (its secret never read back),
an account linked by the server and read by its user, the plain refusals as text without a known-error header, the
known errors of the access-token route, and the account's removal."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_api_keys_http import Project

pytestmark = pytest.mark.e2e

SECRET = "e2e-client-secret-never-read-back-4d1f"
PROVIDERS = [{"id": "github", "type": "github", "client_id": "Iv1.e2e", "client_secret": SECRET}]


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def http(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    running = request.getfixturevalue("server" if request.param == "memory" else "redis_hypercorn")
    with httpx.Client(base_url=running.base_url, timeout=10.0) as client:
        yield client


def test_a_linked_account_over_http(http: httpx.Client) -> None:
    project = Project(http, oauth_providers=PROVIDERS)
    assert SECRET not in str(project.data)
    ada, ada_token = project.user()
    _, bob_token = project.user()

    linked = project.server(
        "POST",
        "/oauth-providers",
        json={
            "user_id": ada,
            "provider_config_id": "github",
            "account_id": "gh-1",
            "allow_sign_in": True,
            "allow_connected_accounts": True,
        },
    )
    assert linked.status_code == 201, linked.text
    row = linked.json()["id"]
    mine = project.call("client", "GET", "/oauth-providers?user_id=me", token=ada_token)
    assert [(i["id"], i["type"], "account_id" in i) for i in mine.json()["items"]] == [(row, "github", False)]

    theirs = project.call("client", "GET", f"/oauth-providers/{ada}/{row}", token=bob_token)
    assert theirs.status_code == 403
    assert theirs.text == "Client can only read OAuth providers for their own user."
    assert theirs.headers["content-type"].startswith("text/plain")
    assert "x-service-known-error" not in theirs.headers

    token = project.call("client", "POST", "/connected-accounts/me/github/gh-1/access-token", token=ada_token, json={})
    assert (token.status_code, token.headers.get("x-service-known-error")) == (
        400,
        "OAUTH_CONNECTION_DOES_NOT_HAVE_REQUIRED_SCOPE",
    )
    unknown = project.call("client", "POST", "/connected-accounts/me/discord/x/access-token", token=ada_token, json={})
    assert unknown.headers.get("x-service-known-error") == "OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED"

    gone = project.call("client", "DELETE", f"/oauth-providers/me/{row}", token=ada_token)
    assert gone.json() == {"success": True}
    missing = project.call("client", "GET", f"/oauth-providers/me/{row}", token=ada_token)
    assert (missing.status_code, missing.text) == (404, f"OAuth provider {row} for user {ada} not found")
    admin = project.call("admin", "GET", "/projects/current")
    assert SECRET not in admin.text
    assert admin.json()["config"]["oauth_providers"][0]["client_secret_last_four"] == SECRET[-4:]
