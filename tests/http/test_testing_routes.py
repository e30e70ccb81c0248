"""Test-only routes in dev/test mode, and their absence in a production configuration; time control proven in
process (the testing API's clock) and over HTTP (the /testing/clock route)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from identity_testing import IdentityFake, TestProject
from tests.support import internal_headers

DAY_MS = 24 * 3600 * 1000


def _code(http: httpx.Client, project_headers: dict[str, str], email: str) -> str:
    sent = http.post(
        "/api/v1/auth/otp/send-sign-in-code",
        headers=project_headers,
        json={"email": email, "callback_url": "http://localhost/cb"},
    )
    assert sent.status_code == 200
    return sent.json()["nonce"]


def test_in_process_a_code_expires_after_seven_days_and_a_token_after_ten_minutes() -> None:
    fake = IdentityFake()
    project = fake.create_project()
    fake.clock.freeze(at_ms=1_800_000_000_000)  # a whole second: JWT expiry has one-second resolution
    with project.client("client") as http:
        _code(http, {}, "ada@example.com")
        code = project.last_code("ada@example.com")
        fake.clock.advance(days=7)
        expired = http.post("/api/v1/auth/otp/sign-in", json={"code": code})
        assert expired.json()["code"] == "VERIFICATION_CODE_EXPIRED"
        _code(http, {}, "ada@example.com")
        signed_in = http.post("/api/v1/auth/otp/sign-in", json={"code": project.last_code("ada@example.com")}).json()
        token = {"x-service-access-token": signed_in["access_token"]}
        fake.clock.advance(minutes=10, ms=-1)
        assert http.get("/api/v1/users/me", headers=token).status_code == 200
        fake.clock.advance(ms=1)
        assert http.get("/api/v1/users/me", headers=token).json()["code"] == "ACCESS_TOKEN_EXPIRED"


def test_the_fakes_outbox_items_carry_the_code_to_type_and_the_magic_link() -> None:
    project = IdentityFake().create_project()
    with project.client("client") as http:
        nonce = _code(http, {}, "ada@example.com")
    (mail,) = project.outbox("ada@example.com")

    assert re.fullmatch(r"[0-9A-Z]{6}", mail["code"])
    assert mail["magic_link"] == f"http://localhost/cb?code={mail['code'].lower()}{nonce}"
    assert project.last_code("ada@example.com") == mail["code"] + nonce
    assert project.last_magic_link("ada@example.com") == mail["magic_link"]


def test_over_http_the_clock_route_moves_time_for_codes_and_tokens() -> None:
    fake = IdentityFake()
    project = fake.dev_project
    with fake.client() as http:
        frozen = http.post("/api/v1/testing/clock", headers=internal_headers(), json={"freeze": True})
        assert frozen.json()["frozen"] is True
        client = project.headers("client")
        _code(http, client, "bob@example.com")
        code = project.last_code("bob@example.com")
        http.post("/api/v1/testing/clock", headers=internal_headers(), json={"advance_millis": 7 * DAY_MS - 1})
        _code(http, client, "bob@example.com")
        fresh = project.last_code("bob@example.com")
        http.post("/api/v1/testing/clock", headers=internal_headers(), json={"advance_millis": 1})
        assert (
            http.post("/api/v1/auth/otp/sign-in", headers=client, json={"code": code}).json()["code"]
            == "VERIFICATION_CODE_EXPIRED"
        )
        token = http.post("/api/v1/auth/otp/sign-in", headers=client, json={"code": fresh}).json()["access_token"]
        me = {**client, "x-service-access-token": token}
        assert http.get("/api/v1/users/me", headers=me).status_code == 200
        http.post("/api/v1/testing/clock", headers=internal_headers(), json={"advance_millis": 10 * 60 * 1000})
        assert http.get("/api/v1/users/me", headers=me).json()["code"] == "ACCESS_TOKEN_EXPIRED"
        back = http.post("/api/v1/testing/clock", headers=internal_headers(), json={"reset": True}).json()
        assert back["frozen"] is False
        assert http.get("/api/v1/testing/clock", headers=internal_headers()).json()["offset_millis"] == 0


@pytest.mark.parametrize("body", [{"set_millis": 10**20}, {"advance_millis": 10**20}, {"advance_millis": -(10**20)}])
def test_a_clock_beyond_the_year_9999_is_refused_and_changes_nothing(body: dict[str, int]) -> None:
    fake = IdentityFake()
    with fake.client() as http:
        before = http.get("/api/v1/testing/clock", headers=internal_headers()).json()["offset_millis"]
        refused = http.post("/api/v1/testing/clock", headers=internal_headers(), json=body)
        assert (refused.status_code, refused.json()["code"]) == (400, "SCHEMA_ERROR")
        assert next(iter(body)) in refused.json()["error"]
        assert http.get("/api/v1/testing/clock", headers=internal_headers()).json()["offset_millis"] == before


def test_reset_export_and_import_over_http() -> None:
    fake = IdentityFake()
    source, target = fake.create_project("source"), fake.create_project("target")
    user = source.create_user("ada@example.com", password="correct horse", display_name="Ada")
    with source.client("server") as server:
        team = server.post("/api/v1/teams", json={"display_name": "Crew", "creator_user_id": user["id"]}).json()
    with fake.client() as http:
        exported = http.get(f"/api/v1/testing/projects/{source.id}/export", headers=internal_headers()).json()
        assert "correct horse" not in str(exported)
        assert exported["users"][0]["password_hash"].startswith("$2b$")
        imported = http.post(f"/api/v1/testing/projects/{target.id}/import", headers=internal_headers(), json=exported)
        assert imported.json() == {
            "imported": {
                "users": 1,
                "teams": 1,
                "memberships": 1,
                "contact_channels": 0,
                "project_permissions": 0,
                "api_keys": 0,
                "team_invitations": 0,
                "webhook_endpoints": 0,
            }
        }
        signed = http.post(
            "/api/v1/auth/password/sign-in",
            headers=target.headers("client"),
            json={"email": "ada@example.com", "password": "correct horse"},
        )
        assert signed.json()["user_id"] == user["id"]
        profiles = http.get(
            "/api/v1/team-member-profiles", headers=target.headers("server"), params={"team_id": team["id"]}
        ).json()["items"]
        assert [p["user_id"] for p in profiles] == [user["id"]]
        assert http.post(f"/api/v1/testing/projects/{source.id}/reset", headers=internal_headers()).json() == {
            "success": True
        }
        assert http.get("/api/v1/users", headers=source.headers("server")).json()["items"] == []
        assert len(http.get("/api/v1/users", headers=target.headers("server")).json()["items"]) == 1
        assert (
            http.post(f"/api/v1/testing/projects/{target.id}/reset", headers=source.headers("admin")).json()["code"]
            == "EXPECTED_INTERNAL_PROJECT"
        )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/testing/clock"),
        ("POST", "/api/v1/testing/clock"),
        ("POST", "/api/v1/testing/projects/internal/reset"),
        ("GET", "/api/v1/testing/projects/internal/export"),
        ("POST", "/api/v1/testing/projects/internal/import"),
    ],
)
def test_a_production_configuration_has_none_of_the_test_only_routes(method: str, path: str) -> None:
    from backends.memory import MemoryStore
    from identity_hosting.settings import Settings
    from identity_hosting.wsgi import IdentityWSGI

    production = Settings.from_env(
        {
            "IDENTITY_PROJECT_ID": "11111111-1111-4111-8111-111111111111",
            "IDENTITY_PUBLISHABLE_CLIENT_KEY": "pck_production_key_00000000",
            "IDENTITY_SECRET_SERVER_KEY": "ssk_production_key_00000000",
            "IDENTITY_SUPER_SECRET_ADMIN_KEY": "sak_production_key_00000000",
            "IDENTITY_INTERNAL_ADMIN_KEY": "sak_internal_production_0000",
            "IDENTITY_MAIL": "smtp://127.0.0.1:2525",
        }
    )
    assert production.dev_mode is False
    app = IdentityWSGI(production, store=MemoryStore())
    headers = {**internal_headers(), "x-service-super-secret-admin-key": "sak_internal_production_0000"}
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://prod.test") as http:
        response = http.request(method, path, headers=headers, json={})
    assert (response.status_code, response.headers["x-service-known-error"]) == (404, "ROUTE_NOT_FOUND")
    assert re.search("testing", response.json()["error"])


def test_an_import_stops_at_a_taken_user_id_or_address() -> None:
    fake = IdentityFake()
    source, target = fake.create_project("source"), fake.create_project("target")
    source.create_user("ada@example.com", password="correct horse", display_name="Ada")
    with fake.client() as http:
        exported = http.get(f"/api/v1/testing/projects/{source.id}/export", headers=internal_headers()).json()
        url = f"/api/v1/testing/projects/{target.id}/import"
        assert http.post(url, headers=internal_headers(), json=exported).status_code == 200
        again = http.post(url, headers=internal_headers(), json=exported)  # the same id
        assert (again.status_code, again.headers["x-service-known-error"]) == (409, "USER_EMAIL_ALREADY_EXISTS")
        assert "exists already" in again.json()["error"]
        other_id = {**exported, "users": [{**exported["users"][0], "id": "another-id"}], "teams": [], "memberships": []}
        taken = http.post(url, headers=internal_headers(), json=other_id)  # another id, the same auth address
        assert (taken.status_code, taken.headers["x-service-known-error"]) == (409, "USER_EMAIL_ALREADY_EXISTS")
        users = http.get("/api/v1/users", headers=target.headers("server")).json()["items"]
        assert [u["primary_email"] for u in users] == ["ada@example.com"]


def _signed_in_user(project: TestProject, tokens: dict[str, Any]) -> str:
    with project.client("client") as client:
        me = client.get("/api/v1/users/me", headers={"x-service-access-token": tokens["access_token"]})
    return str(me.json()["id"])


def test_the_fakes_export_carries_every_kind_to_another_project() -> None:
    """`project.export()` / `import_data()`: OAuth sign-in accounts, TOTP, grants, keys, invitations and endpoints
    arrive whole; the secrets a client holds work there (key texts, the invitation's code, the OAuth account)."""
    fake = IdentityFake()
    source = fake.create_project("source", allow_user_api_keys=True, allow_team_api_keys=True)
    source.use_mock_oauth("github")
    ada = _signed_in_user(source, source.oauth_sign_in("github", email="ada@example.com"))
    bob = source.create_user("bob@example.com", password="correct horse", display_name="Bob")["id"]
    source.enable_totp(bob)
    source.define_permission("read_reports")
    source.grant_project_permission(ada, "read_reports")
    user_key = source.create_api_key(user_id=ada)
    with source.client("server") as server:
        team = server.post("/api/v1/teams", json={"display_name": "Crew", "creator_user_id": ada}).json()["id"]
        body = {"team_id": team, "email": "bob@example.com", "callback_url": "http://localhost:3000/invite"}
        assert server.post("/api/v1/team-invitations/send-code", json=body).status_code == 200
        assert server.post(
            "/api/v1/contact-channels",
            json={"user_id": bob, "type": "email", "value": "bob@work.example", "used_for_auth": True},
        ).is_success
    code = source.last_code("bob@example.com", kind="team_invitation")
    team_key = source.create_api_key(team_id=team)
    source.add_webhook_receiver(lambda headers, body: 200, ["user.created"])

    exported = source.export()
    text = json.dumps(exported)
    assert all(secret not in text for secret in (user_key, team_key, code, "correct horse"))
    target = fake.create_project("target")
    counts = target.import_data(json.loads(text))
    assert counts == {
        "users": 2,
        "teams": 1,
        "memberships": 1,
        "contact_channels": 1,
        "project_permissions": 1,
        "api_keys": 2,
        "team_invitations": 1,
        "webhook_endpoints": 1,
    }
    again = target.export()
    for document in (exported, again):
        del document["exported_at_millis"], document["project"]["id"], document["project"]["display_name"]
    assert again == exported

    again_ada = target.oauth_sign_in("github", email="ada@example.com")  # the same account signs the same user in
    assert (again_ada["is_new_user"], _signed_in_user(target, again_ada)) == (False, ada)
    with target.client("server") as server:
        assert server.post("/api/v1/user-api-keys/check", json={"api_key": user_key}).json()["user_id"] == ada
        assert server.post("/api/v1/team-api-keys/check", json={"api_key": team_key}).json()["team_id"] == team
    with target.client("client") as client:
        signed = client.post(
            "/api/v1/auth/password/sign-in", json={"email": "bob@work.example", "password": "correct horse"}
        )
        assert signed.json()["code"] == "MULTI_FACTOR_AUTHENTICATION_REQUIRED"  # his TOTP came along
        attempt = signed.json()["details"]["attempt_code"]
        mfa = {"type": "totp", "totp": target.current_totp(bob), "code": attempt}
        tokens = client.post("/api/v1/auth/mfa/sign-in", json=mfa).json()
        accepted = client.post(
            "/api/v1/team-invitations/accept",
            headers={"x-service-access-token": tokens["access_token"]},
            json={"code": code},
        )
        assert accepted.status_code == 200, accepted.text
