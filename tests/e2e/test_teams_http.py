"""Teams, memberships, permissions and member profiles over real HTTP (reference §5): every status and
known-error code the issue lists, for client and server, against a real Hypercorn process."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.test_sign_in_http import _code, _new_email, _sign_in
from tests.support import admin_headers, client_headers, server_headers

pytestmark = pytest.mark.e2e

NOWHERE = "33333333-3333-4333-8333-333333333333"


class People:
    """Ada created a team (client), Bob was added by the server, Eve is a stranger."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        assert (
            http.patch(
                "/api/v1/projects/current",
                headers=admin_headers(),
                json={"config": {"client_team_creation_enabled": True}},
            ).status_code
            == 200
        )
        self.ada, self.bob, self.eve = (self._person() for _ in range(3))
        created = self.call(self.ada, "POST", "/api/v1/teams", json={"display_name": f"Crew {uuid.uuid4().hex[:6]}"})
        assert created.status_code == 201, created.text
        self.team = created.json()["id"]
        added = http.post(
            f"/api/v1/team-memberships/{self.team}/{self.bob['user_id']}", headers=server_headers(), json={}
        )
        assert (added.status_code, added.json()) == (201, {"team_id": self.team, "user_id": self.bob["user_id"]})

    def _person(self) -> dict[str, Any]:
        reply = _sign_in(self.http, _code(self.http, _new_email()))
        assert reply.status_code == 200
        return dict(reply.json())

    def call(self, who: dict[str, Any], method: str, path: str, **kw: Any) -> httpx.Response:
        headers = client_headers(**{"x-service-access-token": who["access_token"]})
        return self.http.request(method, path, headers=headers, **kw)


def _error(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.headers.get("x-service-known-error")


@pytest.fixture
def people(http: httpx.Client) -> People:
    return People(http)


def test_membership_codes(people: People) -> None:
    http, team, bob = people.http, people.team, people.bob["user_id"]
    assert _error(http.post(f"/api/v1/team-memberships/{team}/{NOWHERE}", headers=server_headers(), json={})) == (
        404,
        "USER_NOT_FOUND",
    )
    assert _error(http.post(f"/api/v1/team-memberships/{NOWHERE}/{bob}", headers=server_headers(), json={})) == (
        404,
        "TEAM_NOT_FOUND",
    )
    assert _error(http.post(f"/api/v1/team-memberships/{team}/{bob}", headers=server_headers(), json={})) == (
        409,
        "TEAM_MEMBERSHIP_ALREADY_EXISTS",
    )
    assert _error(people.call(people.ada, "POST", f"/api/v1/team-memberships/{team}/{bob}", json={})) == (
        401,
        "INSUFFICIENT_ACCESS_TYPE",
    )
    assert _error(people.call(people.eve, "DELETE", f"/api/v1/team-memberships/{team}/{bob}")) == (
        404,
        "TEAM_MEMBERSHIP_NOT_FOUND",
    )
    assert _error(people.call(people.bob, "DELETE", f"/api/v1/team-memberships/{team}/{people.ada['user_id']}")) == (
        401,
        "TEAM_PERMISSION_REQUIRED",
    )


def test_team_codes(people: People) -> None:
    http, team = people.http, people.team
    assert _error(people.call(people.eve, "GET", f"/api/v1/teams/{team}")) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")
    assert _error(http.get(f"/api/v1/teams/{NOWHERE}", headers=server_headers())) == (404, "TEAM_NOT_FOUND")
    denied = people.call(people.bob, "PATCH", f"/api/v1/teams/{team}", json={"display_name": "x"})
    assert _error(denied) == (401, "TEAM_PERMISSION_REQUIRED")
    assert denied.json()["details"]["permission_id"] == "$update_team"
    assert _error(people.call(people.bob, "DELETE", f"/api/v1/teams/{team}")) == (401, "TEAM_PERMISSION_REQUIRED")
    assert _error(people.call(people.bob, "GET", "/api/v1/teams", params={"user_id": people.ada["user_id"]})) == (
        403,
        "CLIENT_CAN_ONLY_LIST_OWN_TEAMS",
    )
    assert (
        people.call(people.ada, "PATCH", f"/api/v1/teams/{team}", json={"display_name": "Renamed"}).json()[
            "display_name"
        ]
        == "Renamed"
    )
    assert [
        t["id"] for t in people.call(people.bob, "GET", "/api/v1/teams", params={"user_id": "me"}).json()["items"]
    ] == [team]


def test_permission_codes(people: People) -> None:
    http, team, bob = people.http, people.team, people.bob["user_id"]
    base = f"/api/v1/team-permissions/{team}/{bob}"
    assert http.post(f"{base}/$update_team", headers=server_headers(), json={}).status_code == 201
    assert (
        people.call(people.bob, "PATCH", f"/api/v1/teams/{team}", json={"display_name": "Bob's now"}).status_code == 200
    )
    assert http.delete(f"{base}/$update_team", headers=server_headers()).json() == {"success": True}
    assert _error(http.delete(f"{base}/$update_team", headers=server_headers())) == (401, "TEAM_PERMISSION_NOT_FOUND")
    assert _error(
        http.post(
            f"/api/v1/team-permissions/{team}/{people.eve['user_id']}/team_member", headers=server_headers(), json={}
        )
    ) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")


def test_profile_codes_and_the_name_that_survives(people: People) -> None:
    http, team, bob = people.http, people.team, people.bob["user_id"]
    assert _error(
        people.call(
            people.bob,
            "PATCH",
            f"/api/v1/team-member-profiles/{team}/{people.ada['user_id']}",
            json={"display_name": "x"},
        )
    ) == (403, "CANNOT_UPDATE_OTHER_USERS_PROFILE")
    assert _error(
        http.patch(
            f"/api/v1/team-member-profiles/{team}/{NOWHERE}", headers=server_headers(), json={"display_name": "x"}
        )
    ) == (404, "USER_NOT_FOUND")
    assert _error(
        http.patch(
            f"/api/v1/team-member-profiles/{team}/{people.eve['user_id']}",
            headers=server_headers(),
            json={"display_name": "x"},
        )
    ) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")
    assert _error(
        people.call(people.bob, "PATCH", f"/api/v1/team-member-profiles/{NOWHERE}/me", json={"display_name": "x"})
    ) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")
    assert _error(people.call(people.bob, "GET", "/api/v1/team-member-profiles")) == (
        400,
        "TEAM_ID_REQUIRED_FOR_CLIENT",
    )
    assert _error(people.call(people.eve, "GET", "/api/v1/team-member-profiles", params={"team_id": team})) == (
        404,
        "TEAM_MEMBERSHIP_NOT_FOUND",
    )
    assert _error(http.get("/api/v1/team-member-profiles", headers=server_headers(), params={"team_id": NOWHERE})) == (
        404,
        "TEAM_NOT_FOUND",
    )
    assert _error(http.get("/api/v1/team-member-profiles", headers=server_headers(), params={"user_id": NOWHERE})) == (
        404,
        "USER_NOT_FOUND",
    )

    set_by_member = people.call(
        people.bob, "PATCH", f"/api/v1/team-member-profiles/{team}/me", json={"display_name": "Bobby"}
    )
    assert (set_by_member.status_code, set_by_member.json()["user_id"], set_by_member.json()["display_name"]) == (
        200,
        bob,
        "Bobby",
    )
    assert people.call(people.bob, "PATCH", "/api/v1/users/me", json={"display_name": "Robert"}).status_code == 200
    profile = http.get(f"/api/v1/team-member-profiles/{team}/{bob}", headers=server_headers()).json()
    assert (profile["display_name"], profile["user"]["display_name"]) == ("Bobby", "Robert")

    http.delete(f"/api/v1/team-permissions/{team}/{bob}/team_member", headers=server_headers())
    read = people.call(people.bob, "GET", f"/api/v1/team-member-profiles/{team}/{people.ada['user_id']}")
    assert _error(read) == (401, "TEAM_PERMISSION_REQUIRED")


def test_deleting_a_team_or_a_user_takes_memberships_profiles_and_selection(people: People) -> None:
    http, team = people.http, people.team
    assert (
        people.call(people.bob, "PATCH", "/api/v1/users/me", json={"selected_team_id": team}).json()["selected_team"][
            "id"
        ]
        == team
    )
    http.delete(f"/api/v1/users/{people.ada['user_id']}", headers=server_headers())
    profiles = http.get("/api/v1/team-member-profiles", headers=server_headers(), params={"team_id": team}).json()[
        "items"
    ]
    assert [p["user_id"] for p in profiles] == [people.bob["user_id"]]
    assert http.delete(f"/api/v1/teams/{team}", headers=server_headers()).json() == {"success": True}
    me = people.call(people.bob, "GET", "/api/v1/users/me").json()
    assert (me["selected_team_id"], me["selected_team"]) == (None, None)
    assert (
        http.get(
            "/api/v1/team-member-profiles", headers=server_headers(), params={"user_id": people.bob["user_id"]}
        ).json()["items"]
        == []
    )
