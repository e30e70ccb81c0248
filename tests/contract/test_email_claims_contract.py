"""Who may sign in with an address, through the whole service over every store: a client that sets someone
else's address on its own account gets an unverified address that signs nobody in, and the address's real owner
signs in (and up) by code over it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from hosting import DEV_INTERNAL_ADMIN_KEY, DEV_PROJECT
from identity_proto import Request, SeededEntropy, Service, ServiceOptions, run
from identity_proto.drivers import Store
from identity_proto.effects import FindUserByAuthEmail, LoadUser
from tests.contract.factories import T0
from tests.support import PROJECT_ID, Reply, client_headers, server_headers

CALLBACK = "http://localhost:3000/handler/magic-link-callback"
ATTACKER = "mallory@example.com"
OWNER = "victim@example.com"


@dataclass
class ServiceOver:
    """The service with the dev project on `store`, driven in process at `T0` (so that nothing it stores in
    Redis expires during a test, whatever the wall clock says)."""

    store: Store
    service: Service = field(default_factory=lambda: Service(ServiceOptions(password_rounds=4)))
    entropy: SeededEntropy = field(default_factory=lambda: SeededEntropy(11))

    def __post_init__(self) -> None:
        run(self.service.bootstrap(DEV_PROJECT, DEV_INTERNAL_ADMIN_KEY, now_ms=T0, entropy=self.entropy), self.store)

    def request(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> Reply:
        raw = {**headers, "content-type": "application/json"} if body is not None else headers
        encoded = orjson.dumps(body) if body is not None else b""
        path, _, query = path.partition("?")
        request = Request(method, path, tuple(raw.items()), encoded, query)
        return Reply.of(run(self.service.handle(request, T0, self.entropy), self.store))

    def code_sign_in(self, email: str) -> Reply:
        sent = self.request(
            "POST", "/api/v1/auth/otp/send-sign-in-code", client_headers(), {"email": email, "callback_url": CALLBACK}
        )
        assert sent.status == 200, sent.body
        outbox = self.request("GET", f"/api/v1/emails/outbox?to={email}", server_headers())
        otp = re.search(r"Your code is ([0-9A-Z]{6})$", outbox.json["items"][0]["subject"])
        assert otp is not None
        return self.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), {"code": otp[1] + sent.json["nonce"]})

    def password(self, action: str, email: str, password: str) -> Reply:
        return self.request(
            "POST", f"/api/v1/auth/password/{action}", client_headers(), {"email": email, "password": password}
        )

    def claim(self, access_token: str, email: str) -> Reply:
        """The client PATCH /users/me that sets `email` as the signed-in user's primary e-mail."""
        me = client_headers(**{"x-service-access-token": access_token})
        return self.request("PATCH", "/api/v1/users/me", me, {"primary_email": email})


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
    assert store.apply(FindUserByAuthEmail(PROJECT_ID, OWNER)) is None
    as_owner = service.password("sign-in", OWNER, "mallory's password")
    assert (as_owner.status, as_owner.known_error) == (400, "EMAIL_PASSWORD_MISMATCH")


def test_real_owner_signs_in_over_an_unverified_claim(store: Store) -> None:
    service = ServiceOver(store)
    attacker_id = _attacker_claims_the_owners_address(service)
    owner = service.code_sign_in(OWNER)
    assert owner.status == 200, owner.body
    assert owner.json["is_new_user"] is True
    assert owner.json["user_id"] != attacker_id
    holder = store.apply(FindUserByAuthEmail(PROJECT_ID, OWNER))
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
