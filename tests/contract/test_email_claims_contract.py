"""Who may sign in with an address, through the whole service over every store: a client that sets someone
else's address on its own account gets an unverified address that signs nobody in, and the address's real owner
signs in (and up) by code over it."""

from __future__ import annotations

from identity_proto.drivers import Store
from identity_proto.effects import LoadUser, find_user_by_email
from tests.contract.service import ServiceOver
from tests.support import PROJECT_ID, server_headers

ATTACKER = "mallory@example.com"
OWNER = "victim@example.com"


def _attacker_claims_the_owners_address(service: ServiceOver) -> str:
    """Mallory signs up with a password, then sets the victim's address as her own with client access."""
    signed_up = service.password("sign-up", ATTACKER, "mallory's password")
    assert signed_up.status == 200, signed_up.body
    claimed = service.claim(signed_up.json["access_token"], OWNER)
    assert claimed.status == 200, claimed.body
    assert (claimed.json["primary_email"], claimed.json["primary_email_verified"]) == (OWNER, False)
    return str(signed_up.json["user_id"])


def test_client_email_change_is_unverified_and_not_for_sign_in(store: Store) -> None:
    service = ServiceOver(store)
    attacker_id = _attacker_claims_the_owners_address(service)
    seen_by_server = service.request("GET", f"/api/v1/users/{attacker_id}", server_headers()).json
    assert (seen_by_server["primary_email_verified"], seen_by_server["primary_email_auth_enabled"]) == (False, False)
    stored = store.apply(LoadUser(PROJECT_ID, attacker_id))
    assert stored is not None
    assert (stored.primary_email, stored.primary_email_verified, stored.primary_email_auth_enabled) == (
        OWNER,
        False,
        False,
    )
    assert store.apply(find_user_by_email(PROJECT_ID, OWNER)) is None
    as_owner = service.password("sign-in", OWNER, "mallory's password")
    assert (as_owner.status, as_owner.known_error) == (400, "EMAIL_PASSWORD_MISMATCH")


def test_real_owner_signs_in_over_an_unverified_claim(store: Store) -> None:
    service = ServiceOver(store)
    attacker_id = _attacker_claims_the_owners_address(service)
    owner = service.code_sign_in(OWNER)
    assert owner.status == 200, owner.body
    assert owner.json["is_new_user"] is True
    assert owner.json["user_id"] != attacker_id
    holder = store.apply(find_user_by_email(PROJECT_ID, OWNER))
    assert holder is not None
    assert (holder.id, holder.primary_email_verified) == (owner.json["user_id"], True)
    again = service.code_sign_in(OWNER)
    assert (again.json["user_id"], again.json["is_new_user"]) == (owner.json["user_id"], False)
    # The claim is left as it was, and can no longer be made an auth e-mail: the owner holds the address.
    attacker = service.request("GET", f"/api/v1/users/{attacker_id}", server_headers()).json
    assert (attacker["primary_email"], attacker["primary_email_auth_enabled"]) == (OWNER, False)
    promoted = service.request(
        "PATCH", f"/api/v1/users/{attacker_id}", server_headers(), {"primary_email_auth_enabled": True}
    )
    assert (promoted.status, promoted.known_error) == (409, "USER_EMAIL_ALREADY_EXISTS")


def test_a_password_sign_up_by_the_real_owner_is_not_blocked_by_a_claim(store: Store) -> None:
    service = ServiceOver(store)
    _attacker_claims_the_owners_address(service)
    signed_up = service.password("sign-up", OWNER, "the owner's password")
    assert signed_up.status == 200, signed_up.body
    assert service.password("sign-in", OWNER, "the owner's password").json["user_id"] == signed_up.json["user_id"]
