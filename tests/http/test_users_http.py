"""Users over HTTP, in process (the fake, on the memory store): what the answers show, as the original's."""

from __future__ import annotations

from identity_testing import IdentityFake


def test_post_users_answers_the_user_before_its_personal_team_a_later_read_shows_it() -> None:
    project = IdentityFake().create_project(create_team_on_sign_up=True)
    with project.client("server") as http:
        created = http.post("/api/v1/users", json={"primary_email": "ada@example.com", "display_name": "Ada"})
        assert created.status_code == 201, created.text
        user = created.json()
        assert (user["selected_team_id"], user["selected_team"]) == (None, None)
        read = http.get(f"/api/v1/users/{user['id']}").json()
    assert read["selected_team"]["display_name"] == "Ada's Team"
    assert read["selected_team_id"] == read["selected_team"]["id"]
    assert {**read, "selected_team_id": None, "selected_team": None} == user


def _client_view(compat: bool) -> tuple[dict[str, object], list[dict[str, object]]]:
    project = IdentityFake(compat=compat).create_project(create_team_on_sign_up=True)
    with project.client("server") as http:
        user_id = http.post("/api/v1/users", json={"primary_email": "ada@example.com"}).json()["id"]
    with project.client("client", access_token=project.sign_in(user_id)["access_token"]) as http:
        return http.get("/api/v1/users/me").json(), http.get("/api/v1/teams", params={"user_id": "me"}).json()["items"]


def test_a_client_sees_the_originals_client_fields_in_compatibility_mode_and_the_specs_otherwise() -> None:
    original_only = {"primary_email_auth_enabled", "last_active_at_millis", "country_code", "risk_scores"}
    me, teams = _client_view(compat=True)
    assert not original_only & me.keys()
    assert "server_metadata" not in me
    assert "created_at_millis" not in me["selected_team"]  # type: ignore[operator]
    assert [sorted(team) for team in teams] == [
        ["client_metadata", "client_read_only_metadata", "display_name", "id", "profile_image_url"]
    ]
    me, teams = _client_view(compat=False)
    assert original_only <= me.keys()
    assert "created_at_millis" in me["selected_team"]  # type: ignore[operator]
    assert "created_at_millis" in teams[0]


def _member_profiles(compat: bool) -> tuple[list[dict[str, object]], dict[str, object], dict[str, object]]:
    """A client's list of its team's profiles, its update of its own, and a server's read of it."""
    project = IdentityFake(compat=compat).create_project()
    with project.client("server") as http:
        user_id = http.post("/api/v1/users", json={"primary_email": "ada@example.com"}).json()["id"]
        team_id = http.post("/api/v1/teams", json={"display_name": "T", "creator_user_id": user_id}).json()["id"]
        server = http.get(f"/api/v1/team-member-profiles/{team_id}/{user_id}").json()
    with project.client("client", access_token=project.sign_in(user_id)["access_token"]) as http:
        listed = http.get("/api/v1/team-member-profiles", params={"team_id": team_id, "user_id": "me"}).json()
        updated = http.patch(f"/api/v1/team-member-profiles/{team_id}/me", json={"display_name": "Ada"}).json()
    return listed["items"], updated, server


def test_a_client_sees_member_profiles_without_the_user_in_compatibility_mode_only() -> None:
    # The original's client read schema of a profile has no `user` (its server one has); our spec marks it required.
    items, updated, server = _member_profiles(compat=True)
    assert [sorted(item) for item in items] == [["display_name", "profile_image_url", "team_id", "user_id"]]
    assert "user" not in updated
    assert updated["display_name"] == "Ada"
    assert server["user"]["primary_email"] == "ada@example.com"  # type: ignore[index]
    items, updated, server = _member_profiles(compat=False)
    assert all("user" in item for item in items)
    assert "user" in updated
    assert "user" in server
