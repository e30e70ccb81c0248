"""Mail over real HTTP: a Hypercorn process configured with IDENTITY_MAIL=smtp://... delivers sign-in codes to a
real SMTP server, and says so when it cannot."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.e2e.conftest import start_hypercorn, stop_server
from tests.processes import free_port
from tests.smtp_server import StartServer
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e

CALLBACK = "http://localhost:3000/cb"


def test_codes_are_delivered_over_smtp_and_sign_in_works(start_smtp: StartServer) -> None:
    smtp = start_smtp()
    server = start_hypercorn({"IDENTITY_MAIL": f"smtp://{smtp.host}:{smtp.port}?from=auth@example.test"})
    try:
        with httpx.Client(base_url=server.base_url, timeout=10) as http:
            sent = http.post(
                "/api/v1/auth/otp/send-sign-in-code",
                headers=client_headers(),
                json={"email": "smtp@example.com", "callback_url": CALLBACK},
            )
            assert sent.status_code == 200, sent.text
            (received,) = smtp.handler.received
            assert received.rcpt_tos == ["smtp@example.com"]
            otp = re.search(r"Your code is ([0-9A-Z]{6})$", str(received.message["subject"]))
            assert otp is not None
            body = received.message.get_content()
            assert f"code={otp.group(1).lower()}{sent.json()['nonce']}" in body
            signed_in = http.post(
                "/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": otp.group(1) + sent.json()["nonce"]}
            )
            assert signed_in.status_code == 200
            assert (
                http.get("/api/v1/emails/outbox", headers=server_headers()).json()["items"] == []
            )  # SMTP, not the outbox
    finally:
        stop_server(server)


def test_an_unreachable_smtp_server_is_a_clear_error() -> None:
    server = start_hypercorn({"IDENTITY_MAIL": f"smtp://127.0.0.1:{free_port()}"})
    try:
        sent = httpx.post(
            f"{server.base_url}/api/v1/auth/otp/send-sign-in-code",
            headers=client_headers(),
            json={"email": "smtp@example.com", "callback_url": CALLBACK},
            timeout=15,
        )
        assert (sent.status_code, sent.headers["x-service-known-error"]) == (502, "EMAIL_DELIVERY_FAILED")
    finally:
        stop_server(server)
