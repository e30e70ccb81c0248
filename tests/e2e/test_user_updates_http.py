"""User updates over HTTP against a real Hypercorn (memory store and real Redis): a PATCH of a user is decided in
the core and committed with guards on exactly the fields it read, so concurrent PATCHes of different fields of one
user all survive (through the server API and through the user's own session), and of two users taking one address
at once, exactly one gets it (the other conflicts, re-runs, and sees it taken: 409)."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support import client_headers, server_headers

pytestmark = pytest.mark.e2e

PASSWORD = "a long enough password 1"


def _create_user(http: httpx.Client, **body: Any) -> str:
    created = http.post("/api/v1/users", headers=server_headers(), json=body)
    assert created.status_code == 201, created.text
    user_id: str = created.json()["id"]
    return user_id


def test_concurrent_patches_of_different_fields_of_a_user_all_survive(base_url: str) -> None:
    email = f"fields-{uuid.uuid4().hex[:8]}@example.com"
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        signed_up = http.post(
            "/api/v1/auth/password/sign-up", headers=client_headers(), json={"email": email, "password": PASSWORD}
        )
        assert signed_up.status_code == 200, signed_up.text
        user_id, token = signed_up.json()["user_id"], signed_up.json()["access_token"]
        me = client_headers(**{"x-service-access-token": token})

        def patch(body: dict[str, Any]) -> int:
            if "client_metadata" in body:  # the user themself, through their session
                return http.patch("/api/v1/users/me", headers=me, json=body).status_code
            return http.patch(f"/api/v1/users/{user_id}", headers=server_headers(), json=body).status_code

        with ThreadPoolExecutor(9) as pool:
            for n in range(8):
                bodies = [
                    {"display_name": f"name {n}"},
                    {"client_metadata": {"n": n}},
                    {"server_metadata": {"m": n}},
                ] * 3
                assert set(pool.map(patch, bodies)) == {200}
                user = http.get(f"/api/v1/users/{user_id}", headers=server_headers()).json()
                assert (user["display_name"], user["client_metadata"], user["server_metadata"]) == (
                    f"name {n}",
                    {"n": n},
                    {"m": n},
                )
                assert user["primary_email"] == email  # untouched by the blind writes


def test_of_two_users_taking_one_address_at_once_exactly_one_gets_it(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        first = _create_user(http, display_name="first")
        second = _create_user(http, display_name="second")

        def take(user_id: str, address: str) -> httpx.Response:
            body = {"primary_email": address, "primary_email_auth_enabled": True}
            return http.patch(f"/api/v1/users/{user_id}", headers=server_headers(), json=body)

        with ThreadPoolExecutor(2) as pool:
            for _round in range(6):
                address = f"taken-{uuid.uuid4().hex[:8]}@example.com"
                answers = list(pool.map(lambda user_id, a=address: take(user_id, a), (first, second)))
                statuses = sorted(answer.status_code for answer in answers)
                assert statuses == [200, 409], [a.text for a in answers]
                refused = next(a for a in answers if a.status_code == 409)
                assert refused.headers.get("x-service-known-error") == "USER_EMAIL_ALREADY_EXISTS"
                winner = next(a for a in answers if a.status_code == 200).json()["id"]
                listed = http.get("/api/v1/users", params={"query": address}, headers=server_headers()).json()
                holders = [u["id"] for u in listed["items"] if u["primary_email"] == address]
                assert holders == [winner]
                # the address signs the winner in: a sign-up with it is refused
                signed_up = http.post(
                    "/api/v1/auth/password/sign-up",
                    headers=client_headers(),
                    json={"email": address, "password": PASSWORD},
                )
                assert signed_up.status_code == 409, signed_up.text


@pytest.mark.parametrize("limit", ["100000000000000000", str(10**30)])
def test_a_huge_listing_limit_answers_like_any_other_on_both_stores(base_url: str, limit: str) -> None:
    # The original bounds `limit` below only; a huge one asks for every user. The Redis listing script once got it
    # as a float ("1e+17") and answered 500 where the memory store answered 200.
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        user_id = _create_user(http, display_name="listed")
        listed = http.get("/api/v1/users", params={"limit": limit}, headers=server_headers())
        assert listed.status_code == 200, listed.text
        assert user_id in [user["id"] for user in listed.json()["items"]]
        assert listed.json()["pagination"]["next_cursor"] is None
