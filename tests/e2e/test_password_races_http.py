"""Password writes racing over real HTTP (a real Hypercorn, on the memory store and on Redis): each is the core's
decision committed with guards on what it read, so concurrent requests converge.

- Of concurrent resets with one code, exactly one succeeds (the others: 409 VERIFICATION_CODE_ALREADY_USED), and
  the password is the winner's.
- A password update racing a reset leaves one of them whole: either the update won (the code no longer holds:
  404) and the caller's session lives, or the reset won (the update's old password no longer matches: 400, or
  its session has ended: 401) and no session survives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.test_security_password_reset_http import (
    NEW_PASSWORD,
    PASSWORD,
    _as,
    _code,
    _email,
    _error,
    _post,
    _refreshes,
    _sign_in,
    _verified_user,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def http(base_url: str) -> Any:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        yield client


def test_of_concurrent_resets_with_one_code_exactly_one_succeeds(http: httpx.Client, base_url: str) -> None:
    email = _email("race-reset")
    _verified_user(http, email)
    code = _code(http, email)
    passwords = [f"{NEW_PASSWORD} {i}" for i in range(8)]

    def reset(password: str) -> tuple[int, str | None]:
        with httpx.Client(base_url=base_url, timeout=30.0) as client:
            return _error(_post(client, "reset", {"code": code, "password": password}))

    with ThreadPoolExecutor(len(passwords)) as pool:
        answers = list(pool.map(reset, passwords))
    assert sorted(answers, key=str).count((200, None)) == 1, answers
    assert all(a in ((200, None), (409, "VERIFICATION_CODE_ALREADY_USED")) for a in answers), answers
    winner = passwords[answers.index((200, None))]
    _sign_in(http, email, winner)
    assert _post(http, "sign-in", {"email": email, "password": PASSWORD}).status_code == 400


def test_a_password_update_racing_a_reset_leaves_one_of_them_whole(http: httpx.Client, base_url: str) -> None:
    for _round in range(4):
        email = _email("race-change")
        tokens = _verified_user(http, email)
        code = _code(http, email)
        changed, reset_to = f"{NEW_PASSWORD} changed", f"{NEW_PASSWORD} reset"

        with ThreadPoolExecutor(2) as pool:
            updating = pool.submit(_update, base_url, tokens, changed)
            resetting = pool.submit(_reset, base_url, code, reset_to)
            updated, was_reset = updating.result(), resetting.result()
        if updated == (200, None):  # the update won: the code was sent for the old password
            assert was_reset == (404, "VERIFICATION_CODE_NOT_FOUND")
            _sign_in(http, email, changed)
            assert _refreshes(http, tokens)
        else:  # the reset won: the old password no longer matches (or the caller's session has ended already)
            assert was_reset == (200, None)
            assert updated in ((400, "PASSWORD_CONFIRMATION_MISMATCH"), (401, "ACCESS_TOKEN_EXPIRED")), updated
            _sign_in(http, email, reset_to)
            assert not _refreshes(http, tokens)


def _update(base_url: str, tokens: dict[str, str], new_password: str) -> tuple[int, str | None]:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        body = {"old_password": PASSWORD, "new_password": new_password}
        return _error(client.post("/api/v1/auth/password/update", headers=_as(tokens), json=body))


def _reset(base_url: str, code: str, password: str) -> tuple[int, str | None]:
    with httpx.Client(base_url=base_url, timeout=30.0) as client:
        return _error(_post(client, "reset", {"code": code, "password": password}))
