"""The fake's `TestProject.create_api_key`: keys a test suite makes in one line, that the service then checks
as it checks keys made through the API (in process, on the fake's clock)."""

from __future__ import annotations

import pytest

from identity_testing import IdentityFake


def test_a_user_key_made_by_the_fake_is_checked_by_the_service_until_it_expires() -> None:
    fake = IdentityFake()
    project = fake.create_project(allow_user_api_keys=True)
    user = project.create_user("ada@example.com")
    now = fake.clock.freeze()

    key = project.create_api_key(user_id=user["id"], description="CI", expires_at_millis=now + 60_000)

    assert key.startswith("sk_")
    with project.client("server") as http:
        checked = http.post("/api/v1/user-api-keys/check", json={"api_key": key})
        assert checked.status_code == 200
        assert (checked.json()["user_id"], checked.json()["description"]) == (user["id"], "CI")
        fake.clock.advance(minutes=1)
        expired = http.post("/api/v1/user-api-keys/check", json={"api_key": key})
        assert (expired.status_code, expired.json()["code"]) == (401, "API_KEY_EXPIRED")


def test_a_public_team_key_made_by_the_fake_is_listed_for_its_team() -> None:
    project = IdentityFake().create_project(allow_team_api_keys=True)
    with project.client("server") as http:
        team_id = http.post("/api/v1/teams", json={"display_name": "Crew"}).json()["id"]

        key = project.create_api_key(team_id=team_id, is_public=True)

        listed = http.get("/api/v1/team-api-keys", params={"team_id": team_id}).json()["items"]
    assert key.startswith("pk_")
    assert [(item["type"], item["is_public"], item["value"]) for item in listed] == [
        ("team", True, {"last_four": key[-4:]})
    ]


def test_the_fake_refuses_a_missing_owner_and_an_ambiguous_one() -> None:
    project = IdentityFake().create_project()
    with pytest.raises(LookupError):
        project.create_api_key(user_id="33333333-3333-4333-8333-333333333333")
    with pytest.raises(ValueError, match="exactly one"):
        project.create_api_key()
    with pytest.raises(ValueError, match="exactly one"):
        project.create_api_key(user_id="a", team_id="b")
