"""User and team API keys over real HTTP (reference part 2 §5), against a real Hypercorn on the memory store and on
Redis: every known error and every plain error of the section, the key format, the switches, ownership and
`$manage_api_keys`. Each test works in a project of its own, made through the internal project."""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import internal_headers

pytestmark = pytest.mark.e2e

NOWHERE = "33333333-3333-4333-8333-333333333333"
#: The original's format: prefix, 45 Crockford characters, the key id without dashes, the type, the flag, the
#: marker, the CRC32 of all that in hex.
KEY_FORMAT = re.compile(r"^(sk|pk)_([0-9a-hjkmnp-tv-z]{45})([0-9a-f]{32})(user|team)([0-3])574ck4u7h([0-9a-f]{8})$")


class Project:
    """A fresh project (through the internal project), its keys, and users signed in through server sessions."""

    def __init__(self, http: httpx.Client, **config: Any) -> None:
        self.http = http
        created = http.post(
            "/api/v1/internal/projects",
            headers=internal_headers(),
            json={"display_name": f"Keys {uuid.uuid4().hex[:6]}", "config": config},
        )
        assert created.status_code == 201, created.text
        self.data = created.json()
        self.id: str = self.data["id"]

    def headers(self, access: str, token: str | None = None) -> dict[str, str]:
        key_header, key = {
            "client": ("x-service-publishable-client-key", "publishable_client_key"),
            "server": ("x-service-secret-server-key", "secret_server_key"),
            "admin": ("x-service-super-secret-admin-key", "super_secret_admin_key"),
        }[access]
        headers = {"x-service-access-type": access, "x-service-project-id": self.id, key_header: self.data[key]}
        if token is not None:
            headers["x-service-access-token"] = token
        return headers

    def call(self, access: str, method: str, path: str, *, token: str | None = None, **kw: Any) -> httpx.Response:
        return self.http.request(method, f"/api/v1{path}", headers=self.headers(access, token), **kw)

    def server(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self.call("server", method, path, **kw)

    def user(self) -> tuple[str, str]:
        """A new user and an access token of theirs."""
        user = self.server("POST", "/users", json={"display_name": "Someone"})
        assert user.status_code == 201, user.text
        user_id = user.json()["id"]
        session = self.server("POST", "/auth/sessions", json={"user_id": user_id})
        assert session.status_code == 200, session.text
        return user_id, session.json()["access_token"]

    def team(self, creator_token: str | None = None) -> str:
        if creator_token is None:
            created = self.server("POST", "/teams", json={"display_name": "Crew"})
        else:
            me = self.call("client", "GET", "/users/me", token=creator_token).json()["id"]
            created = self.server("POST", "/teams", json={"display_name": "Crew", "creator_user_id": me})
        assert created.status_code == 201, created.text
        return str(created.json()["id"])


@pytest.fixture
def http(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=10.0) as client:
        yield client


@pytest.fixture
def project(http: httpx.Client) -> Project:
    return Project(http, allow_user_api_keys=True, allow_team_api_keys=True)


def _error(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.headers.get("x-service-known-error")


def _plain(response: httpx.Response) -> tuple[int, str, str | None, str]:
    return (
        response.status_code,
        response.headers["content-type"].split(";")[0],
        response.headers.get("x-service-known-error"),
        response.text,
    )


def _user_key(project: Project, token: str, **body: Any) -> httpx.Response:
    return project.call(
        "client",
        "POST",
        "/user-api-keys",
        token=token,
        json={"user_id": "me", "description": "Script", "expires_at_millis": None, **body},
    )


def _check(project: Project, family: str, key: str) -> httpx.Response:
    return project.server("POST", f"/{family}-api-keys/check", json={"api_key": key})


# --------------------------------------------------------------------------------------------------------------
# Creating, and the key's format


def test_a_user_creates_a_key_shown_once_in_the_originals_format(project: Project) -> None:
    user_id, token = project.user()

    created = _user_key(project, token, description="CI")

    assert created.status_code == 200, created.text
    body = created.json()
    key = body.pop("value")
    assert set(body) == {"id", "description", "is_public", "created_at_millis", "type", "user_id"}
    assert (body["description"], body["is_public"], body["type"], body["user_id"]) == ("CI", False, "user", user_id)
    match = KEY_FORMAT.match(key)
    assert match is not None, key
    assert len(key) == 102
    assert (match.group(1), match.group(3), match.group(4), match.group(5)) == (
        "sk",
        body["id"].replace("-", ""),
        "user",
        "1",  # not the original's cloud, not public
    )
    assert match.group(6) == format(zlib.crc32(key[:-8].encode()), "08x")
    read = project.call("client", "GET", f"/user-api-keys/{body['id']}", token=token)
    assert read.json()["value"] == {"last_four": key[-4:]}
    assert key not in read.text


def test_public_keys_start_with_pk_and_team_keys_say_team(project: Project) -> None:
    _user_id, token = project.user()
    team = project.team(token)

    public = _user_key(project, token, is_public=True).json()
    team_key = project.call(
        "client",
        "POST",
        "/team-api-keys",
        token=token,
        json={"team_id": team, "description": "Team", "expires_at_millis": None, "is_public": True},
    ).json()

    assert public["is_public"] is True
    assert public["value"].startswith("pk_")
    assert public["value"][-18:-17] == "3"  # the flag: self-hosted (1) + public (2)
    assert (team_key["type"], team_key["team_id"]) == ("team", team)
    assert team_key["value"][80:84] == "team"


def test_two_keys_never_share_a_secret(project: Project) -> None:
    _user_id, token = project.user()
    first, second = (_user_key(project, token).json()["value"] for _ in range(2))
    assert first[3:48] != second[3:48]


def test_expires_at_millis_is_required_and_a_past_expiry_is_accepted(project: Project) -> None:
    _user_id, token = project.user()
    missing = project.call("client", "POST", "/user-api-keys", token=token, json={"user_id": "me", "description": "x"})
    assert _error(missing) == (400, "SCHEMA_ERROR")
    assert "body.expires_at_millis must be defined" in missing.json()["error"]

    past = _user_key(project, token, expires_at_millis=1_000)

    assert past.status_code == 200
    assert past.json()["expires_at_millis"] == 1_000
    assert _error(_check(project, "user", past.json()["value"])) == (401, "API_KEY_EXPIRED")


def test_the_server_creates_keys_for_any_user_and_a_missing_owner_is_not_found(project: Project) -> None:
    user_id, _token = project.user()
    created = project.server(
        "POST", "/user-api-keys", json={"user_id": user_id, "description": "d", "expires_at_millis": None}
    )
    assert (created.status_code, created.json()["user_id"]) == (200, user_id)
    missing_user = project.server(
        "POST", "/user-api-keys", json={"user_id": NOWHERE, "description": "d", "expires_at_millis": None}
    )
    missing_team = project.server(
        "POST", "/team-api-keys", json={"team_id": NOWHERE, "description": "d", "expires_at_millis": None}
    )
    assert _error(missing_user) == (404, "USER_NOT_FOUND")
    assert _error(missing_team) == (404, "TEAM_NOT_FOUND")
    me_without_user = project.server(
        "POST", "/user-api-keys", json={"user_id": "me", "description": "d", "expires_at_millis": None}
    )
    assert _error(me_without_user) == (400, "CANNOT_GET_OWN_USER_WITHOUT_USER")


# --------------------------------------------------------------------------------------------------------------
# The switches


def test_both_families_are_off_by_default_with_plain_400s_everywhere(http: httpx.Client) -> None:
    project = Project(http)
    user_id, token = project.user()
    config = project.call("client", "GET", "/projects/current").json()["config"]
    assert (config["allow_user_api_keys"], config["allow_team_api_keys"]) == (False, False)
    user_off = (400, "text/plain", None, "User API keys are not enabled for this project.")
    team_off = (400, "text/plain", None, "Team API keys are not enabled for this project.")

    assert _plain(_user_key(project, token)) == user_off
    assert _plain(project.call("client", "GET", "/user-api-keys?user_id=me", token=token)) == user_off
    assert _plain(project.call("client", "GET", f"/user-api-keys/{NOWHERE}", token=token)) == user_off
    assert _plain(project.call("client", "PATCH", f"/user-api-keys/{NOWHERE}", token=token, json={})) == user_off
    assert _plain(_check(project, "user", "sk_whatever")) == user_off
    assert _plain(project.server("GET", f"/team-api-keys?team_id={NOWHERE}")) == team_off
    assert _plain(_check(project, "team", "sk_whatever")) == team_off
    assert project.server("GET", f"/users/{user_id}").status_code == 200


def test_the_admin_switches_each_family_on_by_itself(http: httpx.Client) -> None:
    project = Project(http)
    _user_id, token = project.user()
    on = project.call("admin", "PATCH", "/projects/current", json={"config": {"allow_team_api_keys": True}})
    assert on.status_code == 200
    assert (on.json()["config"]["allow_team_api_keys"], on.json()["config"]["allow_user_api_keys"]) == (True, False)
    team = project.team(token)

    made = project.call(
        "client",
        "POST",
        "/team-api-keys",
        token=token,
        json={"team_id": team, "description": "d", "expires_at_millis": None},
    )

    assert made.status_code == 200
    assert _plain(_user_key(project, token))[3] == "User API keys are not enabled for this project."
    bad = project.call("admin", "PATCH", "/projects/current", json={"config": {"allow_user_api_keys": "yes"}})
    assert _error(bad) == (400, "SCHEMA_ERROR")


# --------------------------------------------------------------------------------------------------------------
# Listing, reading, updating


def test_list_is_newest_first_with_revoked_and_expired_keys_and_needs_user_id(project: Project) -> None:
    user_id, token = project.user()
    first = _user_key(project, token, description="first").json()
    second = _user_key(project, token, description="second", expires_at_millis=1).json()
    project.call("client", "PATCH", f"/user-api-keys/{first['id']}", token=token, json={"revoked": True})

    listed = project.call("client", "GET", f"/user-api-keys?user_id={user_id}", token=token)

    assert listed.status_code == 200
    items = listed.json()["items"]
    assert listed.json()["is_paginated"] is False
    assert [item["description"] for item in items] == ["second", "first"]
    assert "manually_revoked_at_millis" in items[1]
    assert items[0]["expires_at_millis"] == 1
    assert items[0]["value"] == {"last_four": second["value"][-4:]}
    assert project.call("client", "GET", "/user-api-keys?user_id=me", token=token).json() == listed.json()
    no_user_id = project.server("GET", "/user-api-keys")
    assert _error(no_user_id) == (400, "SCHEMA_ERROR")
    assert no_user_id.json()["error"] == "user_id is required for user API keys"
    assert no_user_id.json()["details"] == {"message": "user_id is required for user API keys"}
    assert _error(project.server("GET", "/team-api-keys")) == (400, "SCHEMA_ERROR")


def test_read_needs_no_user_id_and_refuses_a_stray_team_id(project: Project) -> None:
    user_id, token = project.user()
    key = _user_key(project, token).json()

    for access, extra in (("client", {"token": token}), ("server", {})):
        read = project.call(access, "GET", f"/user-api-keys/{key['id']}", **extra)
        assert read.status_code == 200
        assert read.json()["user_id"] == user_id
    stray = project.call("client", "GET", f"/user-api-keys/{key['id']}?user_id={user_id}&team_id=x", token=token)
    assert _error(stray) == (400, "SCHEMA_ERROR")
    assert "query contains unknown properties: team_id" in stray.json()["error"]
    assert _error(project.server("GET", f"/user-api-keys/{NOWHERE}")) == (404, "API_KEY_NOT_FOUND")
    assert _error(project.server("GET", "/user-api-keys/not-a-uuid")) == (400, "SCHEMA_ERROR")


def test_revoking_keeps_the_first_time_and_the_description_can_change(project: Project) -> None:
    _user_id, token = project.user()
    key = _user_key(project, token).json()
    path = f"/user-api-keys/{key['id']}"

    first = project.call("client", "PATCH", path, token=token, json={"revoked": True})
    second = project.call("client", "PATCH", path, token=token, json={"revoked": True, "description": "old"})

    assert first.status_code == second.status_code == 200
    revoked_at = first.json()["manually_revoked_at_millis"]
    assert isinstance(revoked_at, int)
    assert second.json()["manually_revoked_at_millis"] == revoked_at
    assert second.json()["description"] == "old"
    assert _error(_check(project, "user", key["value"])) == (401, "API_KEY_REVOKED")


@pytest.mark.parametrize(
    "body",
    [{"revoked": False}, {"user_id": NOWHERE}, {"team_id": NOWHERE}, {"expires_at_millis": 5}, {"description": None}],
    ids=["un-revoke", "user_id", "team_id", "expiry", "null-description"],
)
def test_updates_accept_only_a_description_and_revoked_true(project: Project, body: dict[str, Any]) -> None:
    _user_id, token = project.user()
    key = _user_key(project, token).json()

    refused = project.call("client", "PATCH", f"/user-api-keys/{key['id']}", token=token, json=body)

    assert _error(refused) == (400, "SCHEMA_ERROR")
    assert _check(project, "user", key["value"]).json()["description"] == "Script"


# --------------------------------------------------------------------------------------------------------------
# Ownership


def test_clients_manage_only_their_own_user_keys(project: Project) -> None:
    ada, ada_token = project.user()
    _bob, bob_token = project.user()
    key = _user_key(project, ada_token).json()
    own_only = (403, "text/plain", None, "Client can only manage their own api keys")

    assert _plain(_user_key(project, bob_token, user_id=ada)) == own_only
    assert _plain(project.call("client", "GET", f"/user-api-keys?user_id={ada}", token=bob_token)) == own_only
    assert _plain(project.call("client", "GET", f"/user-api-keys/{key['id']}", token=bob_token)) == own_only
    patch = project.call("client", "PATCH", f"/user-api-keys/{key['id']}", token=bob_token, json={"revoked": True})
    assert _plain(patch) == own_only
    assert _check(project, "user", key["value"]).status_code == 200  # not revoked


def test_clients_without_a_user_are_refused(project: Project) -> None:
    ada, ada_token = project.user()
    key = _user_key(project, ada_token).json()
    no_user = project.call(
        "client", "POST", "/user-api-keys", json={"user_id": ada, "description": "d", "expires_at_millis": None}
    )
    assert _error(no_user) == (401, "USER_AUTHENTICATION_REQUIRED")
    assert _error(project.call("client", "GET", f"/user-api-keys/{key['id']}")) == (401, "USER_AUTHENTICATION_REQUIRED")
    assert _error(project.call("client", "GET", "/user-api-keys?user_id=me")) == (
        400,
        "CANNOT_GET_OWN_USER_WITHOUT_USER",
    )


def test_team_keys_need_manage_api_keys_and_hide_the_team_otherwise(project: Project) -> None:
    _ada, ada_token = project.user()  # the team's creator: team_admin holds $manage_api_keys
    bob, bob_token = project.user()
    _eve, eve_token = project.user()
    team = project.team(ada_token)
    assert project.server("POST", f"/team-memberships/{team}/{bob}", json={}).status_code == 201
    body = {"team_id": team, "description": "Team", "expires_at_millis": None}
    made = project.call("client", "POST", "/team-api-keys", token=ada_token, json=body)
    assert made.status_code == 200, made.text
    key = made.json()

    for token in (bob_token, eve_token):  # a member without the permission, a stranger
        assert _error(project.call("client", "POST", "/team-api-keys", token=token, json=body)) == (
            404,
            "API_KEY_NOT_FOUND",
        )
        listed = project.call("client", "GET", f"/team-api-keys?team_id={team}", token=token)
        assert _error(listed) == (404, "API_KEY_NOT_FOUND")
        read = project.call("client", "GET", f"/team-api-keys/{key['id']}?team_id={team}", token=token)
        assert _error(read) == (404, "API_KEY_NOT_FOUND")
    unknown_team = project.call("client", "GET", f"/team-api-keys?team_id={NOWHERE}", token=eve_token)
    assert _error(unknown_team) == (404, "API_KEY_NOT_FOUND")  # the same answer as for a team that exists

    granted = project.server("POST", f"/team-permissions/{team}/{bob}/$manage_api_keys", json={})
    assert granted.status_code == 201
    listed = project.call("client", "GET", f"/team-api-keys?team_id={team}", token=bob_token)
    assert [item["id"] for item in listed.json()["items"]] == [key["id"]]
    revoked = project.call(
        "client", "PATCH", f"/team-api-keys/{key['id']}?team_id={team}", token=bob_token, json={"revoked": True}
    )
    assert revoked.status_code == 200
    assert _error(_check(project, "team", key["value"])) == (401, "API_KEY_REVOKED")
    assert project.server("GET", f"/team-api-keys?team_id={team}").status_code == 200


def test_a_key_of_the_other_family_is_not_found_through_this_familys_path(project: Project) -> None:
    _ada, token = project.user()
    team = project.team(token)
    user_key = _user_key(project, token).json()
    team_key = project.call(
        "client",
        "POST",
        "/team-api-keys",
        token=token,
        json={"team_id": team, "description": "d", "expires_at_millis": None},
    ).json()

    assert _error(project.server("GET", f"/team-api-keys/{user_key['id']}?team_id={team}")) == (
        404,
        "API_KEY_NOT_FOUND",
    )
    assert _error(project.server("PATCH", f"/user-api-keys/{team_key['id']}", json={"revoked": True})) == (
        404,
        "API_KEY_NOT_FOUND",
    )
    assert _check(project, "team", team_key["value"]).status_code == 200


# --------------------------------------------------------------------------------------------------------------
# Check


def test_check_answers_the_key_or_each_of_its_four_errors(project: Project) -> None:
    _ada, token = project.user()
    team = project.team(token)
    key = _user_key(project, token).json()
    team_key = project.call(
        "client",
        "POST",
        "/team-api-keys",
        token=token,
        json={"team_id": team, "description": "d", "expires_at_millis": None},
    ).json()

    ok = _check(project, "user", key["value"])
    assert ok.status_code == 200
    assert ok.json() == project.server("GET", f"/user-api-keys/{key['id']}").json()

    not_found = _check(project, "user", "sk_this_is_a_fake_api_key_123456789")
    assert _error(not_found) == (404, "API_KEY_NOT_FOUND")
    assert not_found.json() == {"code": "API_KEY_NOT_FOUND", "error": "API key not found."}
    wrong = _check(project, "user", team_key["value"])
    assert _error(wrong) == (400, "WRONG_API_KEY_TYPE")
    assert wrong.json() == {
        "code": "WRONG_API_KEY_TYPE",
        "error": "This endpoint is for user API keys, but a team API key was provided.",
        "details": {"expected_type": "user", "actual_type": "team"},
    }
    assert _error(_check(project, "team", key["value"]))[1] == "WRONG_API_KEY_TYPE"
    project.call("client", "PATCH", f"/user-api-keys/{key['id']}", token=token, json={"revoked": True})
    revoked = _check(project, "user", key["value"])
    assert revoked.json() == {"code": "API_KEY_REVOKED", "error": "API key has been revoked."}
    expired = _check(project, "user", _user_key(project, token, expires_at_millis=1).json()["value"])
    assert expired.json() == {"code": "API_KEY_EXPIRED", "error": "API key has expired."}
    assert expired.status_code == 401


def test_check_is_for_server_and_admin_only(project: Project) -> None:
    _ada, token = project.user()
    key = _user_key(project, token).json()["value"]
    client = project.call("client", "POST", "/user-api-keys/check", token=token, json={"api_key": key})
    assert _error(client) == (401, "INSUFFICIENT_ACCESS_TYPE")
    assert project.call("admin", "POST", "/user-api-keys/check", json={"api_key": key}).status_code == 200
    assert _error(project.server("POST", "/user-api-keys/check", json={})) == (400, "SCHEMA_ERROR")


def test_keys_go_with_their_user_and_their_team(project: Project) -> None:
    ada, token = project.user()
    team = project.team(token)
    key = _user_key(project, token).json()
    team_key = project.call(
        "client",
        "POST",
        "/team-api-keys",
        token=token,
        json={"team_id": team, "description": "d", "expires_at_millis": None},
    ).json()

    assert project.server("DELETE", f"/teams/{team}").status_code == 200
    assert _error(_check(project, "team", team_key["value"])) == (404, "API_KEY_NOT_FOUND")
    assert _check(project, "user", key["value"]).status_code == 200
    assert project.server("DELETE", f"/users/{ada}").status_code == 200
    assert _error(_check(project, "user", key["value"])) == (404, "API_KEY_NOT_FOUND")
    assert _error(project.server("GET", f"/user-api-keys/{key['id']}")) == (404, "API_KEY_NOT_FOUND")
