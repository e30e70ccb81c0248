"""Team invitations through the in-process fake: `TestProject.last_code(email, kind="team_invitation")` reads the
invitation's code from its mail, and the default kind still finds the sign-in code when an invitation is newer."""

from __future__ import annotations

import pytest

from identity_testing import IdentityFake


def test_a_mailed_invitation_is_read_with_last_code_and_accepted() -> None:
    project = IdentityFake().create_project()
    inviter = project.create_user("ada@example.com")
    invitee = project.create_user("bob@example.com")
    with project.client("server") as http:
        team = http.post("/api/v1/teams", json={"display_name": "Crew", "creator_user_id": inviter["id"]}).json()
        with project.client("client") as client:
            sent = client.post(
                "/api/v1/auth/otp/send-sign-in-code",
                json={"email": "bob@example.com", "callback_url": "http://localhost/cb"},
            )
            assert sent.status_code == 200
        sign_in_code = project.last_code("bob@example.com")
        invited = http.post(
            "/api/v1/team-invitations/send-code",
            json={"team_id": team["id"], "email": "bob@example.com", "callback_url": "http://localhost/join"},
        )
        assert invited.status_code == 200, invited.text
    code = project.last_code("bob@example.com", kind="team_invitation")
    assert len(code) == 45
    assert project.last_magic_link("bob@example.com") == f"http://localhost/join?code={code}"
    assert project.last_code("bob@example.com") == sign_in_code  # the invitation is newer, but of another kind
    tokens = project.sign_in(invitee["id"])
    with project.client("client", access_token=tokens["access_token"]) as http:
        accepted = http.post("/api/v1/team-invitations/accept", json={"code": code})
        assert (accepted.status_code, accepted.json()) == (200, {})
        assert [t["id"] for t in http.get("/api/v1/teams", params={"user_id": "me"}).json()["items"]] == [team["id"]]


def test_last_code_names_the_kinds_it_knows() -> None:
    project = IdentityFake().create_project()
    with pytest.raises(ValueError, match="team_invitation"):
        project.last_code("ada@example.com", kind="nonsense")
    with pytest.raises(LookupError, match="no team-invitation code"):
        project.last_code("ada@example.com", kind="team_invitation")
