"""Rate limits over real HTTP (the client address is the connection's): a guessing attack on one nonce."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e


def test_a_guessing_attack_over_http_is_stopped_then_rate_limited() -> None:
    server = start_hypercorn({"IDENTITY_RATE_LIMITS": "on"})
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            sent = http.post(
                "/api/v1/auth/otp/send-sign-in-code",
                headers=client_headers(),
                json={"email": "target@example.com", "callback_url": "http://localhost/cb"},
            )
            nonce = sent.json()["nonce"]
            mail = http.get("/api/v1/emails/outbox", headers=server_headers()).json()["items"][0]
            otp = re.search(r"Your code is ([0-9A-Z]{6})$", mail["subject"])
            assert otp is not None
            answers = []
            for i in range(31):
                guess = f"{i:06d}"
                if guess == otp.group(1):
                    guess = "ZZZZZZ"
                answers.append(
                    http.post("/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": guess + nonce})
                )
            codes = [a.headers.get("x-service-known-error") for a in answers]
            assert codes[:20] == ["VERIFICATION_CODE_NOT_FOUND"] * 20
            assert codes[-1] == "RATE_LIMITED"
            assert answers[-1].status_code == 429
            assert int(answers[-1].headers["retry-after"]) > 0
            # even the right code is refused now: the nonce saw 20 attempts, and the address is rate-limited
            right = http.post("/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": otp.group(1) + nonce})
            assert right.status_code == 429
    finally:
        stop_server(server)
