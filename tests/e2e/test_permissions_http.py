"""Permissions and permission definitions over real HTTP (reference part 2 §6): every known error and the plain
error of the section, reached against a real Hypercorn process, with the bodies the reference quotes.

The server (and its dev project) is shared by the module's tests: each test names its definitions uniquely."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.e2e.test_teams_http import NOWHERE, People, _error
from tests.support import admin_headers, client_headers, server_headers

pytestmark = pytest.mark.e2e

DEFS = "/api/v1/project-permission-definitions"
TEAM_DEFS = "/api/v1/team-permission-definitions"


def _id(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def people(http: httpx.Client) -> People:
    return People(http)


def test_definition_errors_with_the_reference_bodies(http: httpx.Client) -> None:
    taken, ghost = _id("taken"), _id("ghost")
    made = http.post(DEFS, headers=admin_headers(), json={"id": taken, "description": "A custom one"})
    assert (made.status_code, made.json()) == (
        201,
        {"id": taken, "description": "A custom one", "contained_permission_ids": []},
    )

    again = http.post(TEAM_DEFS, headers=admin_headers(), json={"id": taken})
    assert _error(again) == (400, "PERMISSION_ID_ALREADY_EXISTS")
    assert again.json() == {
        "code": "PERMISSION_ID_ALREADY_EXISTS",
        "details": {"permission_id": taken},
        "error": f'Permission with ID "{taken}" already exists. Choose a different ID.',
    }

    contained = http.post(DEFS, headers=admin_headers(), json={"id": _id("p"), "contained_permission_ids": [ghost]})
    assert _error(contained) == (400, "CONTAINED_PERMISSION_NOT_FOUND")
    assert contained.json() == {
        "code": "CONTAINED_PERMISSION_NOT_FOUND",
        "details": {"permission_id": ghost},
        "error": f'Contained permission with ID "{ghost}" not found. Make sure you created it on the dashboard.',
    }

    for method in ("PATCH", "DELETE"):
        kwargs = {"json": {}} if method == "PATCH" else {}
        missing = http.request(method, f"{DEFS}/{ghost}", headers=admin_headers(), **kwargs)
        assert _error(missing) == (404, "PERMISSION_NOT_FOUND")
        assert missing.json()["error"] == f'Permission "{ghost}" not found. Make sure you created it on the dashboard.'
    assert _error(http.delete(f"{TEAM_DEFS}/{taken}", headers=admin_headers())) == (404, "PERMISSION_NOT_FOUND")
    assert _error(http.get(DEFS, headers=server_headers())) == (401, "INSUFFICIENT_ACCESS_TYPE")
    assert _error(http.post(DEFS, headers=admin_headers(), json={"id": "$update_team"})) == (400, "SCHEMA_ERROR")
    assert http.delete(f"{DEFS}/{taken}", headers=admin_headers()).json() == {"success": True}


def test_project_permission_errors_with_the_reference_bodies(people: People) -> None:
    http, bob = people.http, people.bob["user_id"]
    team_scoped, project_scoped = _id("t"), _id("p")
    assert http.post(TEAM_DEFS, headers=admin_headers(), json={"id": team_scoped}).status_code == 201
    assert http.post(DEFS, headers=admin_headers(), json={"id": project_scoped}).status_code == 201

    nobody = http.post(f"/api/v1/project-permissions/{NOWHERE}/{project_scoped}", headers=server_headers(), json={})
    assert _error(nobody) == (404, "USER_NOT_FOUND")
    ghost = http.post(f"/api/v1/project-permissions/{bob}/does_not_exist", headers=server_headers(), json={})
    assert _error(ghost) == (404, "PERMISSION_NOT_FOUND")
    assert ghost.json()["details"] == {"permission_id": "does_not_exist"}
    scope = http.post(f"/api/v1/project-permissions/{bob}/{team_scoped}", headers=server_headers(), json={})
    assert _error(scope) == (404, "WRONG_PERMISSION_SCOPE")
    assert scope.json() == {
        "code": "WRONG_PERMISSION_SCOPE",
        "details": {"permission_id": team_scoped, "expected_scope": "project", "actual_scope": "team"},
        "error": f'Permission "{team_scoped}" not found. (It was found for a different scope "team", but scope '
        '"project" was expected.)',
    }
    client_grant = people.call(people.bob, "POST", f"/api/v1/project-permissions/me/{project_scoped}", json={})
    assert _error(client_grant) == (401, "INSUFFICIENT_ACCESS_TYPE")
    not_held = http.delete(f"/api/v1/project-permissions/{bob}/{project_scoped}", headers=server_headers())
    assert _error(not_held) == (404, "PERMISSION_NOT_FOUND")

    granted = http.post(f"/api/v1/project-permissions/{bob}/{project_scoped}", headers=server_headers(), json={})
    assert (granted.status_code, granted.json()) == (201, {"id": project_scoped, "user_id": bob})
    mine = people.call(people.bob, "GET", "/api/v1/project-permissions", params={"user_id": "me"})
    assert mine.json() == {"items": [{"id": project_scoped, "user_id": bob}], "is_paginated": False}

    others = people.call(people.bob, "GET", "/api/v1/project-permissions", params={"user_id": people.ada["user_id"]})
    assert (others.status_code, others.headers.get("x-service-known-error")) == (403, None)
    assert others.text == (
        'Client can only list permissions for their own user. user_id must be either "me" or the ID of the current user'
    )
    unnamed = people.call(people.bob, "GET", "/api/v1/project-permissions")
    assert (unnamed.status_code, unnamed.text) == (403, others.text)
    no_user = http.get("/api/v1/project-permissions", headers=client_headers(), params={"user_id": "me"})
    assert _error(no_user) == (400, "CANNOT_GET_OWN_USER_WITHOUT_USER")
    assert http.delete(f"/api/v1/project-permissions/{bob}/{project_scoped}", headers=server_headers()).json() == {
        "success": True
    }


def test_team_permission_errors_and_the_recursive_list(people: People) -> None:
    http, team, bob = people.http, people.team, people.bob["user_id"]
    project_scoped, editor = _id("p"), _id("editor")
    assert http.post(DEFS, headers=admin_headers(), json={"id": project_scoped}).status_code == 201
    made = http.post(
        TEAM_DEFS, headers=admin_headers(), json={"id": editor, "contained_permission_ids": ["team_member"]}
    )
    assert made.status_code == 201
    base = f"/api/v1/team-permissions/{team}"

    assert _error(http.post(f"{base}/{NOWHERE}/{editor}", headers=server_headers(), json={})) == (
        404,
        "USER_NOT_FOUND",
    )
    assert _error(http.post(f"{base}/{people.eve['user_id']}/{editor}", headers=server_headers(), json={})) == (
        404,
        "TEAM_MEMBERSHIP_NOT_FOUND",
    )
    assert _error(http.post(f"{base}/{bob}/ghost_permission", headers=server_headers(), json={})) == (
        404,
        "PERMISSION_NOT_FOUND",
    )
    scope = http.post(f"{base}/{bob}/{project_scoped}", headers=server_headers(), json={})
    assert _error(scope) == (404, "WRONG_PERMISSION_SCOPE")
    assert scope.json()["details"] == {
        "permission_id": project_scoped,
        "expected_scope": "team",
        "actual_scope": "project",
    }
    assert _error(http.delete(f"{base}/{bob}/{editor}", headers=server_headers())) == (
        401,
        "TEAM_PERMISSION_NOT_FOUND",
    )

    assert http.post(f"{base}/{bob}/{editor}", headers=server_headers(), json={}).status_code == 201
    http.delete(f"{base}/{bob}/team_member", headers=server_headers())
    direct = people.call(people.bob, "GET", "/api/v1/team-permissions", params={"team_id": team, "user_id": "me"})
    assert [item["id"] for item in direct.json()["items"]] == [editor]
    recursive = people.call(
        people.bob, "GET", "/api/v1/team-permissions", params={"team_id": team, "user_id": "me", "recursive": "true"}
    )
    assert [item["id"] for item in recursive.json()["items"]] == [
        "$invite_members",
        "$read_members",
        editor,
        "team_member",
    ]
    others = people.call(people.bob, "GET", "/api/v1/team-permissions", params={"user_id": people.ada["user_id"]})
    assert (others.status_code, others.headers.get("content-type", "").split(";")[0]) == (403, "text/plain")
