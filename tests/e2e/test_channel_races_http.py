"""Contact-channel races over HTTP against a real Hypercorn (memory store and real Redis): each write reads,
decides in the core and commits guarded on what it read, so concurrent requests converge. Two users who each
claimed one address and verify it at once: both channels end verified, and exactly one of them (the first
verification) signs in with the address."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from tests.e2e.test_contact_channels_http import CALLBACK, CHANNELS, Person, sign_in
from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e


def _verification_codes(http: httpx.Client, email: str) -> list[str]:
    mails = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    return [dict(parse_qsl(urlsplit(m["magic_link"]).query))["code"] for m in mails]


def test_two_users_verifying_one_address_at_once_one_takes_it(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        shared = f"shared-{uuid.uuid4().hex[:12]}@example.com"
        people = [Person(http), Person(http)]
        for person in people:
            created = person.create(shared)  # a client's unverified claim: it holds no address yet
            assert created.status_code == 201, created.text
            channel_id = created.json()["id"]
            sent = person.request(
                "POST", f"{CHANNELS}/me/{channel_id}/send-verification-code", {"callback_url": CALLBACK}
            )
            assert sent.status_code == 200, sent.text
        codes = _verification_codes(http, shared)
        assert len(codes) == 2

        def verify(code: str) -> int:
            with httpx.Client(base_url=base_url, timeout=30.0) as own:
                return own.post(f"{CHANNELS}/verify", headers=client_headers(), json={"code": code}).status_code

        with ThreadPoolExecutor(2) as pool:
            assert list(pool.map(verify, codes)) == [200, 200]
        for person in people:
            assert [c["is_verified"] for c in person.channels() if c["value"] == shared] == [True]
        signed = sign_in(http, shared)
        assert signed["is_new_user"] is False
        assert signed["user_id"] in {p.id for p in people}
