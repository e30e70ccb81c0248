"""Webhook events over HTTP, in process (the fake, on the memory store): each route of the reference's §8 table
records its events, rendered as the original's payloads; the writes the original does not announce (signing in,
sessions, contact channels, password changes, invitations sent) record none, and a refused request records none."""

from __future__ import annotations

from typing import Any

import httpx

from identity_proto import run
from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects import ListEvents, LoadProject, perform, update_project
from identity_proto.events import event_data
from identity_testing import IdentityFake
from identity_testing.fake import TestProject

CALLBACK = "http://localhost/handler"


def recorded(project: TestProject) -> list[tuple[str, Any]]:
    """(type, data) of every event recorded for the project, oldest first, as receivers would get them."""
    store = project.fake.store
    loaded = run(perform(LoadProject(project.id)), store)
    assert loaded is not None
    out = []
    after = None
    while True:
        page = run(perform(ListEvents(project.id, after=after, limit=50)), store)
        out += [(event.type, event_data(event, loaded.config)) for event in page]
        if len(page) < 50:
            return out
        after = page[-1].id


def new_events(project: TestProject, before: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    now = recorded(project)
    assert now[: len(before)] == before  # events are only ever appended
    return now[len(before) :]


def types(events: list[tuple[str, Any]]) -> list[str]:
    return [kind for kind, _ in events]


def _ok(response: httpx.Response) -> Any:
    assert response.status_code < 300, response.text
    return response.json()


# --------------------------------------------------------------------------------------------------------------
# Users


def test_post_users_records_user_created_with_the_server_user_then_its_personal_team() -> None:
    project = IdentityFake().create_project(create_team_on_sign_up=True)
    with project.client("server") as http:
        user = _ok(http.post("/api/v1/users", json={"primary_email": "ada@example.com", "display_name": "Ada"}))
    events = recorded(project)
    assert types(events) == ["user.created", "team.created"]
    created = events[0][1]
    # the user as created, before the personal team (no selected team yet); otherwise the server view
    assert created == {**user, "selected_team_id": None, "selected_team": None}
    assert user["selected_team"] is None  # the answer too, as the original's; a later read shows the team
    with project.client("server") as http:
        assert events[1][1] == _ok(http.get(f"/api/v1/users/{user['id']}"))["selected_team"]


def test_patch_users_records_user_updated_each_time_even_when_nothing_changes() -> None:
    project = IdentityFake().create_project()
    user = project.create_user("ada@example.com")
    tokens = project.sign_in(user["id"])
    before = recorded(project)
    with project.client("server") as http:
        patched = _ok(http.patch(f"/api/v1/users/{user['id']}", json={"display_name": "Ada"}))
        same = _ok(http.patch(f"/api/v1/users/{user['id']}", json={}))
    with project.client("client", access_token=tokens["access_token"]) as http:
        mine = _ok(http.patch("/api/v1/users/me", json={"client_metadata": {"theme": "dark"}}))
    with project.client("server") as http:
        server_view = _ok(http.get(f"/api/v1/users/{user['id']}"))
    events = new_events(project, before)
    assert types(events) == ["user.updated"] * 3
    assert events[0][1] == patched
    assert events[1][1] == same
    assert events[2][1] == server_view  # the server view, though a client patched it
    assert mine["client_metadata"] == {"theme": "dark"}


def test_a_refused_patch_records_nothing() -> None:
    project = IdentityFake().create_project()
    ada = project.create_user("ada@example.com")
    project.create_user("bob@example.com")
    before = recorded(project)
    with project.client("server") as http:
        taken = http.patch(
            f"/api/v1/users/{ada['id']}",
            json={"primary_email": "bob@example.com", "primary_email_auth_enabled": True},
        )
        assert taken.status_code == 409
        missing = http.patch("/api/v1/users/00000000-0000-4000-8000-00000000dead", json={"display_name": "x"})
        assert missing.status_code == 404
        bad = http.patch(f"/api/v1/users/{ada['id']}", json={"display_name": 5})
        assert bad.status_code == 400
    assert new_events(project, before) == []


def test_delete_users_records_membership_deletions_then_user_deleted() -> None:
    project = IdentityFake().create_project()
    ada = project.create_user("ada@example.com")
    with project.client("server") as http:
        first = _ok(http.post("/api/v1/teams", json={"display_name": "One", "creator_user_id": ada["id"]}))
        second = _ok(http.post("/api/v1/teams", json={"display_name": "Two"}))
        _ok(http.post(f"/api/v1/team-memberships/{second['id']}/{ada['id']}", json={}))
        before = recorded(project)
        _ok(http.delete(f"/api/v1/users/{ada['id']}"))
        assert http.delete(f"/api/v1/users/{ada['id']}").status_code == 404
    assert new_events(project, before) == [
        ("team_membership.deleted", {"team_id": first["id"], "user_id": ada["id"]}),
        ("team_membership.deleted", {"team_id": second["id"], "user_id": ada["id"]}),
        ("user.deleted", {"id": ada["id"], "teams": [{"id": first["id"]}, {"id": second["id"]}]}),
    ]


def test_delete_users_me_records_user_deleted() -> None:
    project = IdentityFake().create_project(client_user_deletion_enabled=True)
    ada = project.create_user("ada@example.com")
    tokens = project.sign_in(ada["id"])
    before = recorded(project)
    with project.client("client", access_token=tokens["access_token"]) as http:
        _ok(http.delete("/api/v1/users/me"))
    assert new_events(project, before) == [("user.deleted", {"id": ada["id"], "teams": []})]


# --------------------------------------------------------------------------------------------------------------
# Sign-ups, upgrades, resets; and what is not announced


def test_a_password_sign_up_records_user_created_and_signing_in_records_nothing() -> None:
    project = IdentityFake().create_project(credential_enabled=True)
    with project.client("client") as http:
        signed_up = _ok(
            http.post("/api/v1/auth/password/sign-up", json={"email": "ada@example.com", "password": "staple 2024!"})
        )
        before = recorded(project)
        _ok(http.post("/api/v1/auth/password/sign-in", json={"email": "ada@example.com", "password": "staple 2024!"}))
    assert types(before) == ["user.created"]
    assert before[0][1]["id"] == signed_up["user_id"]
    assert before[0][1]["primary_email"] == "ada@example.com"
    assert before[0][1]["has_password"] is True
    assert new_events(project, before) == []  # the sign-in's last activity is no change announced


def test_an_otp_sign_up_records_user_created_and_a_second_sign_in_nothing() -> None:
    project = IdentityFake().create_project(magic_link_enabled=True)
    with project.client("client") as http:
        for _ in range(2):
            _ok(
                http.post(
                    "/api/v1/auth/otp/send-sign-in-code", json={"email": "ada@example.com", "callback_url": CALLBACK}
                )
            )
            _ok(http.post("/api/v1/auth/otp/sign-in", json={"code": project.last_code("ada@example.com")}))
    events = recorded(project)
    assert types(events) == ["user.created"]
    assert events[0][1]["primary_email"] == "ada@example.com"


def test_an_anonymous_sign_up_and_its_upgrade_record_user_created_then_user_updated() -> None:
    project = IdentityFake().create_project(credential_enabled=True)
    anonymous = project.sign_up_anonymous()
    created = recorded(project)
    assert types(created) == ["user.created"]
    assert created[0][1]["is_anonymous"] is True
    headers = {"x-service-allow-anonymous-user": "true"}
    with project.client("client", access_token=anonymous["access_token"]) as http:
        upgraded = http.post(
            "/api/v1/auth/password/sign-up",
            headers=headers,
            json={"email": "ada@example.com", "password": "staple 2024!"},
        )
        assert upgraded.status_code == 200, upgraded.text
    events = new_events(project, created)
    assert types(events) == ["user.updated"]
    assert events[0][1]["id"] == anonymous["user_id"]
    assert events[0][1]["is_anonymous"] is False
    assert events[0][1]["primary_email"] == "ada@example.com"


def test_an_oauth_sign_up_records_user_created() -> None:
    project = IdentityFake().create_project()
    project.use_mock_oauth("github")
    tokens = project.oauth_sign_in("github", email="ada@example.com", display_name="Ada")
    events = recorded(project)
    assert types(events) == ["user.created"]
    with project.client("client", access_token=tokens["access_token"]) as http:
        assert events[0][1]["id"] == _ok(http.get("/api/v1/users/me"))["id"]
    assert events[0][1]["display_name"] == "Ada"
    assert [p["id"] for p in events[0][1]["oauth_providers"]] == ["github"]


def test_a_password_reset_records_user_updated_and_a_password_update_nothing() -> None:
    project = IdentityFake().create_project(credential_enabled=True)
    ada = project.create_user("ada@example.com", password="correct horse")
    before = recorded(project)
    with project.client("client") as http:
        _ok(
            http.post(
                "/api/v1/auth/password/send-reset-code", json={"email": "ada@example.com", "callback_url": CALLBACK}
            )
        )
        code = project.last_code("ada@example.com", kind="password_reset")
        _ok(http.post("/api/v1/auth/password/reset", json={"code": code, "password": "new staple 2024"}))
        assert http.post("/api/v1/auth/password/reset", json={"code": code, "password": "x staple"}).status_code >= 400
    events = new_events(project, before)
    assert types(events) == ["user.updated"]
    assert events[0][1]["id"] == ada["id"]
    tokens = project.sign_in(ada["id"])
    before = recorded(project)
    with project.client("client", access_token=tokens["access_token"]) as http:
        _ok(
            http.post(
                "/api/v1/auth/password/update",
                json={"old_password": "new staple 2024", "new_password": "newer staple 2025"},
            )
        )
    assert new_events(project, before) == []


# --------------------------------------------------------------------------------------------------------------
# Teams, memberships, permissions


def test_team_routes_record_created_updated_deleted_and_no_event_for_the_creators_membership() -> None:
    project = IdentityFake().create_project()
    ada = project.create_user("ada@example.com")
    before = recorded(project)
    with project.client("server") as http:
        team = _ok(http.post("/api/v1/teams", json={"display_name": "Crew", "creator_user_id": ada["id"]}))
        renamed = _ok(http.patch(f"/api/v1/teams/{team['id']}", json={"display_name": "New crew"}))
        _ok(http.delete(f"/api/v1/teams/{team['id']}"))
        assert http.delete(f"/api/v1/teams/{team['id']}").status_code == 404
    assert new_events(project, before) == [
        ("team.created", team),
        ("team.updated", renamed),
        ("team.deleted", {"id": team["id"]}),
    ]


def test_membership_routes_record_the_membership_with_its_default_permissions_and_its_removal() -> None:
    project = IdentityFake().create_project()
    bob = project.create_user("bob@example.com")
    with project.client("server") as http:
        team = _ok(http.post("/api/v1/teams", json={"display_name": "Crew"}))
        before = recorded(project)
        _ok(http.post(f"/api/v1/team-memberships/{team['id']}/{bob['id']}", json={}))
        assert http.post(f"/api/v1/team-memberships/{team['id']}/{bob['id']}", json={}).status_code == 409
        _ok(http.delete(f"/api/v1/team-memberships/{team['id']}/{bob['id']}"))
    ids = {"team_id": team["id"], "user_id": bob["id"]}
    assert new_events(project, before) == [
        ("team_membership.created", ids),
        ("team_permission.created", {"id": "team_member", **ids}),
        ("team_membership.deleted", ids),
    ]


def test_accepting_an_invitation_records_the_membership_and_sending_one_nothing() -> None:
    project = IdentityFake().create_project()
    ada = project.create_user("ada@example.com")
    bob = project.create_user("bob@example.com")
    with project.client("server") as http:
        team = _ok(http.post("/api/v1/teams", json={"display_name": "Crew", "creator_user_id": ada["id"]}))
        before = recorded(project)
        _ok(
            http.post(
                "/api/v1/team-invitations/send-code",
                json={"team_id": team["id"], "email": "bob@example.com", "callback_url": CALLBACK},
            )
        )
    assert new_events(project, before) == []
    code = project.last_code("bob@example.com", kind="team_invitation")
    tokens = project.sign_in(bob["id"])
    with project.client("client", access_token=tokens["access_token"]) as http:
        _ok(http.post("/api/v1/team-invitations/accept", json={"code": code}))
    ids = {"team_id": team["id"], "user_id": bob["id"]}
    assert new_events(project, before) == [
        ("team_membership.created", ids),
        ("team_permission.created", {"id": "team_member", **ids}),
    ]


def test_permission_routes_record_explicit_grants_and_revokes_but_not_sign_up_defaults() -> None:
    project = IdentityFake().create_project()
    project.define_permission("read_reports")
    project.define_permission("edit_crew", scope="team")
    changes = ProjectConfigChanges.of([("user_default_permissions", ("read_reports",))])
    run(update_project(project.id, config=changes), project.fake.store)
    project.fake.service.projects.forget(project.id)
    ada = project.create_user("ada@example.com")
    assert types(recorded(project)) == ["user.created"]  # the default grant is not announced
    with project.client("server") as http:
        team = _ok(http.post("/api/v1/teams", json={"display_name": "Crew", "creator_user_id": ada["id"]}))
        before = recorded(project)
        _ok(http.post(f"/api/v1/project-permissions/{ada['id']}/read_reports", json={}))
        _ok(http.delete(f"/api/v1/project-permissions/{ada['id']}/read_reports"))
        assert http.delete(f"/api/v1/project-permissions/{ada['id']}/read_reports").status_code == 404
        _ok(http.post(f"/api/v1/team-permissions/{team['id']}/{ada['id']}/edit_crew", json={}))
        _ok(http.delete(f"/api/v1/team-permissions/{team['id']}/{ada['id']}/edit_crew"))
        assert http.post(f"/api/v1/team-permissions/{team['id']}/{ada['id']}/nothing", json={}).status_code == 404
    team_ids = {"id": "edit_crew", "team_id": team["id"], "user_id": ada["id"]}
    assert new_events(project, before) == [
        ("project_permission.created", {"id": "read_reports", "user_id": ada["id"]}),
        ("project_permission.deleted", {"id": "read_reports", "user_id": ada["id"]}),
        ("team_permission.created", team_ids),
        ("team_permission.deleted", team_ids),
    ]
