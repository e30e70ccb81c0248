"""Teams, memberships, team permissions and team member profiles (reference §5), client and server."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import PROJECT_ID, Harness, Reply, admin_headers, client_headers, server_headers
from tests.unit.test_sign_in import code_for, sign_in

NO_TEAM = "33333333-3333-4333-8333-333333333333"


class World:
    """A project with two signed-in users, Ada (a team's creator) and Bob (a plain member)."""

    def __init__(self) -> None:
        self.h = Harness()
        self.h.request(
            "PATCH",
            "/api/v1/projects/current",
            admin_headers(),
            json={"config": {"client_team_creation_enabled": True}},
        )
        self.ada = self._sign_in("ada@example.com")
        self.bob = self._sign_in("bob@example.com")
        created = self.as_ada("POST", "/api/v1/teams", json={"display_name": "Crew"})
        assert created.status == 201, created.body
        self.team_id: str = created.json["id"]
        added = self.h.request(
            "POST", f"/api/v1/team-memberships/{self.team_id}/{self.bob['user_id']}", server_headers(), json={}
        )
        assert added.status == 201

    def _sign_in(self, email: str) -> dict[str, Any]:
        reply = sign_in(self.h, code_for(self.h, email))
        assert reply.status == 200
        return dict(reply.json)

    def headers(self, who: dict[str, Any]) -> dict[str, str]:
        return client_headers(**{"x-service-access-token": who["access_token"]})

    def as_ada(self, method: str, path: str, **kw: Any) -> Reply:
        return self.h.request(method, path, self.headers(self.ada), **kw)

    def as_bob(self, method: str, path: str, **kw: Any) -> Reply:
        return self.h.request(method, path, self.headers(self.bob), **kw)


def test_client_team_creation_follows_the_project() -> None:
    w = World()
    w.h.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"client_team_creation_enabled": False}}
    )
    reply = w.as_ada("POST", "/api/v1/teams", json={"display_name": "Nope"})
    assert (reply.status, reply.known_error) == (403, "CLIENT_TEAM_CREATION_DISABLED")
    w.h.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"client_team_creation_enabled": True}}
    )
    as_bob = w.as_ada("POST", "/api/v1/teams", json={"display_name": "x", "creator_user_id": w.bob["user_id"]})
    assert (as_bob.status, as_bob.known_error) == (403, "CANNOT_CREATE_TEAM_FOR_OTHER_USER")
    no_user = w.h.request("POST", "/api/v1/teams", client_headers(), json={"display_name": "x"})
    assert (no_user.status, no_user.known_error) == (401, "USER_AUTHENTICATION_REQUIRED")
    assert (
        w.as_ada("POST", "/api/v1/teams", json={"display_name": "x", "client_read_only_metadata": {}}).known_error
        == "SCHEMA_ERROR"
    )


def test_server_creates_teams_with_or_without_a_creator() -> None:
    w = World()
    bare = w.h.request(
        "POST", "/api/v1/teams", server_headers(), json={"display_name": "", "server_metadata": {"tier": 1}}
    )
    assert bare.status == 201
    assert set(bare.json) == {
        "id",
        "display_name",
        "profile_image_url",
        "created_at_millis",
        "client_metadata",
        "client_read_only_metadata",
        "server_metadata",
    }
    members = w.h.request(
        "GET", "/api/v1/team-member-profiles", server_headers(), query=f"team_id={bare.json['id']}"
    ).json["items"]
    assert members == []
    unknown = w.h.request(
        "POST", "/api/v1/teams", server_headers(), json={"display_name": "x", "creator_user_id": NO_TEAM}
    )
    assert (unknown.status, unknown.known_error) == (404, "USER_NOT_FOUND")


def test_listing_and_reading_teams() -> None:
    w = World()
    mine = w.as_bob("GET", "/api/v1/teams", query="user_id=me").json["items"]
    assert [t["id"] for t in mine] == [w.team_id]
    assert "server_metadata" not in mine[0]
    refused = w.as_bob("GET", "/api/v1/teams", query=f"user_id={w.ada['user_id']}")
    assert (refused.status, refused.known_error) == (403, "CLIENT_CAN_ONLY_LIST_OWN_TEAMS")
    assert len(w.h.request("GET", "/api/v1/teams", server_headers()).json["items"]) == 1
    stranger = w._sign_in("eve@example.com")
    hidden = w.h.request("GET", f"/api/v1/teams/{w.team_id}", w.headers(stranger))
    assert (hidden.status, hidden.known_error) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")
    missing = w.h.request("GET", f"/api/v1/teams/{NO_TEAM}", server_headers())
    assert (missing.status, missing.known_error, missing.json["details"]) == (
        404,
        "TEAM_NOT_FOUND",
        {"team_id": NO_TEAM},
    )


def test_updating_and_deleting_teams_needs_permissions() -> None:
    w = World()
    denied = w.as_bob("PATCH", f"/api/v1/teams/{w.team_id}", json={"display_name": "Bob's"})
    assert (denied.status, denied.known_error) == (401, "TEAM_PERMISSION_REQUIRED")
    assert denied.json["details"] == {
        "team_id": w.team_id,
        "user_id": w.bob["user_id"],
        "permission_id": "$update_team",
    }
    assert (
        w.as_ada("PATCH", f"/api/v1/teams/{w.team_id}", json={"display_name": "Renamed"}).json["display_name"]
        == "Renamed"
    )
    assert w.as_bob("DELETE", f"/api/v1/teams/{w.team_id}").known_error == "TEAM_PERMISSION_REQUIRED"
    assert w.as_ada("DELETE", f"/api/v1/teams/{w.team_id}").json == {"success": True}
    assert w.h.store.tenant(PROJECT_ID).memberships == {}


def test_membership_errors_in_order() -> None:
    w = World()
    path = "/api/v1/team-memberships"
    assert w.h.request("POST", f"{path}/{NO_TEAM}/{NO_TEAM}", server_headers(), json={}).known_error == "USER_NOT_FOUND"
    assert (
        w.h.request("POST", f"{path}/{NO_TEAM}/{w.bob['user_id']}", server_headers(), json={}).known_error
        == "TEAM_NOT_FOUND"
    )
    again = w.h.request("POST", f"{path}/{w.team_id}/{w.bob['user_id']}", server_headers(), json={})
    assert (again.status, again.known_error) == (409, "TEAM_MEMBERSHIP_ALREADY_EXISTS")
    assert w.as_ada("POST", f"{path}/{w.team_id}/{w.bob['user_id']}", json={}).known_error == "INSUFFICIENT_ACCESS_TYPE"


def test_leaving_and_removing_members() -> None:
    w = World()
    eve = w._sign_in("eve@example.com")
    w.h.request("POST", f"/api/v1/team-memberships/{w.team_id}/{eve['user_id']}", server_headers(), json={})
    denied = w.as_bob("DELETE", f"/api/v1/team-memberships/{w.team_id}/{eve['user_id']}")
    assert (denied.status, denied.known_error) == (401, "TEAM_PERMISSION_REQUIRED")
    assert w.as_ada("DELETE", f"/api/v1/team-memberships/{w.team_id}/{eve['user_id']}").json == {"success": True}
    assert w.as_bob("DELETE", f"/api/v1/team-memberships/{w.team_id}/me").json == {"success": True}
    gone = w.as_ada("DELETE", f"/api/v1/team-memberships/{w.team_id}/{eve['user_id']}")
    assert (gone.status, gone.known_error) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")


def test_removing_a_membership_or_the_team_deselects_it() -> None:
    w = World()
    assert w.as_bob("PATCH", "/api/v1/users/me", json={"selected_team_id": w.team_id}).status == 200
    w.h.request("DELETE", f"/api/v1/team-memberships/{w.team_id}/{w.bob['user_id']}", server_headers())
    assert w.h.user(w.bob["user_id"]).selected_team_id is None
    assert w.as_ada("PATCH", "/api/v1/users/me", json={"selected_team_id": w.team_id}).status == 200
    w.h.request("DELETE", f"/api/v1/teams/{w.team_id}", server_headers())
    me = w.as_ada("GET", "/api/v1/users/me").json
    assert (me["selected_team_id"], me["selected_team"]) == (None, None)


def test_deleting_a_user_removes_their_memberships_and_profiles() -> None:
    w = World()
    w.h.request("DELETE", f"/api/v1/users/{w.bob['user_id']}", server_headers())
    profiles = w.h.request("GET", "/api/v1/team-member-profiles", server_headers(), query=f"team_id={w.team_id}").json[
        "items"
    ]
    assert [p["user_id"] for p in profiles] == [w.ada["user_id"]]


def test_permissions_are_granted_listed_and_revoked() -> None:
    w = World()
    base = f"/api/v1/team-permissions/{w.team_id}/{w.bob['user_id']}"
    listed = w.h.request(
        "GET", "/api/v1/team-permissions", server_headers(), query=f"team_id={w.team_id}&user_id={w.bob['user_id']}"
    ).json
    assert [p["id"] for p in listed["items"]] == ["team_member"]
    recursive = w.h.request(
        "GET",
        "/api/v1/team-permissions",
        server_headers(),
        query=f"team_id={w.team_id}&user_id={w.bob['user_id']}&recursive=true",
    ).json
    assert [p["id"] for p in recursive["items"]] == ["$invite_members", "$read_members", "team_member"]
    granted = w.h.request("POST", f"{base}/$update_team", server_headers(), json={})
    assert (granted.status, granted.json) == (
        201,
        {"id": "$update_team", "team_id": w.team_id, "user_id": w.bob["user_id"]},
    )
    assert w.as_bob("PATCH", f"/api/v1/teams/{w.team_id}", json={"display_name": "Bob may"}).status == 200
    assert w.h.request("DELETE", f"{base}/$update_team", server_headers()).json == {"success": True}
    assert (
        w.as_bob("PATCH", f"/api/v1/teams/{w.team_id}", json={"display_name": "not now"}).known_error
        == "TEAM_PERMISSION_REQUIRED"
    )
    missing = w.h.request("DELETE", f"{base}/$update_team", server_headers())
    assert (missing.status, missing.known_error) == (401, "TEAM_PERMISSION_NOT_FOUND")
    # Reference part 2 §6: an id nothing defines is 404 PERMISSION_NOT_FOUND (it was 400 UNKNOWN_TEAM_PERMISSION).
    unknown = w.h.request("POST", f"{base}/made_up", server_headers(), json={})
    assert (unknown.status, unknown.known_error) == (404, "PERMISSION_NOT_FOUND")
    assert w.as_bob("POST", f"{base}/$update_team", json={}).known_error == "INSUFFICIENT_ACCESS_TYPE"
    # A client names itself (`me` or its id): reference part 2 §6.
    own = w.as_bob("GET", "/api/v1/team-permissions", query=f"team_id={w.team_id}&user_id=me").json["items"]
    assert [p["id"] for p in own] == ["team_member"]


# --- team member profiles -------------------------------------------------------------------------------------


def test_a_member_updates_their_own_profile() -> None:
    w = World()
    reply = w.as_bob("PATCH", f"/api/v1/team-member-profiles/{w.team_id}/me", json={"display_name": "Bobby"})
    assert reply.status == 200, reply.body
    assert reply.json["user_id"] == w.bob["user_id"]
    assert reply.json["team_id"] == w.team_id
    assert reply.json["display_name"] == "Bobby"
    assert reply.json["user"]["id"] == w.bob["user_id"]
    assert "server_metadata" not in reply.json["user"]


def test_profile_names_fall_back_to_the_user_until_set_and_then_stay() -> None:
    w = World()
    path = f"/api/v1/team-member-profiles/{w.team_id}/{w.bob['user_id']}"
    w.as_bob("PATCH", "/api/v1/users/me", json={"display_name": "Robert"})
    assert w.h.request("GET", path, server_headers()).json["display_name"] == "Robert"
    w.as_bob("PATCH", f"/api/v1/team-member-profiles/{w.team_id}/me", json={"display_name": "Bobby"})
    w.as_bob("PATCH", "/api/v1/users/me", json={"display_name": "Rob"})
    profile = w.h.request("GET", path, server_headers()).json
    assert profile["display_name"] == "Bobby"
    assert profile["user"]["display_name"] == "Rob"


@pytest.mark.parametrize(
    ("who", "path_user", "status", "code"),
    [
        ("bob", "ada", 403, "CANNOT_UPDATE_OTHER_USERS_PROFILE"),
        ("server", "nobody", 404, "USER_NOT_FOUND"),
        ("server", "eve", 404, "TEAM_MEMBERSHIP_NOT_FOUND"),
    ],
)
def test_profile_update_rejections(who: str, path_user: str, status: int, code: str) -> None:
    w = World()
    eve = w._sign_in("eve@example.com")
    ids = {"ada": w.ada["user_id"], "eve": eve["user_id"], "nobody": NO_TEAM}
    headers = w.headers(w.bob) if who == "bob" else server_headers()
    reply = w.h.request(
        "PATCH", f"/api/v1/team-member-profiles/{w.team_id}/{ids[path_user]}", headers, json={"display_name": "x"}
    )
    assert (reply.status, reply.known_error) == (status, code)


def test_an_unknown_team_is_a_missing_membership_for_profiles() -> None:
    w = World()
    reply = w.as_bob("PATCH", f"/api/v1/team-member-profiles/{NO_TEAM}/me", json={"display_name": "x"})
    assert (reply.status, reply.known_error) == (404, "TEAM_MEMBERSHIP_NOT_FOUND")
    assert reply.json["details"] == {"team_id": NO_TEAM, "user_id": w.bob["user_id"]}
    bad = w.as_bob("PATCH", "/api/v1/team-member-profiles/not-a-team/me", json={"display_name": "x"})
    assert "params.team_id must be a valid UUID" in bad.json["details"]["message"]
    null = w.as_bob("PATCH", f"/api/v1/team-member-profiles/{w.team_id}/me", json={"display_name": None})
    assert null.known_error == "SCHEMA_ERROR"


def test_profile_images_are_urls_or_data_images_smaller_than_100kb() -> None:
    w = World()
    path = f"/api/v1/team-member-profiles/{w.team_id}/me"
    remote = {"profile_image_url": "https://cdn.example.com/b.png"}
    assert w.as_bob("PATCH", path, json=remote).known_error == "INVALID_PROFILE_IMAGE_URL"  # the user image rule
    server_path = f"/api/v1/team-member-profiles/{w.team_id}/{w.bob['user_id']}"
    assert w.h.request("PATCH", server_path, server_headers(), json=remote).status == 200
    assert w.as_bob("PATCH", path, json={"profile_image_url": "ftp://x/y"}).known_error == "INVALID_PROFILE_IMAGE_URL"
    big = w.as_bob("PATCH", path, json={"profile_image_url": "data:image/png;base64," + "A" * 102400})
    assert "body.profile_image_url must be smaller than 100KB" in big.json["details"]["message"]


def test_reading_profiles_needs_read_members_for_others() -> None:
    w = World()
    eve = w._sign_in("eve@example.com")
    listed = w.as_bob("GET", "/api/v1/team-member-profiles", query=f"team_id={w.team_id}").json["items"]
    assert [p["user_id"] for p in listed] == [w.ada["user_id"], w.bob["user_id"]]  # membership order: creator first
    no_team = w.as_bob("GET", "/api/v1/team-member-profiles")
    assert (no_team.status, no_team.known_error) == (400, "TEAM_ID_REQUIRED_FOR_CLIENT")
    outsider = w.h.request("GET", "/api/v1/team-member-profiles", w.headers(eve), query=f"team_id={w.team_id}")
    assert outsider.known_error == "TEAM_MEMBERSHIP_NOT_FOUND"
    w.h.request("DELETE", f"/api/v1/team-permissions/{w.team_id}/{w.bob['user_id']}/team_member", server_headers())
    denied = w.as_bob("GET", f"/api/v1/team-member-profiles/{w.team_id}/{w.ada['user_id']}")
    assert (denied.status, denied.known_error) == (401, "TEAM_PERMISSION_REQUIRED")
    assert denied.json["details"]["permission_id"] == "$read_members"
    assert w.as_bob("GET", f"/api/v1/team-member-profiles/{w.team_id}/me").status == 200
    only_me = w.as_bob("GET", "/api/v1/team-member-profiles", query=f"team_id={w.team_id}&user_id=me").json["items"]
    assert [p["user_id"] for p in only_me] == [w.bob["user_id"]]
    server = w.h.request("GET", "/api/v1/team-member-profiles", server_headers(), query=f"team_id={w.team_id}").json[
        "items"
    ]
    assert all("user" in p for p in server)
    assert (
        w.h.request("GET", "/api/v1/team-member-profiles", server_headers(), query=f"team_id={NO_TEAM}").known_error
        == "TEAM_NOT_FOUND"
    )
