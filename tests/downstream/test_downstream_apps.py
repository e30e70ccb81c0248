"""An example downstream test suite: it uses only the public testing API (identity_testing) and the pytest
plugin's fixtures, exactly as another project's tests would."""

from __future__ import annotations

import asyncio

import httpx

from identity_testing import FakeClock, TestProject
from tests.downstream.apps import create_flask_app, create_starlette_app


def _sign_in_by_code(project: TestProject, email: str) -> dict[str, str]:
    """What a user does: ask for a code, read the mail, type the code."""
    with project.client("client") as identity:
        sent = identity.post(
            "/api/v1/auth/otp/send-sign-in-code", json={"email": email, "callback_url": "http://localhost:5000/cb"}
        )
        assert sent.status_code == 200
        signed_in = identity.post("/api/v1/auth/otp/sign-in", json={"code": project.last_code(email)})
    assert signed_in.status_code == 200, signed_in.text
    return dict(signed_in.json())


def test_flask_app_greets_the_signed_in_user_and_sets_plans(identity_project: TestProject) -> None:
    tokens = _sign_in_by_code(identity_project, "shopper@example.com")
    with identity_project.fake.client() as identity:
        app = create_flask_app(identity, identity_project.headers("client"), identity_project.headers("server"))
        shop = app.test_client()
        bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
        assert shop.get("/profile", headers=bearer).json == {"greeting": "Hello, shopper@example.com!", "plan": "free"}
        assert shop.post(f"/admin/plan/{tokens['user_id']}", json={"plan": "pro"}).json == {"ok": True}
        assert shop.get("/profile", headers=bearer).json["plan"] == "pro"
        assert shop.get("/profile").status_code == 401


def test_flask_app_refuses_a_token_once_it_expired(identity_project: TestProject, identity_clock: FakeClock) -> None:
    user = identity_project.create_user("old@example.com", display_name="Old Timer")
    tokens = identity_project.sign_in(user["id"])
    with identity_project.fake.client() as identity:
        shop = create_flask_app(identity, identity_project.headers("client"), identity_project.headers("server"))
        bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
        assert shop.test_client().get("/profile", headers=bearer).json["greeting"] == "Hello, Old Timer!"
        identity_clock.advance(minutes=10)
        expired = shop.test_client().get("/profile", headers=bearer)
        assert (expired.status_code, expired.json) == (401, {"error": "ACCESS_TOKEN_EXPIRED"})


def test_starlette_app_knows_the_caller_and_their_teams(identity_project: TestProject) -> None:
    user = identity_project.create_user("notes@example.com")
    tokens = identity_project.sign_in(user["id"])
    with identity_project.client("server") as server:
        team = server.post("/api/v1/teams", json={"display_name": "Writers", "creator_user_id": user["id"]}).json()
    assert team["display_name"] == "Writers"

    async def scenario() -> tuple[dict[str, object], dict[str, object], int]:
        async with identity_project.fake.async_client() as identity:
            app = create_starlette_app(identity, identity_project.headers("client"), identity_project.headers("server"))
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://notes") as notes:
                bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
                who = (await notes.get("/whoami", headers=bearer)).json()
                teams = (await notes.get("/teams", headers=bearer)).json()
                anonymous = (await notes.get("/whoami")).status_code
                return who, teams, anonymous

    who, teams, anonymous = asyncio.run(scenario())
    assert who == {"user_id": user["id"], "email": "notes@example.com"}
    assert teams == {"teams": ["Writers"]}
    assert anonymous == 401


def test_second_factor_with_the_fakes_totp(identity_project: TestProject) -> None:
    user = identity_project.create_user("careful@example.com")
    identity_project.enable_totp(user["id"])
    with identity_project.client("client") as identity:
        identity.post(
            "/api/v1/auth/otp/send-sign-in-code",
            json={"email": "careful@example.com", "callback_url": "http://localhost/cb"},
        )
        required = identity.post(
            "/api/v1/auth/otp/sign-in", json={"code": identity_project.last_code("careful@example.com")}
        )
        assert required.json()["code"] == "MULTI_FACTOR_AUTHENTICATION_REQUIRED"
        done = identity.post(
            "/api/v1/auth/mfa/sign-in",
            json={
                "type": "totp",
                "totp": identity_project.current_totp(user["id"]),
                "code": required.json()["details"]["attempt_code"],
            },
        )
    assert (done.status_code, done.json()["user_id"]) == (200, user["id"])


def test_each_test_gets_its_own_project(identity_project: TestProject, identity_outbox: object) -> None:
    other = identity_project.fake.create_project("Neighbour")
    other.create_user("neighbour@example.com")
    with identity_project.client("server") as server:
        assert server.get("/api/v1/users").json()["items"] == []
    identity_project.create_user("mine@example.com")
    other.reset()
    with other.client("server") as server:
        assert server.get("/api/v1/users").json()["items"] == []
    with identity_project.client("server") as server:
        assert [u["primary_email"] for u in server.get("/api/v1/users").json()["items"]] == ["mine@example.com"]
