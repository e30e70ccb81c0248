"""Sign-up races over HTTP against a real Hypercorn (memory store and real Redis). Every sign-up path stores its
user through one `Commit` guarded on the address being free, so of concurrent sign-ups of one address one commits
and the others re-run and meet it:

- N code sign-ins of one new address (N codes sent to it): one signs up, the others sign in as that user; one
  account, whole (personal team, membership, default permission);
- N anonymous users signing in with codes for one free address: one of them is upgraded in place (keeps its id),
  the others sign in as it and stay anonymous.
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.e2e.test_write_path_http import _assert_whole, _configure, _restore, _users_with
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e

CALLBACK = "http://localhost:3000/handler/magic-link-callback"
RACERS = 8


def _code(http: httpx.Client, email: str) -> str:
    """Send a sign-in code to `email` and read it back from the outbox (newest first)."""
    sent = http.post(
        "/api/v1/auth/otp/send-sign-in-code", headers=client_headers(), json={"email": email, "callback_url": CALLBACK}
    )
    assert sent.status_code == 200, sent.text
    outbox = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    otp = re.search(r"Your code is ([0-9A-Z]{6})$", outbox[0]["subject"])
    assert otp is not None
    return otp.group(1) + sent.json()["nonce"]


def _sign_in(http: httpx.Client, code: str, access_token: str | None = None) -> httpx.Response:
    headers = client_headers()
    if access_token is not None:
        headers = client_headers(**{"x-service-access-token": access_token, "x-service-allow-anonymous-user": "true"})
    return http.post("/api/v1/auth/otp/sign-in", headers=headers, json={"code": code})


def _race(calls: list[Any]) -> list[httpx.Response]:
    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(lambda call: call(), calls))


def test_of_concurrent_code_sign_ups_of_one_address_exactly_one_account_is_made(base_url: str) -> None:
    restore = _configure(base_url)
    try:
        email = f"otp-race-{uuid.uuid4().hex[:8]}@example.com"
        with httpx.Client(base_url=base_url, timeout=30.0) as http:
            codes = [_code(http, email) for _ in range(RACERS)]
            answers = _race([lambda code=code: _sign_in(http, code) for code in codes])
            assert [a.status_code for a in answers] == [200] * RACERS, [a.text for a in answers]
            bodies = [a.json() for a in answers]
            assert sorted(body["is_new_user"] for body in bodies) == [False] * (RACERS - 1) + [True]
            assert len({body["user_id"] for body in bodies}) == 1
            users = _users_with(http, email)
            assert [user["id"] for user in users] == [bodies[0]["user_id"]]
            _assert_whole(http, users[0])
            sessions = http.get("/api/v1/auth/sessions", params={"user_id": users[0]["id"]}, headers=server_headers())
            assert sessions.status_code == 200, sessions.text
            assert len(sessions.json()["items"]) == RACERS  # every sign-in has its session
    finally:
        _restore(base_url, restore)


def test_of_concurrent_anonymous_upgrades_to_one_address_one_wins(base_url: str) -> None:
    email = f"anon-race-{uuid.uuid4().hex[:8]}@example.com"
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        anonymous = []
        for _ in range(RACERS):
            signed_up = http.post("/api/v1/auth/anonymous/sign-up", headers=client_headers())
            assert signed_up.status_code == 200, signed_up.text
            anonymous.append(signed_up.json())
        codes = [_code(http, email) for _ in range(RACERS)]
        answers = _race(
            [
                lambda code=code, anon=anon: _sign_in(http, code, anon["access_token"])
                for code, anon in zip(codes, anonymous, strict=True)
            ]
        )
        assert [a.status_code for a in answers] == [200] * RACERS, [a.text for a in answers]
        bodies = [a.json() for a in answers]
        winners = [body for body in bodies if body["is_new_user"]]
        assert len(winners) == 1
        winner = winners[0]["user_id"]
        assert winner in {anon["user_id"] for anon in anonymous}  # upgraded in place: its id kept
        assert {body["user_id"] for body in bodies} == {winner}
        users = _users_with(http, email)
        assert [user["id"] for user in users] == [winner]
        assert users[0]["is_anonymous"] is False
        for anon in anonymous:
            if anon["user_id"] != winner:
                loser = http.get(f"/api/v1/users/{anon['user_id']}", headers=server_headers())
                assert loser.status_code == 200, loser.text
                assert (loser.json()["is_anonymous"], loser.json()["primary_email"]) == (True, None)
