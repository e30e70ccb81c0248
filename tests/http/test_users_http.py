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
