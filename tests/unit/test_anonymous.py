"""Anonymous users (reference part 2, §4), in process with a frozen clock: the sign-up, what the token allows, the
key that signs it, the upgrade in place by password sign-up and by code sign-in, and the refusals that write
nothing."""

from __future__ import annotations

from typing import Any

import pytest
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError
from joserfc.jwk import KeySet

from identity_proto.tokens import access_token_key
from tests.support import PROJECT_ID, Harness, Reply, admin_headers, client_headers, server_headers
from tests.unit.test_sign_in import code_for

ALLOW = {"x-service-allow-anonymous-user": "true"}
JWKS = f"/api/v1/projects/{PROJECT_ID}/.well-known/jwks.json"
YEAR_MS = 365 * 24 * 3600 * 1000


def configure(h: Harness, **config: Any) -> None:
    reply = h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": config})
    assert reply.status == 200, reply.body


def sign_up_anonymously(h: Harness, headers: dict[str, str] | None = None) -> dict[str, str]:
    reply = h.request("POST", "/api/v1/auth/anonymous/sign-up", headers or client_headers())
    assert reply.status == 200, reply.body
    return dict(reply.json)


def as_anonymous(tokens: dict[str, str]) -> dict[str, str]:
    return client_headers(**{"x-service-access-token": tokens["access_token"]}, **ALLOW)


def me(h: Harness, tokens: dict[str, str]) -> dict[str, Any]:
    reply = h.request("GET", "/api/v1/users/me", as_anonymous(tokens))
    assert reply.status == 200, reply.body
    return dict(reply.json)


def password_sign_up(h: Harness, headers: dict[str, str], email: str = "ada@example.com") -> Reply:
    return h.request(
        "POST", "/api/v1/auth/password/sign-up", headers, json={"email": email, "password": "correct horse"}
    )


def decode(token: str, keys: dict[str, Any]) -> dict[str, Any]:
    return dict(jwt.decode(token, KeySet.import_key_set(keys), algorithms=["ES256"]).claims)


# --- the sign-up -----------------------------------------------------------------------------------------------


def test_an_anonymous_sign_up_answers_tokens_and_the_new_users_id() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    assert set(tokens) == {"access_token", "refresh_token", "user_id"}
    user = me(h, tokens)
    assert user["id"] == tokens["user_id"]
    assert (user["is_anonymous"], user["is_restricted"], user["restricted_reason"]) == (
        True,
        True,
        {"type": "anonymous"},
    )
    assert (user["primary_email"], user["has_password"], user["otp_auth_enabled"]) == (None, False, False)
    stored = h.user(tokens["user_id"])
    assert (stored.signed_up_at_millis, stored.last_active_at_millis) == (h.now_ms, h.now_ms)


def test_an_anonymous_sign_up_takes_any_access_type_and_an_empty_body() -> None:
    h = Harness()
    for headers in (client_headers(), server_headers(), admin_headers()):
        sign_up_anonymously(h, headers)
    reply = h.request("POST", "/api/v1/auth/anonymous/sign-up", client_headers(), json={})
    assert reply.status == 200
    reply = h.request("POST", "/api/v1/auth/anonymous/sign-up", client_headers(), json={"email": "a@example.com"})
    assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR")
    assert len(h.store.tenant(PROJECT_ID).users) == 4
    reply = h.request("POST", "/api/v1/auth/anonymous/sign-up")
    assert (reply.status, reply.known_error) == (400, "ACCESS_TYPE_REQUIRED")


def test_an_anonymous_sign_up_works_with_sign_up_disabled() -> None:
    h = Harness()
    configure(h, sign_up_enabled=False)
    assert me(h, sign_up_anonymously(h))["is_anonymous"] is True


def test_every_anonymous_sign_up_makes_a_new_user_whatever_token_it_carries() -> None:
    h = Harness()
    first = sign_up_anonymously(h)
    second = sign_up_anonymously(h, as_anonymous(first))
    assert second["user_id"] != first["user_id"]
    assert me(h, first)["is_anonymous"] is True


def test_an_anonymous_user_gets_a_personal_team_when_the_project_gives_one() -> None:
    h = Harness()
    configure(h, create_team_on_sign_up=True)
    user = me(h, sign_up_anonymously(h))
    assert user["selected_team"]["display_name"] == "Personal Team"
    assert user["selected_team_id"] == user["selected_team"]["id"]


def test_an_anonymous_session_lives_a_year_and_refreshes() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    (session,) = h.store.tenant(PROJECT_ID).sessions.values()
    assert session.expires_at_millis - session.created_at_millis == YEAR_MS
    h.advance(YEAR_MS - 60_000)
    refreshed = h.request(
        "POST",
        "/api/v1/auth/sessions/current/refresh",
        client_headers(**{"x-service-refresh-token": tokens["refresh_token"]}),
    )
    assert refreshed.status == 200
    assert me(h, {"access_token": refreshed.json["access_token"]})["id"] == tokens["user_id"]


def test_an_anonymous_token_needs_the_allow_anonymous_header() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    reply = h.request("GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": tokens["access_token"]}))
    assert (reply.status, reply.known_error) == (401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED")
    restricted_only = client_headers(
        **{"x-service-access-token": tokens["access_token"], "x-service-allow-restricted-user": "true"}
    )
    reply = h.request("GET", "/api/v1/users/me", restricted_only)
    assert (reply.status, reply.known_error) == (401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED")
    # Also on a sign-up it would upgrade: refused, and nothing is made.
    reply = password_sign_up(h, client_headers(**{"x-service-access-token": tokens["access_token"]}))
    assert (reply.status, reply.known_error) == (401, "ANONYMOUS_AUTHENTICATION_NOT_ALLOWED")
    assert len(h.store.tenant(PROJECT_ID).users) == 1


def test_an_anonymous_user_may_update_itself_like_any_client_user() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    reply = h.request("PATCH", "/api/v1/users/me", as_anonymous(tokens), json={"display_name": "Ada"})
    assert (reply.status, reply.json["display_name"]) == (200, "Ada")


def test_anonymous_users_are_listed_only_with_include_anonymous() -> None:
    h = Harness()
    anonymous_id = sign_up_anonymously(h)["user_id"]

    def listed(query: str) -> list[str]:
        reply = h.request("GET", "/api/v1/users", server_headers(), query=query)
        assert reply.status == 200, reply.body
        return [item["id"] for item in reply.json["items"]]

    assert listed("") == []
    assert listed("include_restricted=true") == []
    assert listed("include_anonymous=true") == [anonymous_id]


# --- the token and its key -------------------------------------------------------------------------------------


def test_an_anonymous_token_is_signed_with_a_key_listed_only_with_include_anonymous() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    plain = h.request("GET", JWKS).json
    with_restricted = h.request("GET", JWKS, query="include_restricted=true").json
    with_anonymous = h.request("GET", JWKS, query="include_anonymous=true").json
    assert [len(keys["keys"]) for keys in (plain, with_restricted, with_anonymous)] == [1, 2, 3]
    assert with_anonymous["keys"][:2] == with_restricted["keys"]
    assert with_restricted["keys"][0] == plain["keys"][0]
    assert len({key["kid"] for key in with_anonymous["keys"]}) == 3
    for keys in (plain, with_restricted):
        with pytest.raises(InvalidKeyIdError):
            decode(tokens["access_token"], keys)
    claims = decode(tokens["access_token"], with_anonymous)
    assert claims["aud"] == f"{PROJECT_ID}:anon"
    assert claims["iss"].endswith(f"/api/v1/projects-anonymous-users/{PROJECT_ID}")
    assert (claims["sub"], claims["is_anonymous"], claims["restricted_reason"]) == (
        tokens["user_id"],
        True,
        {"type": "anonymous"},
    )


def test_a_restricted_users_token_is_signed_with_a_key_listed_only_with_include_restricted() -> None:
    # A user held back by an admin (or by an unverified e-mail where verification is required) is no signed-up
    # user in good standing: a backend verifying against the plain JWKS refuses their token, as the original's.
    h = Harness()
    user_id = h.request("POST", "/api/v1/users", server_headers(), json={"restricted_by_admin": True}).json["id"]
    session = h.request("POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": user_id})
    assert session.status == 200, session.body
    token = session.json["access_token"]
    with pytest.raises(InvalidKeyIdError):
        decode(token, h.request("GET", JWKS).json)
    for query in ("include_restricted=true", "include_anonymous=true"):
        claims = decode(token, h.request("GET", JWKS, query=query).json)
        assert (claims["sub"], claims["aud"], claims["is_restricted"]) == (user_id, f"{PROJECT_ID}:restricted", True)
        assert claims["iss"].endswith(f"/api/v1/projects-restricted-users/{PROJECT_ID}")
    allow = {"x-service-allow-restricted-user": "true"}
    reply = h.request("GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": token}, **allow))
    assert (reply.status, reply.json["id"]) == (200, user_id)
    # Lifting the restriction makes the next token a signed-up user's, signed with the project's own key.
    lifted = h.request("PATCH", f"/api/v1/users/{user_id}", server_headers(), json={"restricted_by_admin": False})
    assert lifted.status == 200, lifted.body
    again = h.request("POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": user_id}).json
    assert decode(again["access_token"], h.request("GET", JWKS).json)["aud"] == PROJECT_ID


def test_a_token_whose_audience_and_key_disagree_is_unparsable() -> None:
    # An anonymous user's claims signed with the project's own key (or the other way round) never verify: the
    # audience names the key.
    h = Harness()
    tokens = sign_up_anonymously(h)
    project = h.project()
    claims = decode(tokens["access_token"], h.request("GET", JWKS, query="include_anonymous=true").json)
    forged = access_token_key(project.signing_key, PROJECT_ID).sign(claims)
    reply = h.request("GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": forged}, **ALLOW))
    assert (reply.status, reply.known_error) == (401, "UNPARSABLE_ACCESS_TOKEN")
    plain_claims = {**claims, "aud": PROJECT_ID, "is_anonymous": False}
    forged = access_token_key(project.signing_key, f"{PROJECT_ID}:anon").sign(plain_claims)
    reply = h.request("GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": forged}, **ALLOW))
    assert (reply.status, reply.known_error) == (401, "UNPARSABLE_ACCESS_TOKEN")


# --- upgrading by password sign-up -----------------------------------------------------------------------------


def test_a_password_sign_up_upgrades_the_anonymous_caller_in_place() -> None:
    h = Harness()
    configure(h, create_team_on_sign_up=True)
    tokens = sign_up_anonymously(h)
    h.request(
        "PATCH", "/api/v1/users/me", as_anonymous(tokens), json={"display_name": "Ada", "client_metadata": {"a": 1}}
    )
    h.advance(60_000)

    reply = password_sign_up(h, as_anonymous(tokens))

    assert reply.status == 200, reply.body
    assert reply.json["user_id"] == tokens["user_id"]
    assert len(h.store.tenant(PROJECT_ID).users) == 1
    upgraded = h.request(
        "GET", "/api/v1/users/me", client_headers(**{"x-service-access-token": reply.json["access_token"]})
    )
    assert upgraded.status == 200, upgraded.body  # no longer anonymous: no opt-in header needed
    user = upgraded.json
    assert (user["is_anonymous"], user["primary_email"], user["primary_email_verified"], user["has_password"]) == (
        False,
        "ada@example.com",
        False,
        True,
    )
    assert (user["display_name"], user["client_metadata"]) == ("Ada", {"a": 1})
    assert user["signed_up_at_millis"] == h.now_ms
    assert user["selected_team"]["display_name"] == "Ada's Team"
    # The old anonymous token works until it expires, and shows the upgraded user.
    assert me(h, tokens)["is_anonymous"] is False
    # The new password signs in.
    signed_in = h.request(
        "POST",
        "/api/v1/auth/password/sign-in",
        client_headers(),
        json={"email": "ada@example.com", "password": "correct horse"},
    )
    assert (signed_in.status, signed_in.json["user_id"]) == (200, tokens["user_id"])


def test_an_upgraded_users_personal_team_is_named_after_the_address_without_a_display_name() -> None:
    h = Harness()
    configure(h, create_team_on_sign_up=True)
    tokens = sign_up_anonymously(h)
    assert password_sign_up(h, as_anonymous(tokens)).status == 200
    assert me(h, tokens)["selected_team"]["display_name"] == "ada@example.com's Team"


def test_an_upgrade_to_a_taken_address_is_409_and_leaves_the_anonymous_user_alone() -> None:
    h = Harness()
    h.request(
        "POST",
        "/api/v1/users",
        server_headers(),
        json={"primary_email": "ada@example.com", "primary_email_auth_enabled": True},
    )
    tokens = sign_up_anonymously(h)
    reply = password_sign_up(h, as_anonymous(tokens))
    assert (reply.status, reply.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")
    assert me(h, tokens)["is_anonymous"] is True
    assert len(h.store.tenant(PROJECT_ID).users) == 2


def test_an_upgrade_with_sign_up_disabled_is_refused_and_writes_nothing() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    configure(h, sign_up_enabled=False)
    reply = password_sign_up(h, as_anonymous(tokens))
    assert (reply.status, reply.known_error) == (400, "SIGN_UP_NOT_ENABLED")
    assert me(h, tokens)["is_anonymous"] is True


def test_a_short_password_refuses_the_upgrade_and_writes_nothing() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    reply = h.request(
        "POST", "/api/v1/auth/password/sign-up", as_anonymous(tokens), json={"email": "a@example.com", "password": "x"}
    )
    assert (reply.status, reply.known_error) == (400, "PASSWORD_TOO_SHORT")
    assert me(h, tokens)["is_anonymous"] is True


def test_a_non_anonymous_token_on_a_sign_up_is_ignored() -> None:
    h = Harness()
    bob = h.request("POST", "/api/v1/users", server_headers(), json={"display_name": "Bob"}).json
    bobs = h.request("POST", "/api/v1/auth/sessions", server_headers(), json={"user_id": bob["id"]}).json
    reply = password_sign_up(h, client_headers(**{"x-service-access-token": bobs["access_token"]}))
    assert reply.status == 200, reply.body
    assert reply.json["user_id"] != bob["id"]
    assert h.user(bob["id"]).primary_email is None


def test_a_second_sign_up_with_an_upgraded_users_old_token_makes_a_new_user() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    assert password_sign_up(h, as_anonymous(tokens)).status == 200
    again = password_sign_up(h, as_anonymous(tokens), email="other@example.com")
    assert again.status == 200, again.body
    assert again.json["user_id"] != tokens["user_id"]
    assert h.user(tokens["user_id"]).primary_email == "ada@example.com"


# --- upgrading by code sign-in ---------------------------------------------------------------------------------


def test_a_code_sign_in_of_an_unknown_address_upgrades_the_anonymous_caller() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    code = code_for(h)

    reply = h.request("POST", "/api/v1/auth/otp/sign-in", as_anonymous(tokens), json={"code": code})

    assert reply.status == 200, reply.body
    assert (reply.json["user_id"], reply.json["is_new_user"]) == (tokens["user_id"], True)
    user = me(h, tokens)
    assert (user["is_anonymous"], user["primary_email"], user["primary_email_verified"], user["otp_auth_enabled"]) == (
        False,
        "ada@example.com",
        True,
        True,
    )
    assert len(h.store.tenant(PROJECT_ID).users) == 1


def test_a_code_sign_in_to_an_existing_account_leaves_the_anonymous_user_alone() -> None:
    h = Harness()
    ada = h.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), json={"code": code_for(h)}).json
    tokens = sign_up_anonymously(h)

    reply = h.request("POST", "/api/v1/auth/otp/sign-in", as_anonymous(tokens), json={"code": code_for(h)})

    assert reply.status == 200, reply.body
    assert (reply.json["user_id"], reply.json["is_new_user"]) == (ada["user_id"], False)
    assert me(h, tokens)["is_anonymous"] is True


def test_a_password_sign_in_while_anonymous_returns_that_account() -> None:
    h = Harness()
    ada = password_sign_up(h, client_headers()).json
    tokens = sign_up_anonymously(h)
    reply = h.request(
        "POST",
        "/api/v1/auth/password/sign-in",
        as_anonymous(tokens),
        json={"email": "ada@example.com", "password": "correct horse"},
    )
    assert (reply.status, reply.json["user_id"]) == (200, ada["user_id"])
    assert me(h, tokens)["is_anonymous"] is True


def test_a_code_sign_in_with_sign_up_disabled_does_not_upgrade() -> None:
    h = Harness()
    tokens = sign_up_anonymously(h)
    code = code_for(h)
    configure(h, sign_up_enabled=False)
    reply = h.request("POST", "/api/v1/auth/otp/sign-in", as_anonymous(tokens), json={"code": code})
    assert (reply.status, reply.known_error) == (400, "SIGN_UP_NOT_ENABLED")
    assert me(h, tokens)["is_anonymous"] is True


# --- rate limit ------------------------------------------------------------------------------------------------


def test_anonymous_sign_ups_are_limited_per_client_address() -> None:
    h = Harness()

    def sign_up_from(address: str) -> Reply:
        return h.request("POST", "/api/v1/auth/anonymous/sign-up", client_headers(), client=address)

    assert [sign_up_from("203.0.113.7").status for _ in range(10)] == [200] * 10
    refused = sign_up_from("203.0.113.7")
    assert (refused.status, refused.known_error) == (429, "RATE_LIMITED")
    assert refused.json["details"]["rule"] == "anonymous_sign_up_ip"
    assert sign_up_from("203.0.113.8").status == 200  # another address has its own budget
    assert len(h.store.tenant(PROJECT_ID).users) == 11
    h.advance(60_000)
    assert sign_up_from("203.0.113.7").status == 200


def test_an_anonymous_user_gets_the_default_project_permissions() -> None:
    # reference part 2 §4: the anonymous sign-up creates the user as the server's create does, default project
    # permissions included.
    h = Harness()
    defined = h.request("POST", "/api/v1/project-permission-definitions", admin_headers(), json={"id": "reader"})
    assert defined.status == 201, defined.body
    configure(h, user_default_permissions=["reader"])
    tokens = sign_up_anonymously(h)
    listed = h.request("GET", "/api/v1/project-permissions", server_headers(), query=f"user_id={tokens['user_id']}")
    assert listed.status == 200, listed.body
    assert listed.json["items"] == [{"id": "reader", "user_id": tokens["user_id"]}]
