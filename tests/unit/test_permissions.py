"""Permissions and permission definitions (reference part 2 §6), driven through the service in process."""

from __future__ import annotations

from typing import Any

from tests.support import admin_headers, client_headers, server_headers
from tests.unit.test_teams import World

DEFS = "/api/v1/project-permission-definitions"
TEAM_DEFS = "/api/v1/team-permission-definitions"
SYSTEM = ["$delete_team", "$invite_members", "$manage_api_keys", "$read_members", "$remove_members", "$update_team"]


def _define(w: World, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = w.h.request("POST", path, admin_headers(), json=body)
    assert reply.status == 201, reply.body
    return dict(reply.json)


def _ids(reply: Any) -> list[str]:
    return [item["id"] for item in reply.json["items"]]


def _project_ids(w: World, user_id: str, *, recursive: bool = False) -> list[str]:
    query = f"user_id={user_id}&recursive={'true' if recursive else 'false'}"
    return _ids(w.h.request("GET", "/api/v1/project-permissions", server_headers(), query=query))


def _team_ids(w: World, user_id: str, *, recursive: bool = False) -> list[str]:
    query = f"team_id={w.team_id}&user_id={user_id}&recursive={'true' if recursive else 'false'}"
    return _ids(w.h.request("GET", "/api/v1/team-permissions", server_headers(), query=query))


# --- definitions ----------------------------------------------------------------------------------------------


def test_a_project_starts_with_the_built_in_team_definitions_and_the_system_ones() -> None:
    w = World()
    team = w.h.request("GET", TEAM_DEFS, admin_headers()).json
    assert team["is_paginated"] is False
    assert [d["id"] for d in team["items"]] == [*SYSTEM, "team_admin", "team_member"]  # `$` first (string order)
    by_id = {d["id"]: d for d in team["items"]}
    assert by_id["team_admin"] == {
        "id": "team_admin",
        "description": "Default permission for team admins",
        "contained_permission_ids": SYSTEM,
    }
    assert by_id["$update_team"] == {
        "id": "$update_team",
        "description": "Update the team information",
        "contained_permission_ids": [],
    }
    assert w.h.request("GET", DEFS, admin_headers()).json == {"items": [], "is_paginated": False}


def test_definitions_are_created_sorted_without_an_absent_description_and_listed_by_scope() -> None:
    w = World()
    assert _define(w, DEFS, {"id": "p1"}) == {"id": "p1", "contained_permission_ids": []}
    made = _define(w, DEFS, {"id": "p2", "description": "Two", "contained_permission_ids": ["p1", "p1"]})
    assert made == {"id": "p2", "description": "Two", "contained_permission_ids": ["p1"]}
    _define(w, TEAM_DEFS, {"id": "t1", "contained_permission_ids": ["$update_team", "team_member"]})
    assert _ids(w.h.request("GET", DEFS, admin_headers())) == ["p1", "p2"]
    assert "t1" in _ids(w.h.request("GET", TEAM_DEFS, admin_headers()))
    assert "p1" not in _ids(w.h.request("GET", TEAM_DEFS, admin_headers()))
    # The definitions are not part of the project's config as rendered.
    assert (
        "permission_definitions" not in w.h.request("GET", "/api/v1/projects/current", admin_headers()).json["config"]
    )


def test_ids_are_unique_across_scopes_and_contained_ids_must_be_of_the_same_scope() -> None:
    w = World()
    _define(w, DEFS, {"id": "shared"})
    for path in (DEFS, TEAM_DEFS):
        taken = w.h.request("POST", path, admin_headers(), json={"id": "shared"})
        assert (taken.status, taken.known_error) == (400, "PERMISSION_ID_ALREADY_EXISTS")
        assert taken.json["error"] == 'Permission with ID "shared" already exists. Choose a different ID.'
    crossed = w.h.request("POST", DEFS, admin_headers(), json={"id": "p", "contained_permission_ids": ["team_member"]})
    assert (crossed.status, crossed.json["details"]) == (400, {"permission_id": "team_member"})
    system = w.h.request("POST", DEFS, admin_headers(), json={"id": "p", "contained_permission_ids": ["$read_members"]})
    assert system.known_error == "CONTAINED_PERMISSION_NOT_FOUND"  # a project permission cannot hold a system one
    assert _ids(w.h.request("GET", DEFS, admin_headers())) == ["shared"]


def test_updating_replaces_the_definition_and_a_rename_follows_everywhere() -> None:
    w = World()
    bob = w.bob["user_id"]
    _define(w, DEFS, {"id": "read"})
    _define(w, DEFS, {"id": "write", "description": "W", "contained_permission_ids": ["read"]})
    _define(w, TEAM_DEFS, {"id": "editor", "contained_permission_ids": ["$update_team"]})
    w.h.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"user_default_permissions": ["read"]}}
    )
    w.h.request("POST", f"/api/v1/project-permissions/{bob}/read", server_headers(), json={})
    w.h.request("POST", f"/api/v1/team-permissions/{w.team_id}/{bob}/editor", server_headers(), json={})

    renamed = w.h.request("PATCH", f"{DEFS}/read", admin_headers(), json={"id": "reader"})
    assert (renamed.status, renamed.json) == (200, {"id": "reader", "contained_permission_ids": []})
    defs = {d["id"]: d for d in w.h.request("GET", DEFS, admin_headers()).json["items"]}
    assert defs["write"]["contained_permission_ids"] == ["reader"]
    assert _project_ids(w, bob) == ["reader"]
    config = w.h.request("GET", "/api/v1/projects/current", admin_headers()).json["config"]
    assert config["user_default_permissions"] == ["reader"]

    # PATCH replaces: the omitted description and contained ids go back to none.
    replaced = w.h.request("PATCH", f"{DEFS}/write", admin_headers(), json={})
    assert replaced.json == {"id": "write", "contained_permission_ids": []}

    body = {"id": "team_editor", "contained_permission_ids": ["$update_team"]}
    w.h.request("PATCH", f"{TEAM_DEFS}/editor", admin_headers(), json=body)
    assert "team_editor" in _team_ids(w, bob)
    # Bob's grant was renamed with it, and still contains $update_team: he may still rename the team.
    assert w.as_bob("PATCH", f"/api/v1/teams/{w.team_id}", json={"display_name": "Still mine"}).status == 200


def test_update_and_delete_refusals() -> None:
    w = World()
    _define(w, DEFS, {"id": "p1"})
    _define(w, DEFS, {"id": "p2"})
    missing = w.h.request("PATCH", f"{DEFS}/nope", admin_headers(), json={})
    assert (missing.status, missing.known_error, missing.json["details"]) == (
        404,
        "PERMISSION_NOT_FOUND",
        {"permission_id": "nope"},
    )
    taken = w.h.request("PATCH", f"{DEFS}/p1", admin_headers(), json={"id": "p2"})
    assert (taken.status, taken.known_error) == (400, "PERMISSION_ID_ALREADY_EXISTS")
    contained = w.h.request("PATCH", f"{DEFS}/p1", admin_headers(), json={"contained_permission_ids": ["ghost"]})
    assert (contained.status, contained.known_error) == (400, "CONTAINED_PERMISSION_NOT_FOUND")
    other_scope = w.h.request("DELETE", f"{TEAM_DEFS}/p1", admin_headers())
    assert (other_scope.status, other_scope.known_error) == (404, "PERMISSION_NOT_FOUND")
    system = w.h.request("DELETE", f"{TEAM_DEFS}/$update_team", admin_headers())
    assert (system.status, system.known_error) == (404, "PERMISSION_NOT_FOUND")
    assert _ids(w.h.request("GET", DEFS, admin_headers())) == ["p1", "p2"]


def test_deleting_a_definition_strips_it_from_definitions_defaults_and_grants() -> None:
    w = World()
    bob = w.bob["user_id"]
    # team_member is built in: deleting it takes Bob's grant and the member default with it.
    assert w.h.request("DELETE", f"{TEAM_DEFS}/team_member", admin_headers()).json == {"success": True}
    assert _team_ids(w, bob) == []
    config = w.h.request("GET", "/api/v1/projects/current", admin_headers()).json["config"]
    assert config["team_member_default_permissions"] == []
    _define(w, DEFS, {"id": "child"})
    _define(w, DEFS, {"id": "parent", "contained_permission_ids": ["child"]})
    w.h.request("POST", f"/api/v1/project-permissions/{bob}/child", server_headers(), json={})
    w.h.request("DELETE", f"{DEFS}/child", admin_headers())
    assert w.h.request("GET", DEFS, admin_headers()).json["items"] == [{"id": "parent", "contained_permission_ids": []}]
    assert _project_ids(w, bob) == []
    # Defining the id again grants nothing: the old grant went with the old definition.
    _define(w, DEFS, {"id": "child"})
    assert _project_ids(w, bob) == []


def test_definitions_are_for_admin_only() -> None:
    w = World()
    for headers in (server_headers(), w.headers(w.bob)):
        reply = w.h.request("GET", DEFS, headers)
        assert (reply.status, reply.known_error) == (401, "INSUFFICIENT_ACCESS_TYPE")


def test_bad_definition_input_is_a_schema_error_and_changes_nothing() -> None:
    w = World()
    for body in (
        {"id": "Upper"},
        {"id": "$update_team"},
        {"id": "a b"},
        {},
        {"id": "ok", "contained_permission_ids": ["$not_a_system_one"]},
        {"id": "ok", "description": None},
        {"id": "ok", "extra": 1},
    ):
        reply = w.h.request("POST", DEFS, admin_headers(), json=body)
        assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR"), body
    assert w.h.request("GET", DEFS, admin_headers()).json["items"] == []
    bad_path = w.h.request("DELETE", f"{TEAM_DEFS}/$made_up", admin_headers())
    assert "invalid system permission" in bad_path.json["details"]["message"]


# --- grants and listing ---------------------------------------------------------------------------------------


def test_project_permissions_are_granted_listed_recursively_and_revoked() -> None:
    w = World()
    bob = w.bob["user_id"]
    _define(w, DEFS, {"id": "child"})
    _define(w, DEFS, {"id": "parent", "contained_permission_ids": ["child"]})
    granted = w.h.request("POST", f"/api/v1/project-permissions/{bob}/parent", server_headers(), json={})
    assert (granted.status, granted.json) == (201, {"id": "parent", "user_id": bob})
    again = w.h.request("POST", f"/api/v1/project-permissions/{bob}/parent", server_headers(), json={})
    assert again.status == 201  # an upsert
    assert _project_ids(w, bob) == ["parent"]
    assert _project_ids(w, bob, recursive=True) == ["child", "parent"]
    mine = w.as_bob("GET", "/api/v1/project-permissions", query="user_id=me&recursive=true&permission_id=child")
    assert mine.json == {"items": [{"id": "child", "user_id": bob}], "is_paginated": False}
    default = w.as_bob("GET", "/api/v1/project-permissions", query="user_id=me")
    assert _ids(default) == ["parent"]  # recursive is false unless asked
    revoked = w.h.request("DELETE", f"/api/v1/project-permissions/{bob}/parent", server_headers())
    assert (revoked.status, revoked.json) == (200, {"success": True})
    gone = w.h.request("DELETE", f"/api/v1/project-permissions/{bob}/parent", server_headers())
    assert (gone.status, gone.known_error) == (404, "PERMISSION_NOT_FOUND")


def test_a_server_without_filters_lists_every_grant_sorted_by_user() -> None:
    w = World()
    _define(w, DEFS, {"id": "p"})
    for who in (w.bob, w.ada):
        w.h.request("POST", f"/api/v1/project-permissions/{who['user_id']}/p", server_headers(), json={})
    listed = w.h.request("GET", "/api/v1/project-permissions", server_headers()).json["items"]
    assert [i["user_id"] for i in listed] == sorted([w.ada["user_id"], w.bob["user_id"]])


def test_project_grant_refusals_in_the_reference_order() -> None:
    w = World()
    _define(w, TEAM_DEFS, {"id": "t1"})
    nobody = "33333333-3333-4333-8333-333333333333"
    assert w.h.request(
        "POST", f"/api/v1/project-permissions/{nobody}/ghost", server_headers(), json={}
    ).known_error == ("USER_NOT_FOUND")
    unknown = w.h.request("POST", f"/api/v1/project-permissions/{w.bob['user_id']}/ghost", server_headers(), json={})
    assert (unknown.status, unknown.known_error) == (404, "PERMISSION_NOT_FOUND")
    scope = w.h.request("POST", f"/api/v1/project-permissions/{w.bob['user_id']}/t1", server_headers(), json={})
    assert (scope.status, scope.known_error) == (404, "WRONG_PERMISSION_SCOPE")
    assert scope.json["details"] == {"permission_id": "t1", "expected_scope": "project", "actual_scope": "team"}
    assert w.as_bob("POST", "/api/v1/project-permissions/me/t1", json={}).known_error == "INSUFFICIENT_ACCESS_TYPE"


def test_a_client_lists_only_its_own_permissions_and_gets_a_plain_403_otherwise() -> None:
    w = World()
    for path in ("/api/v1/project-permissions", "/api/v1/team-permissions"):
        for query in ("", f"user_id={w.ada['user_id']}"):
            reply = w.as_bob("GET", path, query=query)
            assert reply.status == 403
            assert reply.known_error is None
            assert reply.body.decode() == (
                "Client can only list permissions for their own user. "
                'user_id must be either "me" or the ID of the current user'
            )
        assert w.as_bob("GET", path, query=f"user_id={w.bob['user_id']}").status == 200
        no_user = w.h.request("GET", path, client_headers(), query="user_id=me")
        assert (no_user.status, no_user.known_error) == (400, "CANNOT_GET_OWN_USER_WITHOUT_USER")


def test_team_permissions_follow_the_definitions_recursively() -> None:
    w = World()
    bob = w.bob["user_id"]
    _define(w, TEAM_DEFS, {"id": "editor", "contained_permission_ids": ["$update_team"]})
    _define(w, TEAM_DEFS, {"id": "chief", "contained_permission_ids": ["editor"]})
    w.h.request("POST", f"/api/v1/team-permissions/{w.team_id}/{bob}/chief", server_headers(), json={})
    assert _team_ids(w, bob, recursive=True) == [
        "$invite_members",
        "$read_members",
        "$update_team",
        "chief",
        "editor",
        "team_member",
    ]
    assert w.as_bob("PATCH", f"/api/v1/teams/{w.team_id}", json={"display_name": "Chief's"}).status == 200
    w.h.request("PATCH", f"{TEAM_DEFS}/editor", admin_headers(), json={})  # editor no longer holds $update_team
    refused = w.as_bob("PATCH", f"/api/v1/teams/{w.team_id}", json={"display_name": "Not now"})
    assert (refused.status, refused.known_error) == (401, "TEAM_PERMISSION_REQUIRED")
    filtered = w.h.request(
        "GET", "/api/v1/team-permissions", server_headers(), query=f"team_id={w.team_id}&permission_id=team_admin"
    )
    assert [(i["user_id"], i["id"]) for i in filtered.json["items"]] == [(w.ada["user_id"], "team_admin")]


def test_team_grant_refusals_in_the_reference_order() -> None:
    w = World()
    _define(w, DEFS, {"id": "p1"})
    eve = w._sign_in("eve@example.com")["user_id"]
    base = f"/api/v1/team-permissions/{w.team_id}"
    nobody = "33333333-3333-4333-8333-333333333333"
    cases = [
        (f"{base}/{nobody}/ghost", 404, "USER_NOT_FOUND"),
        (f"{base}/{eve}/ghost", 404, "TEAM_MEMBERSHIP_NOT_FOUND"),
        (f"{base}/{w.bob['user_id']}/ghost", 404, "PERMISSION_NOT_FOUND"),
        (f"{base}/{w.bob['user_id']}/p1", 404, "WRONG_PERMISSION_SCOPE"),
    ]
    for path, status, code in cases:
        reply = w.h.request("POST", path, server_headers(), json={})
        assert (reply.status, reply.known_error) == (status, code), path
    assert _team_ids(w, w.bob["user_id"]) == ["team_member"]


def test_sign_up_grants_the_default_project_permissions() -> None:
    w = World()
    _define(w, DEFS, {"id": "reader"})
    w.h.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"user_default_permissions": ["reader"]}}
    )
    newcomer = w._sign_in("newcomer@example.com")
    listed = w.h.request(
        "GET", "/api/v1/project-permissions", w.headers(newcomer), query=f"user_id={newcomer['user_id']}"
    )
    assert listed.json["items"] == [{"id": "reader", "user_id": newcomer["user_id"]}]
    assert _project_ids(w, w.bob["user_id"]) == []  # existing users are not granted it


def test_deleting_a_user_takes_their_project_permissions() -> None:
    w = World()
    _define(w, DEFS, {"id": "p"})
    bob = w.bob["user_id"]
    w.h.request("POST", f"/api/v1/project-permissions/{bob}/p", server_headers(), json={})
    w.h.request("DELETE", f"/api/v1/users/{bob}", server_headers())
    assert w.h.request("GET", "/api/v1/project-permissions", server_headers()).json["items"] == []
