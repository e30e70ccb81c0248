"""A TOTP signs in once (RFC 6238 §5.2), over every store: AcceptTotp consumes the MFA attempt code and records
the TOTP's time step as one atomic step, and the MFA sign-in refuses a step it accepted before, also when the
sign-ins that present it race each other."""

from __future__ import annotations

import base64

import pyotp
import pytest

from identity_proto.drivers import Store
from identity_proto.effects import AcceptTotp, CreateVerificationCode, LoadUser, TotpAcceptance
from identity_proto.records import CodePurpose
from tests.contract.factories import PROJECT, T0, add_user, in_threads, make_code, make_user
from tests.contract.service import ServiceOver
from tests.support import PROJECT_ID, Reply, client_headers, server_headers

EMAIL = "ada@example.com"
SECRET = bytes(range(20))
STEP = T0 // 30_000


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
# AcceptTotp


def _mfa_code(name: str) -> str:
    return make_code(name, purpose=CodePurpose.MFA, user_id="ada").code_hash


@pytest.fixture
def with_user_and_codes(store: Store) -> Store:
    store.apply(add_user(PROJECT, make_user("ada", EMAIL)))
    for name in ("a", "b", "c"):
        store.apply(CreateVerificationCode(PROJECT, make_code(name, purpose=CodePurpose.MFA, user_id="ada")))
    return store


def test_accepting_consumes_the_code_and_records_the_step(with_user_and_codes: Store) -> None:
    store = with_user_and_codes
    assert store.apply(AcceptTotp(PROJECT, _mfa_code("a"), "ada", STEP)) is TotpAcceptance.ACCEPTED
    assert store.apply(AcceptTotp(PROJECT, _mfa_code("a"), "ada", STEP + 1)) is TotpAcceptance.CODE_USED
    user = store.apply(LoadUser(PROJECT, "ada"))
    assert user is not None
    assert user.totp_last_step == STEP


@pytest.mark.parametrize("step", [STEP, STEP - 1])
def test_a_step_accepted_before_or_an_earlier_one_writes_nothing(with_user_and_codes: Store, step: int) -> None:
    store = with_user_and_codes
    store.apply(AcceptTotp(PROJECT, _mfa_code("a"), "ada", STEP))
    before = store.apply(LoadUser(PROJECT, "ada"))
    assert store.apply(AcceptTotp(PROJECT, _mfa_code("b"), "ada", step)) is TotpAcceptance.STEP_USED
    assert store.apply(LoadUser(PROJECT, "ada")) == before
    # the code was left unused
    assert store.apply(AcceptTotp(PROJECT, _mfa_code("b"), "ada", STEP + 1)) is TotpAcceptance.ACCEPTED


def test_a_missing_code_or_user_writes_nothing(with_user_and_codes: Store) -> None:
    store = with_user_and_codes
    assert store.apply(AcceptTotp(PROJECT, "code-none", "ada", STEP)) is TotpAcceptance.CODE_USED
    assert store.apply(AcceptTotp(PROJECT, _mfa_code("a"), "nobody", STEP)) is TotpAcceptance.USER_NOT_FOUND
    assert store.apply(AcceptTotp(PROJECT, _mfa_code("a"), "ada", STEP)) is TotpAcceptance.ACCEPTED


def test_of_concurrent_acceptances_of_one_step_exactly_one_wins(with_user_and_codes: Store) -> None:
    store = with_user_and_codes
    codes = [_mfa_code(name) for name in ("a", "b", "c")]
    results = in_threads(*[lambda code=code: store.apply(AcceptTotp(PROJECT, code, "ada", STEP)) for code in codes])
    assert sorted(r.value for r in results) == ["accepted", "step_used", "step_used"]
