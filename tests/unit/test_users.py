"""Users: every row of the spec's update table and every transition of its States table, for client and server,
with each rejection's status and code and a check that nothing changed; reading, creating, listing, deleting."""

from __future__ import annotations

import base64
import dataclasses
import threading
from typing import Any

import pytest
from passlib.hash import argon2

from identity_proto.render import SERVER_ONLY_USER_FIELDS
from tests.support import PROJECT_ID, Harness, Reply, admin_headers, client_headers, server_headers
from tests.unit.test_sign_in import code_for, sign_in

REQUIRED_IN_EVERY_RESPONSE = {
    "id",
    "primary_email_verified",
    "primary_email_auth_enabled",
    "signed_up_at_millis",
    "last_active_at_millis",
    "is_anonymous",
    "is_restricted",
    "restricted_by_admin",
    "risk_scores",
}
PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Signed:
    """A harness with one signed-in user."""

    def __init__(self, email: str = "ada@example.com") -> None:
        self.h = Harness()
        reply = sign_in(self.h, code_for(self.h, email))
        assert reply.status == 200
        self.user_id: str = reply.json["user_id"]
        self.tokens: dict[str, Any] = reply.json

    def me(self, **extra: str) -> dict[str, str]:
        return client_headers(**{"x-service-access-token": self.tokens["access_token"], **extra})

    def patch_me(self, body: Any) -> Reply:
        return self.h.request("PATCH", "/api/v1/users/me", self.me(), json=body)

    def patch(self, body: Any, headers: dict[str, str] | None = None) -> Reply:
        return self.h.request("PATCH", f"/api/v1/users/{self.user_id}", headers or server_headers(), json=body)

    def stored(self) -> Any:
        return self.h.user(self.user_id)


def _rejected(s: Signed, reply: Reply, status: int, code: str, before: Any) -> None:
    assert (reply.status, reply.known_error) == (status, code), reply.body
    assert s.stored() == before, "a rejected update changed the user"


# --- field by field -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("access", ["client", "server"])
@pytest.mark.parametrize(
    ("field", "value", "stored"),
    [
        ("display_name", "Ada L.", "Ada L."),
        ("display_name", "", None),
        ("display_name", None, None),
        ("client_metadata", {"theme": "dark", "n": [1, 2]}, {"theme": "dark", "n": [1, 2]}),
        ("client_metadata", "just a string", "just a string"),
        ("client_metadata", None, None),
        ("profile_image_url", PNG, PNG),
        ("profile_image_url", None, None),
        (
            "totp_secret_base64",
            base64.b64encode(b"12345678901234567890").decode(),
            base64.b64encode(b"12345678901234567890").decode(),
        ),
        ("totp_secret_base64", None, None),
        ("otp_auth_enabled", False, False),
    ],
)
def test_fields_both_client_and_server_may_write(access: str, field: str, value: Any, stored: Any) -> None:
    s = Signed()
    reply = s.patch_me({field: value}) if access == "client" else s.patch({field: value})
    assert reply.status == 200, reply.body
    assert getattr(s.stored(), field) == stored
    rendered_field = "requires_totp_mfa" if field == "totp_secret_base64" else field
    expected = (stored is not None) if field == "totp_secret_base64" else stored
    assert reply.json[rendered_field] == expected


@pytest.mark.parametrize(
    ("field", "value", "stored_as", "stored"),
    [
        ("client_read_only_metadata", {"plan": "pro"}, "client_read_only_metadata", {"plan": "pro"}),
        ("server_metadata", {"stripe": "cus_1"}, "server_metadata", {"stripe": "cus_1"}),
        ("server_metadata", [1, "x"], "server_metadata", [1, "x"]),
        ("country_code", " gb ", "country_code", "GB"),
        ("country_code", None, "country_code", None),
        ("risk_scores", {"sign_up": {"bot": 10, "free_trial_abuse": 100}}, "risk_scores", None),
        ("primary_email_verified", False, "primary_email_verified", False),
        ("primary_email_auth_enabled", False, "primary_email_auth_enabled", False),
        ("profile_image_url", "https://cdn.example.com/a.png", "profile_image_url", "https://cdn.example.com/a.png"),
    ],
)
def test_fields_only_the_server_may_write(field: str, value: Any, stored_as: str, stored: Any) -> None:
    s = Signed()
    before = s.stored()
    if field != "profile_image_url":
        refused = s.patch_me({field: value})
        _rejected(s, refused, 400, "SCHEMA_ERROR", before)
        assert f"body contains unknown properties: {field}" in refused.json["details"]["message"]
    reply = s.patch({field: value})
    assert reply.status == 200, reply.body
    if field == "risk_scores":
        assert reply.json["risk_scores"] == value
        assert (s.stored().risk_scores.bot, s.stored().risk_scores.free_trial_abuse) == (10, 100)
    else:
        assert getattr(s.stored(), stored_as) == stored


def test_metadata_is_replaced_never_merged() -> None:
    s = Signed()
    s.patch({"server_metadata": {"a": 1, "b": 2}})
    s.patch({"server_metadata": {"c": 3}})
    assert s.stored().server_metadata == {"c": 3}


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ({"display_name": "x" * 257}, "body.display_name must be at most 256 characters"),
        ({"profile_image_url": ""}, "body.profile_image_url is not a valid URL"),
        (
            {"profile_image_url": "data:image/png;base64," + "A" * 102400},
            "body.profile_image_url must be smaller than 100KB",
        ),
        ({"totp_secret_base64": "not base64!"}, "body.totp_secret_base64 is not valid base64"),
        ({"primary_email": ""}, "body.primary_email must not be empty"),
        ({"primary_email": "not-a-valid-email"}, "body.primary_email must be a valid email"),
        ({"selected_team_id": "nope"}, "body.selected_team_id must be a valid UUID"),
        ({"otp_auth_enabled": None}, "body.otp_auth_enabled cannot be null"),
    ],
)
def test_client_field_rules(body: dict[str, Any], line: str) -> None:
    s = Signed()
    before = s.stored()
    reply = s.patch_me(body)
    _rejected(s, reply, 400, "SCHEMA_ERROR", before)
    assert f"  - {line}" in reply.json["details"]["message"].splitlines()


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ({"password": "x" * 71}, "body.password must be at most 70 characters"),
        ({"is_anonymous": True}, "body.is_anonymous must be one of the following values: false"),
        ({"country_code": "GBR"}, "body.country_code must be a 2-letter country code"),
        (
            {"risk_scores": {"sign_up": {"bot": 101, "free_trial_abuse": 0}}},
            "body.risk_scores.sign_up.bot must be less than or equal to 100",
        ),
        (
            {"risk_scores": {"sign_up": {"bot": 50.5, "free_trial_abuse": 0}}},
            "body.risk_scores.sign_up.bot must be an integer",
        ),
        ({"risk_scores": {"sign_up": {"bot": 1}}}, "body.risk_scores.sign_up.free_trial_abuse must be defined"),
        (
            {"restricted_by_admin_reason": "spam"},
            "restricted_by_admin_reason must be null when restricted_by_admin is not true",
        ),
        (
            {"restricted_by_admin_private_details": "rule 7"},
            "restricted_by_admin_private_details must be null when restricted_by_admin is not true",
        ),
        ({"password_hash": ""}, "body.password_hash must be at least 1 characters"),
    ],
)
def test_server_field_rules(body: dict[str, Any], line: str) -> None:
    s = Signed()
    before = s.stored()
    reply = s.patch(body)
    _rejected(s, reply, 400, "SCHEMA_ERROR", before)
    assert f"  - {line}" in reply.json["details"]["message"].splitlines()


def test_a_client_may_only_send_base64_images_of_common_types() -> None:
    s = Signed()
    before = s.stored()
    _rejected(
        s, s.patch_me({"profile_image_url": "https://cdn.example.com/a.png"}), 400, "INVALID_PROFILE_IMAGE_URL", before
    )
    _rejected(
        s, s.patch({"profile_image_url": "ftp://cdn.example.com/a.png"}), 400, "INVALID_PROFILE_IMAGE_URL", before
    )


# --- e-mail ---------------------------------------------------------------------------------------------------


def _stored_channels(s: Signed) -> list[tuple[str, bool, bool]]:
    """The user's non-primary channels: (value, is_verified, used_for_auth)."""
    stored = s.h.store.tenant(PROJECT_ID).channels.get(s.user_id, {}).values()
    return [(c.value, c.is_verified, c.used_for_auth) for c in stored]


def test_changing_the_email_normalises_it_unverifies_it_and_keeps_the_auth_flag() -> None:
    # With server access, as in the original; a client's change is not for sign-in (test_client_email_change_...).
    # The old primary stays a channel of the user, with its flags, as in the original: it still signs them in.
    s = Signed()
    reply = s.patch({"primary_email": "  New@Example.COM "})
    assert reply.status == 200
    user = s.stored()
    assert (user.primary_email, user.primary_email_verified, user.primary_email_auth_enabled) == (
        "new@example.com",
        False,
        True,
    )
    assert s.h.store.tenant(PROJECT_ID).email_index == {"ada@example.com": s.user_id, "new@example.com": s.user_id}
    assert _stored_channels(s) == [("ada@example.com", True, True)]


def test_setting_the_same_address_keeps_it_verified() -> None:
    s = Signed()
    assert s.patch_me({"primary_email": "ADA@example.com"}).status == 200
    assert s.stored().primary_email_verified is True


def test_a_null_email_clears_verification_and_auth() -> None:
    s = Signed()
    assert s.patch({"primary_email": None}).status == 200
    user = s.stored()
    assert (user.primary_email, user.primary_email_verified, user.primary_email_auth_enabled) == (None, False, False)
    # the address stays a (non-primary) channel of the user, as in the original
    assert s.h.store.tenant(PROJECT_ID).email_index == {"ada@example.com": s.user_id}
    assert _stored_channels(s) == [("ada@example.com", True, True)]


def test_the_flags_need_an_address() -> None:
    s = Signed()
    s.patch({"primary_email": None})
    before = s.stored()
    for field in ("primary_email_verified", "primary_email_auth_enabled"):
        reply = s.patch({field: True})
        _rejected(s, reply, 400, "PRIMARY_EMAIL_REQUIRED", before)
        assert reply.json["error"] == f"{field} cannot be true without primary_email"


def test_auth_emails_are_unique_in_a_project() -> None:
    s = Signed()
    other = sign_in(s.h, code_for(s.h, "bob@example.com")).json["user_id"]
    before = s.stored()
    reply = s.patch({"primary_email": "BOB@example.com"})  # a server's change keeps the auth flag, so it clashes
    _rejected(s, reply, 409, "USER_EMAIL_ALREADY_EXISTS", before)
    assert reply.json["details"] == {"email": "bob@example.com", "would_work_if_email_was_verified": False}
    # an address that does not sign anyone in is free to share
    assert (
        s.h.request(
            "PATCH", f"/api/v1/users/{other}", server_headers(), json={"primary_email_auth_enabled": False}
        ).status
        == 200
    )
    assert s.patch({"primary_email": "bob@example.com"}).status == 200


def test_turning_auth_on_for_a_taken_address_is_refused() -> None:
    s = Signed()
    other = sign_in(s.h, code_for(s.h, "bob@example.com")).json["user_id"]
    s.h.request("PATCH", f"/api/v1/users/{other}", server_headers(), json={"primary_email_auth_enabled": False})
    s.patch({"primary_email": "bob@example.com", "primary_email_auth_enabled": False})
    s.h.request("PATCH", f"/api/v1/users/{other}", server_headers(), json={"primary_email_auth_enabled": True})
    before = s.stored()
    _rejected(s, s.patch({"primary_email_auth_enabled": True}), 409, "USER_EMAIL_ALREADY_EXISTS", before)


def test_two_users_racing_for_one_address_exactly_one_wins() -> None:
    h = Harness()
    ids = [sign_in(h, code_for(h, f"u{i}@example.com")).json["user_id"] for i in range(2)]
    statuses: list[int] = []
    barrier = threading.Barrier(2)

    def claim(user_id: str) -> None:
        barrier.wait()
        reply = h.request(
            "PATCH", f"/api/v1/users/{user_id}", server_headers(), json={"primary_email": "prize@example.com"}
        )
        statuses.append(reply.status)

    threads = [threading.Thread(target=claim, args=(user_id,)) for user_id in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200, 409]
    owners = [uid for uid in ids if h.user(uid).primary_email == "prize@example.com"]
    assert len(owners) == 1
    assert h.store.tenant(PROJECT_ID).email_index["prize@example.com"] == owners[0]


# --- the States table -----------------------------------------------------------------------------------------


def test_password_replaces_the_hash_and_revokes_every_session() -> None:
    s = Signed()
    second = sign_in(s.h, code_for(s.h)).json
    reply = s.patch({"password": "new password"})
    assert reply.status == 200
    assert reply.json["has_password"] is True
    assert s.stored().password_hash.startswith("$2b$")
    assert s.h.store.tenant(PROJECT_ID).user_sessions.get(s.user_id, set()) == set()
    for refresh_token in (s.tokens["refresh_token"], second["refresh_token"]):
        refreshed = s.h.request(
            "POST",
            "/api/v1/auth/sessions/current/refresh",
            client_headers(**{"x-service-refresh-token": refresh_token}),
        )
        assert refreshed.known_error == "REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED"
    signed = s.h.request(
        "POST",
        "/api/v1/auth/password/sign-in",
        client_headers(),
        json={"email": "ada@example.com", "password": "new password"},
    )
    assert signed.status == 200


def test_password_hash_in_modular_crypt_format_replaces_the_hash_and_revokes_sessions() -> None:
    from passlib.hash import bcrypt

    s = Signed()
    imported = bcrypt.using(rounds=4).hash("imported pw")
    assert s.patch({"password_hash": imported}).status == 200
    assert s.stored().password_hash == imported
    assert s.h.store.tenant(PROJECT_ID).user_sessions.get(s.user_id, set()) == set()
    signed = s.h.request(
        "POST",
        "/api/v1/auth/password/sign-in",
        client_headers(),
        json={"email": "ada@example.com", "password": "imported pw"},
    )
    assert signed.status == 200


def test_argon2_hashes_are_accepted_on_import() -> None:
    from passlib.hash import argon2

    s = Signed()
    assert s.patch({"password_hash": argon2.hash("argon pw")}).status == 200
    signed = s.h.request(
        "POST",
        "/api/v1/auth/password/sign-in",
        client_headers(),
        json={"email": "ada@example.com", "password": "argon pw"},
    )
    assert signed.status == 200


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"password": "a", "password_hash": "$2b$04$" + "a" * 53}, "CANNOT_SET_BOTH_PASSWORD_AND_HASH"),
        ({"password_hash": "$2a$17$" + "a" * 53}, "INVALID_PASSWORD_HASH"),
        ({"password_hash": "plaintext"}, "INVALID_PASSWORD_HASH"),
        ({"password": "é" * 40}, "PASSWORD_TOO_LONG"),
    ],
)
def test_password_rejections_change_nothing_and_keep_sessions(body: dict[str, Any], code: str) -> None:
    s = Signed()
    before = s.stored()
    _rejected(s, s.patch(body), 400, code, before)
    assert s.h.store.tenant(PROJECT_ID).user_sessions[s.user_id]


#: An argon2id hash of "argon pw" whose cost parameters the tests below replace (the hash itself need not match:
#: an over-cost one must be refused before anything verifies it).
_ARGON2_OF_ARGON_PW = argon2.using(memory_cost=64, time_cost=1, parallelism=1).hash("argon pw")


def _argon2_costing(m: int, t: int, p: int) -> str:
    return _ARGON2_OF_ARGON_PW.replace("m=64,t=1,p=1", f"m={m},t={t},p={p}")


@pytest.mark.parametrize(
    ("cost", "limit"),
    [
        ((1024 * 1024, 3, 4), "memory (m, KiB) must be at most 65536, not 1048576"),
        ((65537, 1, 1), "memory (m, KiB) must be at most 65536, not 65537"),
        ((19456, 11, 1), "time (t) must be at most 10, not 11"),
        ((19456, 2, 5), "parallelism (p) must be at most 4, not 5"),
    ],
)
def test_imported_argon2_hash_cost_is_capped(cost: tuple[int, int, int], limit: str) -> None:
    s = Signed()
    before = s.stored()
    too_costly = _argon2_costing(*cost)
    for reply in (
        s.patch({"password_hash": too_costly}),
        s.h.request("POST", "/api/v1/users", server_headers(), json={"password_hash": too_costly}),
    ):
        assert (reply.status, reply.known_error) == (400, "SCHEMA_ERROR"), reply.body
        assert f"body.password_hash is an argon2 hash above the cost limit: {limit}" in reply.json["details"]["message"]
    assert s.stored() == before
    assert len(s.h.store.tenant(PROJECT_ID).users) == 1


@pytest.mark.parametrize(
    "cost",
    [
        # OWASP's argon2id settings (Password Storage Cheat Sheet), and argon2-cffi's default = RFC 9106's second
        (47104, 1, 1),
        (19456, 2, 1),
        (12288, 3, 1),
        (9216, 4, 1),
        (7168, 5, 1),
        (65536, 3, 4),
    ],
)
def test_recommended_argon2_costs_are_imported_and_sign_in(cost: tuple[int, int, int]) -> None:
    m, t, p = cost
    s = Signed()
    imported = argon2.using(memory_cost=m, time_cost=t, parallelism=p).hash("argon pw")
    assert s.patch({"password_hash": imported}).status == 200
    signed = s.h.request(
        "POST",
        "/api/v1/auth/password/sign-in",
        client_headers(),
        json={"email": "ada@example.com", "password": "argon pw"},
    )
    assert (signed.status, signed.json["user_id"]) == (200, s.user_id)


@pytest.mark.parametrize(
    "password_hash",
    [
        "$scrypt$ln=30,r=8,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",  # 2**30 rounds of scrypt: never accepted
        "$pbkdf2-sha256$4000000000$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
        "$2b$17$" + "a" * 53,
    ],
)
def test_other_hash_schemes_and_costlier_bcrypt_are_not_imported(password_hash: str) -> None:
    s = Signed()
    before = s.stored()
    _rejected(s, s.patch({"password_hash": password_hash}), 400, "INVALID_PASSWORD_HASH", before)


def test_password_checks_run_before_the_user_lookup() -> None:
    reply = Harness().request(
        "PATCH", "/api/v1/users/11111111-1111-4111-8111-111111111111", server_headers(), json={"password_hash": "x"}
    )
    assert reply.known_error == "INVALID_PASSWORD_HASH"


def test_a_null_password_removes_password_sign_in() -> None:
    s = Signed()
    s.patch({"password": "first password"})
    assert s.patch({"password": None}).json["has_password"] is False
    assert s.stored().password_hash is None


def test_totp_secret_turns_two_factor_on_and_null_turns_it_off() -> None:
    s = Signed()
    secret = base64.b64encode(b"0123456789abcdefghij").decode()
    assert s.patch_me({"totp_secret_base64": secret}).json["requires_totp_mfa"] is True
    assert sign_in(s.h, code_for(s.h)).known_error == "MULTI_FACTOR_AUTHENTICATION_REQUIRED"
    assert s.patch_me({"totp_secret_base64": None}).json["requires_totp_mfa"] is False
    assert sign_in(s.h, code_for(s.h)).status == 200


def test_restricting_and_unrestricting_by_an_administrator() -> None:
    s = Signed()
    reply = s.patch(
        {
            "restricted_by_admin": True,
            "restricted_by_admin_reason": "Spam",
            "restricted_by_admin_private_details": "rule 7",
        }
    )
    assert reply.status == 200
    assert (reply.json["is_restricted"], reply.json["restricted_reason"]) == (
        True,
        {"type": "restricted_by_administrator"},
    )
    assert (reply.json["restricted_by_admin_reason"], reply.json["restricted_by_admin_private_details"]) == (
        "Spam",
        "rule 7",
    )
    # updating the reason needs restricted_by_admin: true again
    before = s.stored()
    _rejected(s, s.patch({"restricted_by_admin_reason": "Fraud"}), 400, "SCHEMA_ERROR", before)
    assert (
        s.patch({"restricted_by_admin": True, "restricted_by_admin_reason": "Fraud"}).json["restricted_by_admin_reason"]
        == "Fraud"
    )
    assert s.stored().restricted_by_admin_private_details == "rule 7"
    cleared = s.patch({"restricted_by_admin": False})
    assert (cleared.json["restricted_by_admin"], cleared.json["is_restricted"]) == (False, False)
    assert (s.stored().restricted_by_admin_reason, s.stored().restricted_by_admin_private_details) == (None, None)


def test_a_plain_field_patch_keeps_the_restriction_and_its_reasons() -> None:
    s = Signed()
    s.patch(
        {"restricted_by_admin": True, "restricted_by_admin_reason": "Spam", "restricted_by_admin_private_details": "r7"}
    )
    assert s.patch({"display_name": "Still restricted"}).status == 200
    stored = s.stored()
    assert (stored.restricted_by_admin, stored.restricted_by_admin_reason) == (True, "Spam")
    assert stored.restricted_by_admin_private_details == "r7"


def test_is_anonymous_may_only_become_false_and_resets_the_sign_up_time() -> None:
    s = Signed()
    s.h.store.tenant(PROJECT_ID).users[s.user_id] = dataclasses.replace(
        s.stored(), is_anonymous=True, signed_up_at_millis=5
    )
    s.h.store.tenant(PROJECT_ID).user_order[:] = sorted(
        (u.signed_up_at_millis, u.id) for u in s.h.store.tenant(PROJECT_ID).users.values()
    )
    s.h.advance(1000)
    reply = s.patch({"is_anonymous": False})
    assert (reply.json["is_anonymous"], reply.json["signed_up_at_millis"]) == (False, s.h.now_ms)


def test_selected_team_must_be_one_of_the_users_teams() -> None:
    s = Signed()
    before = s.stored()
    team_id = "33333333-3333-4333-8333-333333333333"
    reply = s.patch_me({"selected_team_id": team_id})
    _rejected(s, reply, 404, "TEAM_MEMBERSHIP_NOT_FOUND", before)
    assert reply.json["details"] == {"team_id": team_id, "user_id": s.user_id}
    team = s.h.request(
        "POST", "/api/v1/teams", server_headers(), json={"display_name": "Crew", "creator_user_id": s.user_id}
    ).json
    selected = s.patch_me({"selected_team_id": team["id"]})
    assert selected.json["selected_team_id"] == team["id"]
    assert selected.json["selected_team"]["display_name"] == "Crew"
    assert "server_metadata" not in selected.json["selected_team"]
    assert s.patch_me({"selected_team_id": None}).json["selected_team"] is None


def test_otp_and_passkey_methods() -> None:
    s = Signed()
    s.h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"magic_link_enabled": False}})
    before = s.stored()
    _rejected(s, s.patch_me({"otp_auth_enabled": True}), 400, "OTP_AUTH_NOT_ENABLED", before)
    _rejected(s, s.patch_me({"passkey_auth_enabled": True}), 400, "PASSKEY_AUTH_CANNOT_BE_ENABLED", before)
    assert s.patch_me({"passkey_auth_enabled": False}).status == 200


def test_an_empty_patch_changes_nothing_and_answers_the_user() -> None:
    s = Signed()
    before = s.stored()
    reply = s.patch_me({})
    assert (reply.status, reply.json["id"]) == (200, s.user_id)
    assert s.stored() == before


# --- who may write what ---------------------------------------------------------------------------------------


def test_a_client_naming_any_user_id_is_refused_even_its_own() -> None:
    s = Signed()
    for path in (f"/api/v1/users/{s.user_id}", "/api/v1/users/not-a-uuid"):
        reply = s.h.request("PATCH", path, s.me(), json={"display_name": "x"})
        assert (reply.status, reply.known_error) == (401, "INSUFFICIENT_ACCESS_TYPE")
        assert reply.json["details"] == {"actual_access_type": "client", "allowed_access_types": ["server", "admin"]}


def test_me_without_a_user_and_unknown_ids() -> None:
    h = Harness()
    assert (
        h.request("PATCH", "/api/v1/users/me", client_headers(), json={}).known_error
        == "CANNOT_GET_OWN_USER_WITHOUT_USER"
    )
    assert h.request("GET", "/api/v1/users/me", server_headers()).known_error == "CANNOT_GET_OWN_USER_WITHOUT_USER"
    unknown = h.request("PATCH", "/api/v1/users/11111111-1111-4111-8111-111111111111", server_headers(), json={})
    assert (unknown.status, unknown.known_error) == (404, "USER_NOT_FOUND")
    bad = h.request("GET", "/api/v1/users/abc", server_headers())
    assert "params.user_id must be a valid UUID" in bad.json["details"]["message"]


def test_admin_writes_like_server() -> None:
    s = Signed()
    reply = s.patch({"server_metadata": {"x": 1}}, admin_headers())
    assert reply.json["server_metadata"] == {"x": 1}


# --- responses per access type --------------------------------------------------------------------------------


def _client_visible_responses() -> list[tuple[str, Reply]]:
    s = Signed()
    s.patch(
        {
            "server_metadata": {"secret": "server-only-marker-7f3a"},
            "restricted_by_admin": True,
            "restricted_by_admin_private_details": "private-details-marker-9c1e",
        }
    )
    s.h.request("PATCH", "/api/v1/users/me", server_headers(), json={})
    team = s.h.request(
        "POST",
        "/api/v1/teams",
        server_headers(),
        json={"display_name": "T", "creator_user_id": s.user_id, "server_metadata": {"t": "team-server-marker-2b8d"}},
    ).json
    s.patch({"selected_team_id": team["id"]})
    me = s.me(**{"x-service-allow-restricted-user": "true"})
    fresh = sign_in(s.h, code_for(s.h), headers=client_headers())
    me = client_headers(
        **{"x-service-access-token": fresh.json["access_token"], "x-service-allow-restricted-user": "true"}
    )
    return [
        ("sign-in", fresh),
        ("GET /users/me", s.h.request("GET", "/api/v1/users/me", me)),
        ("PATCH /users/me", s.h.request("PATCH", "/api/v1/users/me", me, json={"display_name": "x"})),
        ("GET profile", s.h.request("GET", f"/api/v1/team-member-profiles/{team['id']}/me", me)),
        (
            "PATCH profile",
            s.h.request("PATCH", f"/api/v1/team-member-profiles/{team['id']}/me", me, json={"display_name": "nick"}),
        ),
        (
            "list profiles",
            s.h.request("GET", "/api/v1/team-member-profiles", me, query=f"team_id={team['id']}&user_id=me"),
        ),
        ("list teams", s.h.request("GET", "/api/v1/teams", me, query="user_id=me")),
    ]


@pytest.mark.parametrize("index", range(7))
def test_no_client_visible_response_carries_a_server_only_field(index: int) -> None:
    name, reply = _client_visible_responses()[index]
    assert reply.status == 200, (name, reply.body)
    # (markers long enough that no random token can contain them by chance)
    for secret in (b"private-details-marker-9c1e", b"server-only-marker-7f3a", b"team-server-marker-2b8d"):
        assert secret not in reply.body, name
    for field in (*SERVER_ONLY_USER_FIELDS, "server_metadata"):
        assert f'"{field}"'.encode() not in reply.body, name


@pytest.mark.parametrize("headers", [client_headers, server_headers, admin_headers], ids=["client", "server", "admin"])
def test_every_required_field_is_in_every_response(headers: Any) -> None:
    s = Signed()
    reply = s.h.request("GET", "/api/v1/users/me", headers(**{"x-service-access-token": s.tokens["access_token"]}))
    assert reply.status == 200
    assert set(reply.json) >= REQUIRED_IN_EVERY_RESPONSE
    assert reply.json["risk_scores"] == {"sign_up": {"bot": 0, "free_trial_abuse": 0}}
    server_only_present = set(SERVER_ONLY_USER_FIELDS) <= set(reply.json)
    assert server_only_present is (headers is not client_headers)


def test_restriction_is_computed() -> None:
    s = Signed()
    s.h.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"require_email_verification": True}}
    )
    user = s.patch({"primary_email_verified": False}).json
    assert (user["is_restricted"], user["restricted_reason"]) == (True, {"type": "email_not_verified"})


def test_last_active_moves_with_a_refresh() -> None:
    s = Signed()
    s.h.advance(60_000)
    s.h.request(
        "POST",
        "/api/v1/auth/sessions/current/refresh",
        client_headers(**{"x-service-refresh-token": s.tokens["refresh_token"]}),
    )
    assert s.stored().last_active_at_millis == s.h.now_ms


# --- concurrency ----------------------------------------------------------------------------------------------


def test_concurrent_patches_of_different_fields_both_survive() -> None:
    s = Signed()
    barrier = threading.Barrier(2)

    def write(field: str, value: Any) -> None:
        barrier.wait()
        for i in range(50):
            assert s.patch({field: {**value, "i": i}}).status == 200

    threads = [
        threading.Thread(target=write, args=("server_metadata", {"s": 1})),
        threading.Thread(target=write, args=("client_metadata", {"c": 1})),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert s.stored().server_metadata == {"s": 1, "i": 49}
    assert s.stored().client_metadata == {"c": 1, "i": 49}


# --- create, read, list, delete -------------------------------------------------------------------------------


def test_server_creates_users() -> None:
    h = Harness()
    reply = h.request(
        "POST",
        "/api/v1/users",
        server_headers(),
        json={
            "primary_email": "New@Example.com",
            "primary_email_auth_enabled": True,
            "display_name": "New",
            "server_metadata": {"a": 1},
        },
    )
    assert reply.status == 201, reply.body
    assert (reply.json["primary_email"], reply.json["primary_email_verified"], reply.json["display_name"]) == (
        "new@example.com",
        False,
        "New",
    )
    again = h.request(
        "POST",
        "/api/v1/users",
        server_headers(),
        json={"primary_email": "new@example.com", "primary_email_auth_enabled": True},
    )
    assert (again.status, again.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")
    empty = h.request("POST", "/api/v1/users", server_headers(), json={})
    assert empty.status == 201
    assert (empty.json["primary_email"], empty.json["country_code"], empty.json["client_metadata"]) == (
        None,
        None,
        None,
    )
    anonymous = h.request("POST", "/api/v1/users", server_headers(), json={"is_anonymous": True})
    assert (anonymous.json["is_restricted"], anonymous.json["restricted_reason"]) == (True, {"type": "anonymous"})
    assert h.request("POST", "/api/v1/users", client_headers(), json={}).known_error == "INSUFFICIENT_ACCESS_TYPE"
    assert (
        h.request("POST", "/api/v1/users", server_headers(), json={"primary_email_verified": True}).known_error
        == "PRIMARY_EMAIL_REQUIRED"
    )


def test_create_team_on_sign_up() -> None:
    h = Harness()
    h.request("PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"create_team_on_sign_up": True}})
    user = h.request("POST", "/api/v1/users", server_headers(), json={"display_name": "Kim"}).json
    assert user["selected_team"] is None  # the answer is the user before its team (the original's)
    read = h.request("GET", f"/api/v1/users/{user['id']}", server_headers()).json
    assert read["selected_team"]["display_name"] == "Kim's Team"
    signed = sign_in(h, code_for(h, "lee@example.com")).json
    assert h.user(signed["user_id"]).selected_team_id is not None
    teams = h.request("GET", "/api/v1/teams", server_headers(), query=f"user_id={signed['user_id']}").json["items"]
    assert [t["display_name"] for t in teams] == ["lee@example.com's Team"]


def test_listing_users_with_the_inclusive_cursor() -> None:
    h = Harness()
    ids = []
    for i in range(5):
        h.advance(1)
        ids.append(h.request("POST", "/api/v1/users", server_headers(), json={"display_name": f"user {i}"}).json["id"])
    page = h.request("GET", "/api/v1/users", server_headers(), query="limit=2").json
    assert [u["id"] for u in page["items"]] == ids[:2]
    assert page["pagination"]["next_cursor"] == ids[2]
    rest = h.request("GET", "/api/v1/users", server_headers(), query=f"limit=3&cursor={ids[2]}").json
    assert [u["id"] for u in rest["items"]] == ids[2:]
    assert rest["pagination"]["next_cursor"] is None
    descending = h.request("GET", "/api/v1/users", server_headers(), query="desc=true").json
    assert [u["id"] for u in descending["items"]] == ids[::-1]
    found = h.request("GET", "/api/v1/users", server_headers(), query="query=USER%203").json
    assert [u["display_name"] for u in found["items"]] == ["user 3"]


def test_listing_filters_restricted_and_anonymous_users() -> None:
    h = Harness()
    plain = h.request("POST", "/api/v1/users", server_headers(), json={}).json["id"]
    restricted = h.request("POST", "/api/v1/users", server_headers(), json={"restricted_by_admin": True}).json["id"]
    anonymous = h.request("POST", "/api/v1/users", server_headers(), json={"is_anonymous": True}).json["id"]

    def listed(query: str) -> set[str]:
        return {u["id"] for u in h.request("GET", "/api/v1/users", server_headers(), query=query).json["items"]}

    assert listed("") == {plain}
    assert listed("include_restricted=true") == {plain, restricted}
    assert listed("include_anonymous=true") == {plain, restricted, anonymous}
    assert listed("include_anonymous=true&only_anonymous=true") == {anonymous}
    assert (
        h.request("GET", "/api/v1/users", server_headers(), query="only_anonymous=true").known_error
        == "ONLY_ANONYMOUS_REQUIRES_INCLUDE_ANONYMOUS"
    )
    assert h.request("GET", "/api/v1/users", server_headers(), query="colour=red").known_error == "SCHEMA_ERROR"


def test_deleting_users() -> None:
    s = Signed()
    refused = s.h.request("DELETE", "/api/v1/users/me", s.me())
    assert (refused.status, refused.known_error) == (400, "CLIENT_USER_DELETION_NOT_ENABLED")
    s.h.request(
        "PATCH", "/api/v1/projects/current", admin_headers(), json={"config": {"client_user_deletion_enabled": True}}
    )
    assert s.h.request("DELETE", "/api/v1/users/me", s.me()).json == {"success": True}
    assert s.user_id not in s.h.store.tenant(PROJECT_ID).users
    assert s.h.store.tenant(PROJECT_ID).email_index == {}
    assert s.h.store.tenant(PROJECT_ID).sessions == {}
    gone = s.h.request("DELETE", f"/api/v1/users/{s.user_id}", server_headers())
    assert (gone.status, gone.known_error) == (404, "USER_NOT_FOUND")


def test_get_user_by_id() -> None:
    s = Signed()
    assert s.h.request("GET", f"/api/v1/users/{s.user_id}", server_headers()).json["primary_email"] == "ada@example.com"
    assert s.h.request("GET", f"/api/v1/users/{s.user_id}", s.me()).known_error == "INSUFFICIENT_ACCESS_TYPE"
