"""A TOTP signs in once (RFC 6238 §5.2), over every store: the MFA sign-in uses its attempt code, records the TOTP's
time step and stores the session in one commit, and refuses a step no later than one it accepted before, also when
the sign-ins that present it race each other."""

from __future__ import annotations

import base64

import pyotp

from identity_proto.drivers import Store
from identity_proto.effects import LoadUser
from tests.contract.factories import T0, in_threads
from tests.contract.service import ServiceOver
from tests.support import PROJECT_ID, Reply, client_headers, server_headers

EMAIL = "ada@example.com"
SECRET = bytes(range(20))


def _with_totp(service: ServiceOver) -> tuple[str, pyotp.TOTP]:
    """A user who signed in by code and then got a TOTP secret; their id and their authenticator."""
    signed_in = service.code_sign_in(EMAIL)
    assert signed_in.status == 200, signed_in.body
    user_id = signed_in.json["user_id"]
    secret = {"totp_secret_base64": base64.b64encode(SECRET).decode()}
    assert service.request("PATCH", f"/api/v1/users/{user_id}", server_headers(), secret).status == 200
    return user_id, pyotp.TOTP(base64.b32encode(SECRET).decode())


def _attempt_code(service: ServiceOver) -> str:
    required = service.code_sign_in(EMAIL)
    assert required.known_error == "MULTI_FACTOR_AUTHENTICATION_REQUIRED", required.body
    return str(required.json["details"]["attempt_code"])


def _mfa(service: ServiceOver, attempt_code: str, totp: str) -> Reply:
    body = {"type": "totp", "totp": totp, "code": attempt_code}
    return service.request("POST", "/api/v1/auth/mfa/sign-in", client_headers(), body)


def test_totp_code_is_accepted_only_once(store: Store) -> None:
    service = ServiceOver(store, now_ms=T0 + 10_000)  # inside one 30-second step
    user_id, authenticator = _with_totp(service)
    first, second = _attempt_code(service), _attempt_code(service)
    totp = authenticator.at(service.now_ms // 1000)
    assert _mfa(service, first, totp).status == 200
    service.now_ms += 5_000  # the same step: the TOTP is still the right one for it
    replayed = _mfa(service, second, totp)
    assert (replayed.status, replayed.known_error) == (400, "INVALID_TOTP_CODE")
    # Refused as a wrong TOTP is: the attempt code stays usable, and the next step's TOTP signs in with it.
    service.now_ms += 30_000
    following = _mfa(service, second, authenticator.at(service.now_ms // 1000))
    assert (following.status, following.json["user_id"]) == (200, user_id)
    stored = store.apply(LoadUser(PROJECT_ID, user_id))
    assert stored is not None
    assert stored.totp_last_step == service.now_ms // 30_000


def test_of_concurrent_sign_ins_with_one_totp_exactly_one_succeeds(store: Store) -> None:
    service = ServiceOver(store, now_ms=T0 + 10_000)
    _, authenticator = _with_totp(service)
    attempt_codes = [_attempt_code(service) for _ in range(8)]
    totp = authenticator.at(service.now_ms // 1000)
    replies = in_threads(*[lambda code=code: _mfa(service, code, totp) for code in attempt_codes])
    assert sorted((r.status, r.known_error) for r in replies) == [(200, None)] + [(400, "INVALID_TOTP_CODE")] * 7


# --------------------------------------------------------------------------------------------------------------
# Accepting: the code used, the step recorded and the session stored in one commit


def test_accepting_uses_the_code_and_records_the_step(store: Store) -> None:
    service = ServiceOver(store, now_ms=T0 + 10_000)
    user_id, authenticator = _with_totp(service)
    code = _attempt_code(service)
    assert _mfa(service, code, authenticator.at(service.now_ms // 1000)).status == 200
    service.now_ms += 30_000
    again = _mfa(service, code, authenticator.at(service.now_ms // 1000))
    assert (again.status, again.known_error) == (409, "VERIFICATION_CODE_ALREADY_USED")
    stored = store.apply(LoadUser(PROJECT_ID, user_id))
    assert stored is not None
    assert stored.totp_last_step == (service.now_ms - 30_000) // 30_000


def test_an_earlier_step_writes_nothing_and_leaves_the_code_usable(store: Store) -> None:
    service = ServiceOver(store, now_ms=T0 + 40_000)
    user_id, authenticator = _with_totp(service)
    first, second = _attempt_code(service), _attempt_code(service)
    assert _mfa(service, first, authenticator.at(service.now_ms // 1000)).status == 200
    before = store.apply(LoadUser(PROJECT_ID, user_id))
    service.now_ms -= 30_000  # a clock gone back a step: its TOTP is right for it, and older than the last one
    earlier = _mfa(service, second, authenticator.at(service.now_ms // 1000))
    assert (earlier.status, earlier.known_error) == (400, "INVALID_TOTP_CODE")
    assert store.apply(LoadUser(PROJECT_ID, user_id)) == before
    service.now_ms += 60_000
    assert _mfa(service, second, authenticator.at(service.now_ms // 1000)).status == 200


def test_a_missing_code_or_user_signs_nobody_in(store: Store) -> None:
    service = ServiceOver(store, now_ms=T0 + 10_000)
    user_id, authenticator = _with_totp(service)
    code, totp = _attempt_code(service), authenticator.at(service.now_ms // 1000)
    missing = _mfa(service, "0" * len(code), totp)
    assert (missing.status, missing.known_error) == (404, "VERIFICATION_CODE_NOT_FOUND")
    assert service.request("DELETE", f"/api/v1/users/{user_id}", server_headers()).status == 200
    gone = _mfa(service, code, totp)
    assert gone.known_error == "USER_NOT_FOUND"


def test_of_concurrent_sign_ins_with_one_attempt_code_exactly_one_succeeds(store: Store) -> None:
    service = ServiceOver(store, now_ms=T0 + 10_000)
    _, authenticator = _with_totp(service)
    code, totp = _attempt_code(service), authenticator.at(service.now_ms // 1000)
    replies = in_threads(*[lambda: _mfa(service, code, totp) for _ in range(6)])
    # a loser finds the code used, or (when it read the code before the winner's commit) the step used
    refused = {(409, "VERIFICATION_CODE_ALREADY_USED"), (400, "INVALID_TOTP_CODE")}
    assert [r.status for r in replies].count(200) == 1
    assert all((r.status, r.known_error) in refused for r in replies if r.status != 200)
