"""What the memory store keeps grows with what must be kept (users, live codes and sessions, undelivered events),
not with traffic: in process (`Service` + `MemoryStore`, no network), a fixed set of people sign in by code, PATCH,
refresh and sign out again and again; after a warm-up, the bytes of everything the store holds (`deep_size`) are
counted per cycle.

What a cycle may leave: its used code and the code's nonce count (about 600 B), kept until the code expires (7
days) because a used code answers ALREADY_USED until then, as in the original and on Redis. Before events were
recorded only for projects with webhook endpoints, each PATCH also left its event (about 500 B each here). The
caches in front of the store (verified tokens, authentications) are bounded and tested where they are
(`tests/unit/test_auth_cache.py`); this counts the store only. The Hypercorn soak (`test_soak.py`) shows the RSS."""

from __future__ import annotations

import enum
import re
import sys
import threading
import types
from collections import deque
from typing import Any

from identity_proto import Service, ServiceOptions
from tests.support import PROJECT_ID, Harness, client_headers, server_headers

PEOPLE = 20
WARM_UP_CYCLES = 1_100  # past the outbox's bound (the newest 1000 mails): a full outbox grows no more
CYCLES = 400
PATCHES_PER_CYCLE = 5
#: Bytes the store may keep per cycle: the used code and its nonce's count (measured 593 B; 3068 B when every PATCH
#: also kept its event).
MAX_BYTES_PER_CYCLE = 800
_OTP = re.compile(r"Your code is ([0-9A-Z]{6})$")


def _sign_in(harness: Harness, email: str) -> dict[str, Any]:
    sent = harness.request(
        "POST",
        "/api/v1/auth/otp/send-sign-in-code",
        client_headers(),
        json={"email": email, "callback_url": "http://localhost:3000/handler/magic-link-callback"},
    )
    assert sent.status == 200, sent.body
    nonce = sent.json["nonce"]
    outbox = harness.request("GET", "/api/v1/emails/outbox", server_headers(), query=f"to={email}")
    assert outbox.status == 200, outbox.body
    otp = next(
        match.group(1)
        for mail in outbox.json["items"]
        if nonce in mail["text"] and (match := _OTP.search(mail["subject"])) is not None
    )
    signed = harness.request("POST", "/api/v1/auth/otp/sign-in", client_headers(), json={"code": otp + nonce})
    assert signed.status == 200, signed.body
    tokens: dict[str, Any] = signed.json
    return tokens


def _cycle(harness: Harness, n: int) -> None:
    tokens = _sign_in(harness, f"person-{n % PEOPLE}@example.com")
    me = client_headers(**{"x-service-access-token": tokens["access_token"]})
    for k in range(PATCHES_PER_CYCLE):
        patched = harness.request("PATCH", "/api/v1/users/me", me, json={"display_name": f"name {n}-{k}"})
        assert patched.status == 200, patched.body
    refresh = client_headers(**{"x-service-refresh-token": tokens["refresh_token"]})
    assert harness.request("POST", "/api/v1/auth/sessions/current/refresh", refresh).status == 200
    assert harness.request("DELETE", "/api/v1/auth/sessions/current", me).status == 200


_NOT_DATA = (type, types.ModuleType, types.FunctionType, type(threading.RLock()), type(threading.Lock()))


def deep_size(root: object) -> int:
    """Bytes of every object reachable from `root` through containers, dataclasses and object attributes (each
    object once; classes, modules and functions are not followed)."""
    seen: set[int] = set()
    stack, total = [root], 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _NOT_DATA):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset, deque)):
            stack.extend(obj)
        elif not isinstance(obj, (str, bytes, int, float, bool, enum.Enum)) and obj is not None:
            if hasattr(obj, "__dict__"):
                stack.append(vars(obj))
            for name in getattr(type(obj), "__slots__", ()):
                stack.append(getattr(obj, name, None))
    return total


def test_the_memory_store_keeps_per_cycle_only_the_used_code_until_it_expires() -> None:
    # Rate limits off: one address signs in again and again on purpose (their counters are tested elsewhere).
    harness = Harness(service=Service(ServiceOptions(password_rounds=4, rate_limits_enabled=False)))
    for n in range(WARM_UP_CYCLES):
        _cycle(harness, n)
    before = deep_size(harness.store)
    for n in range(WARM_UP_CYCLES, WARM_UP_CYCLES + CYCLES):
        _cycle(harness, n)
    per_cycle = (deep_size(harness.store) - before) / CYCLES
    tenant = harness.store.tenant(PROJECT_ID)
    print(
        f"\nmemory store: {per_cycle:.0f} B kept per cycle (1 sign-in by code, {PATCHES_PER_CYCLE} PATCHes, a refresh, "
        f"a sign-out); {len(tenant.codes)} codes, {len(tenant.sessions)} sessions, {len(tenant.events)} events"
    )
    assert tenant.events == []  # no endpoint: no event is owed to anyone
    assert len(tenant.sessions) == 0  # every session signed out
    assert len(tenant.users) == PEOPLE
    assert tenant.orphan_nonces == {}
    assert per_cycle <= MAX_BYTES_PER_CYCLE


def test_expired_sessions_are_swept_from_the_memory_store() -> None:
    # Sessions are kept while they can be used (and a day more, as on Redis), not for every sign-in since the start.
    harness = Harness(service=Service(ServiceOptions(password_rounds=4, rate_limits_enabled=False)))
    created = harness.request("POST", "/api/v1/users", server_headers(), json={"display_name": "many sessions"})
    assert created.status == 201, created.body
    user_id = created.json["id"]

    def new_session(lifetime_ms: int) -> None:
        body = {"user_id": user_id, "expires_in_millis": lifetime_ms}
        answer = harness.request("POST", "/api/v1/auth/sessions", server_headers(), json=body)
        assert answer.status == 200, answer.body

    tenant = harness.store.tenant(PROJECT_ID)
    for _ in range(1_100):
        new_session(60_000)
    assert len(tenant.sessions) == 1_100
    harness.advance(2 * 24 * 3_600_000)  # a day past the sweep's grace
    for _ in range(1_100):
        new_session(365 * 24 * 3_600_000)
    # the sweep (every 1024 new sessions) ran once the first ones had expired: none of them is left
    assert len(tenant.sessions) == 1_100
    assert all(s.expires_at_millis > s.created_at_millis + 60_000 for s in tenant.sessions.values())
    assert len(tenant.session_by_token) == 1_100
    assert tenant.user_sessions[user_id] == set(tenant.sessions)
