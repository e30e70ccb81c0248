"""Passkeys over HTTP (`auth/passkey/*`), driven by the fake's software authenticator: registration and sign-in,
and every refusal of the routes (a disabled project, no signed-in user, a replayed, expired, another project's or
another purpose's challenge, an origin the project does not trust, a wrong RP ID, a cloned authenticator, an
unknown credential), the second factor, and `passkey_auth_enabled: false` removing the passkey."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from identity_testing import IdentityFake, PasskeyAuthenticator, TestProject

PREFIX = "/api/v1/auth/passkey"


@pytest.fixture
def fake() -> IdentityFake:
    return IdentityFake()


@pytest.fixture
def project(fake: IdentityFake) -> TestProject:
    return fake.create_project(passkey_enabled=True)


def signed_in_user(project: TestProject, email: str = "ada@example.com") -> tuple[dict[str, Any], str]:
    user = project.create_user(email)
    return user, project.sign_in(user["id"])["access_token"]


def refused(response: httpx.Response, status: int, code: str) -> str:
    assert (response.status_code, response.headers.get("x-service-known-error")) == (status, code), response.text
    return str(response.json()["error"])


def registered(
    project: TestProject, origin: str = "http://localhost:3000", email: str = "ada@example.com"
) -> tuple[dict[str, Any], PasskeyAuthenticator]:
    user, token = signed_in_user(project, email)
    authenticator = project.passkey_authenticator(origin)
    with project.client("client", access_token=token) as http:
        authenticator.register(http)
    return user, authenticator


def test_a_user_registers_a_passkey_and_signs_in_with_it(project: TestProject) -> None:
    user, token = signed_in_user(project)
    authenticator = project.passkey_authenticator()
    with project.client("client", access_token=token) as http:
        before = http.get("/api/v1/users/me").json()["passkey_auth_enabled"]
        started = http.post(f"{PREFIX}/initiate-passkey-registration", json={}).json()
        credential = authenticator.create(started["options_json"])
        answer = http.post(f"{PREFIX}/register", json={"credential": credential, "code": started["code"]})
        after = http.get("/api/v1/users/me").json()["passkey_auth_enabled"]
    assert (before, answer.status_code, answer.json(), after) == (False, 200, {"user_handle": credential["id"]}, True)
    options = started["options_json"]
    assert options["rp"] == {"name": "Test project", "id": "THIS_VALUE_WILL_BE_REPLACED.example.com"}
    assert (options["attestation"], options["timeout"], options["user"]["name"]) == ("none", 60_000, "ada@example.com")

    with project.client("client") as http:
        signed_in = authenticator.sign_in(http)
        me = http.get("/api/v1/users/me", headers={"x-service-access-token": signed_in["access_token"]})
    assert (signed_in["user_id"], signed_in["is_new_user"]) == (user["id"], False)
    assert set(signed_in) == {"access_token", "refresh_token", "is_new_user", "user_id"}
    assert me.json()["id"] == user["id"]


def test_the_authentication_options_name_no_credential_and_the_placeholder_rp(project: TestProject) -> None:
    with project.client("client") as http:
        started = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()
    options = started["options_json"]
    assert set(options) == {"challenge", "timeout", "rpId", "allowCredentials", "userVerification"}
    assert (options["rpId"], options["allowCredentials"], options["userVerification"]) == (
        "THIS_VALUE_WILL_BE_REPLACED.example.com",
        [],
        "preferred",
    )


def test_the_counter_goes_up_with_each_sign_in_and_is_stored(project: TestProject) -> None:
    _user, authenticator = registered(project)
    with project.client("client") as http:
        for _ in range(3):
            authenticator.sign_in(http)
    (stored,) = project.export()["users"][0]["passkeys"]
    assert stored["sign_count"] == authenticator.credentials[0].sign_count == 3
    # nothing secret is stored: the public key, the id, the counter, transports, AAGUID, times
    assert set(stored) == {
        "credential_id",
        "public_key",
        "sign_count",
        "transports",
        "aaguid",
        "created_at_millis",
        "rp_id",
    }


def test_every_route_is_refused_while_the_project_has_passkeys_off(fake: IdentityFake) -> None:
    project = fake.create_project()
    _user, token = signed_in_user(project)
    with project.client("client", access_token=token) as http:
        answers = [
            http.post(f"{PREFIX}/initiate-passkey-registration", json={}),
            http.post(f"{PREFIX}/register", json={"credential": {}, "code": "x" * 45}),
            http.post(f"{PREFIX}/initiate-passkey-authentication", json={}),
            http.post(f"{PREFIX}/sign-in", json={"authentication_response": {}, "code": "x" * 45}),
        ]
        config = http.get("/api/v1/projects/current").json()["config"]
    for answer in answers:
        message = refused(answer, 400, "PASSKEY_AUTHENTICATION_NOT_ENABLED")
        assert message == "Passkey authentication is not enabled for this project."
    assert config["passkey_enabled"] is False


def test_a_project_turns_passkeys_on_and_off(fake: IdentityFake) -> None:
    project = fake.create_project()
    with project.client("admin") as http:
        on = http.patch("/api/v1/projects/current", json={"config": {"passkey_enabled": True}})
    with project.client("client") as http:
        offered = http.post(f"{PREFIX}/initiate-passkey-authentication", json={})
        shown = http.get("/api/v1/projects/current").json()["config"]["passkey_enabled"]
    assert (on.status_code, on.json()["config"]["passkey_enabled"], offered.status_code, shown) == (
        200,
        True,
        200,
        True,
    )


def test_registering_needs_a_signed_in_user(project: TestProject) -> None:
    with project.client("client") as http:
        started = http.post(f"{PREFIX}/initiate-passkey-registration", json={})
        registering = http.post(f"{PREFIX}/register", json={"credential": {}, "code": "x" * 45})
    for answer in (started, registering):
        assert "auth.user must be defined" in refused(answer, 400, "SCHEMA_ERROR")


def test_a_challenge_is_used_once(project: TestProject) -> None:
    user, token = signed_in_user(project)
    authenticator = project.passkey_authenticator()
    with project.client("client", access_token=token) as http:
        started = http.post(f"{PREFIX}/initiate-passkey-registration", json={}).json()
        body = {"credential": authenticator.create(started["options_json"]), "code": started["code"]}
        assert http.post(f"{PREFIX}/register", json=body).status_code == 200
        refused(http.post(f"{PREFIX}/register", json=body), 409, "VERIFICATION_CODE_ALREADY_USED")
    with project.client("client") as http:
        started = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()
        body = {"authentication_response": authenticator.get(started["options_json"]), "code": started["code"]}
        assert http.post(f"{PREFIX}/sign-in", json=body).json()["user_id"] == user["id"]
        refused(http.post(f"{PREFIX}/sign-in", json=body), 409, "VERIFICATION_CODE_ALREADY_USED")
        # a fresh code does not make the old answer good: it signed another challenge
        fresh = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()["code"]
        replayed = http.post(f"{PREFIX}/sign-in", json={**body, "code": fresh})
    refused(replayed, 400, "PASSKEY_AUTHENTICATION_FAILED")


def test_a_challenge_expires_after_65_seconds(fake: IdentityFake, project: TestProject) -> None:
    _user, authenticator = registered(project)
    fake.clock.freeze()
    with project.client("client") as http:
        started = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()
        fake.clock.advance(seconds=65)
        body = {"authentication_response": authenticator.get(started["options_json"]), "code": started["code"]}
        refused(http.post(f"{PREFIX}/sign-in", json=body), 400, "VERIFICATION_CODE_EXPIRED")


def test_another_projects_challenge_is_not_found(fake: IdentityFake, project: TestProject) -> None:
    _user, authenticator = registered(project)
    other = fake.create_project(passkey_enabled=True)
    with other.client("client") as http:
        foreign = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()
    with project.client("client") as http:
        body = {"authentication_response": authenticator.get(foreign["options_json"]), "code": foreign["code"]}
        refused(http.post(f"{PREFIX}/sign-in", json=body), 404, "VERIFICATION_CODE_NOT_FOUND")


def test_a_challenge_of_one_purpose_or_user_does_not_serve_another(project: TestProject) -> None:
    _ada, ada_token = signed_in_user(project)
    _bob, bob_token = signed_in_user(project, "bob@example.com")
    authenticator = project.passkey_authenticator()
    with project.client("client", access_token=ada_token) as http:
        registration = http.post(f"{PREFIX}/initiate-passkey-registration", json={}).json()
        authentication = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()
        created = authenticator.create(registration["options_json"])
        as_registration = http.post(f"{PREFIX}/register", json={"credential": created, "code": authentication["code"]})
    with project.client("client", access_token=bob_token) as http:
        as_bobs = http.post(f"{PREFIX}/register", json={"credential": created, "code": registration["code"]})
    with project.client("client") as http:
        as_sign_in = http.post(
            f"{PREFIX}/sign-in", json={"authentication_response": created, "code": registration["code"]}
        )
    refused(as_registration, 404, "VERIFICATION_CODE_NOT_FOUND")
    refused(as_bobs, 404, "VERIFICATION_CODE_NOT_FOUND")
    refused(as_sign_in, 404, "VERIFICATION_CODE_NOT_FOUND")


def test_an_origin_the_project_does_not_trust_is_refused(project: TestProject) -> None:
    _user, token = signed_in_user(project)
    authenticator = project.passkey_authenticator()
    with project.client("client", access_token=token) as http, pytest.raises(AssertionError) as registering:
        authenticator.register(http, origin="https://evil.example.com")
    assert "PASSKEY_REGISTRATION_FAILED" in str(registering.value)
    assert "the origin is not allowed" in str(registering.value)
    _user, authenticator = registered(project, email="bob@example.com")
    with project.client("client") as http, pytest.raises(AssertionError) as signing_in:
        authenticator.sign_in(http, origin="https://evil.example.com")
    assert "PASSKEY_AUTHENTICATION_FAILED" in str(signing_in.value)
    assert "the origin is not allowed" in str(signing_in.value)


@pytest.mark.parametrize("origin", ["http://localhost:3000/path", "localhost", "https://app.example.com@evil.com"])
def test_a_malformed_origin_is_not_allowed(project: TestProject, origin: str) -> None:
    _user, token = signed_in_user(project)
    with project.client("client", access_token=token) as http, pytest.raises(AssertionError) as registering:
        project.passkey_authenticator().register(http, origin=origin)
    assert "the origin is not allowed" in str(registering.value)


def test_an_answer_signed_for_another_rp_id_is_refused(project: TestProject) -> None:
    _user, token = signed_in_user(project)
    authenticator = project.passkey_authenticator()
    with project.client("client", access_token=token) as http, pytest.raises(AssertionError) as registering:
        authenticator.register(http, rp_id="example.com")
    assert "PASSKEY_REGISTRATION_FAILED" in str(registering.value)
    assert "verification response is invalid" in str(registering.value)
    _user, authenticator = registered(project, email="bob@example.com")
    authenticator.credentials[0].rp_id = "example.com"  # as if the browser had used another RP ID
    with project.client("client") as http, pytest.raises(AssertionError) as signing_in:
        authenticator.sign_in(http, rp_id="example.com")
    assert "PASSKEY_AUTHENTICATION_FAILED" in str(signing_in.value)


def test_a_cloned_authenticator_is_refused_once_the_original_signed_after_it(project: TestProject) -> None:
    _user, authenticator = registered(project)
    clone = authenticator.clone()
    with project.client("client") as http:
        authenticator.sign_in(http)  # counter 1
        authenticator.sign_in(http)  # counter 2
        with pytest.raises(AssertionError) as cloned:
            clone.sign_in(http)  # counter 1 again
    assert "PASSKEY_AUTHENTICATION_FAILED" in str(cloned.value)
    assert "signature counter did not increase" in str(cloned.value)


def test_an_unknown_credential_is_not_found(project: TestProject) -> None:
    stranger = PasskeyAuthenticator()
    stranger.create({"challenge": "AA", "rp": {"id": "localhost"}, "user": {"id": "dXNlcg"}})
    with project.client("client") as http, pytest.raises(AssertionError) as unknown:
        stranger.sign_in(http)
    assert "PASSKEY_AUTHENTICATION_FAILED" in str(unknown.value)
    assert "Passkey not found" in str(unknown.value)


def test_a_malformed_answer_is_refused_not_an_error(project: TestProject) -> None:
    _user, token = signed_in_user(project)
    _user, authenticator = registered(project, email="bob@example.com")
    with project.client("client", access_token=token) as http:
        started = http.post(f"{PREFIX}/initiate-passkey-registration", json={}).json()
        credential = authenticator.create(started["options_json"])
        credential["response"]["attestationObject"] = "bm90IGNib3I"
        broken = http.post(f"{PREFIX}/register", json={"credential": credential, "code": started["code"]})
        started = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()
        answer = authenticator.get(started["options_json"])
        answer["response"]["signature"] = "AAAA"
        forged = http.post(f"{PREFIX}/sign-in", json={"authentication_response": answer, "code": started["code"]})
    refused(broken, 400, "PASSKEY_REGISTRATION_FAILED")
    refused(forged, 400, "PASSKEY_AUTHENTICATION_FAILED")


def test_a_user_with_a_second_factor_is_asked_for_it_and_the_counter_is_kept(project: TestProject) -> None:
    user, authenticator = registered(project)
    project.enable_totp(user["id"])
    with project.client("client") as http:
        started = http.post(f"{PREFIX}/initiate-passkey-authentication", json={}).json()
        body = {"authentication_response": authenticator.get(started["options_json"]), "code": started["code"]}
        answer = http.post(f"{PREFIX}/sign-in", json=body)
        refused(answer, 400, "MULTI_FACTOR_AUTHENTICATION_REQUIRED")
        mfa = http.post(
            "/api/v1/auth/mfa/sign-in",
            json={
                "type": "totp",
                "totp": project.current_totp(user["id"]),
                "code": answer.json()["details"]["attempt_code"],
            },
        )
    assert mfa.json()["user_id"] == user["id"]
    assert project.export()["users"][0]["passkeys"][0]["sign_count"] == 1


def test_passkey_auth_enabled_false_removes_the_passkey(project: TestProject) -> None:
    user, authenticator = registered(project)
    with project.client("server") as http:
        enabling = http.patch(f"/api/v1/users/{user['id']}", json={"passkey_auth_enabled": True})
        removed = http.patch(f"/api/v1/users/{user['id']}", json={"passkey_auth_enabled": False})
    refused(enabling, 400, "PASSKEY_AUTH_CANNOT_BE_ENABLED")
    assert (removed.status_code, removed.json()["passkey_auth_enabled"]) == (200, False)
    with project.client("client") as http, pytest.raises(AssertionError) as gone:
        authenticator.sign_in(http)
    assert "Passkey not found" in str(gone.value)


def test_a_new_registration_replaces_the_users_passkey(project: TestProject) -> None:
    _user, token = signed_in_user(project)
    first, second = project.passkey_authenticator(), project.passkey_authenticator()
    with project.client("client", access_token=token) as http:
        first.register(http)
        second.register(http)
    with project.client("client") as http:
        assert second.sign_in(http)["is_new_user"] is False
        with pytest.raises(AssertionError, match="Passkey not found"):
            first.sign_in(http)


def test_a_wildcard_trusted_domain_is_an_allowed_origin_and_its_host_the_rp_id(fake: IdentityFake) -> None:
    project = fake.create_project(
        passkey_enabled=True, allow_localhost=False, domains=[{"domain": "https://*.example.com", "handler_path": "/"}]
    )
    user, token = signed_in_user(project)
    authenticator = project.passkey_authenticator("https://app.example.com")
    with project.client("client", access_token=token) as http:
        authenticator.register(http)
    with project.client("client") as http:
        assert authenticator.sign_in(http)["user_id"] == user["id"]
        with pytest.raises(AssertionError, match="the origin is not allowed"):
            authenticator.sign_in(http, origin="http://localhost:3000")
    assert authenticator.credentials[0].rp_id == "app.example.com"


def test_a_server_lists_a_users_passkeys_without_their_keys(project: TestProject) -> None:
    user, authenticator = registered(project)
    with project.client("server") as http:
        listed = http.get(f"/api/v1/users/{user['id']}/passkeys").json()
        http.patch(f"/api/v1/users/{user['id']}", json={"passkey_auth_enabled": False})
        after = http.get(f"/api/v1/users/{user['id']}/passkeys").json()["items"]
        missing = http.get("/api/v1/users/33333333-3333-4333-8333-333333333333/passkeys")
    with project.client("client") as http:
        by_client = http.get(f"/api/v1/users/{user['id']}/passkeys")
    (item,) = listed["items"]
    assert item == {
        "id": authenticator.credentials[0].id,
        "rp_id": "localhost",
        "transports": ["internal"],
        "aaguid": "00000000-0000-0000-0000-000000000000",
        "sign_count": 0,
        "created_at_millis": item["created_at_millis"],
    }
    assert after == []
    refused(missing, 404, "USER_NOT_FOUND")
    assert by_client.status_code == 401
