"""Races over real HTTP against a real Hypercorn on IDENTITY_BACKEND=redis (the session's redis-server): each
request in its own thread with its own httpx client, its body held back until every request is open, then all
released at once (threads alone start requests a fraction of a millisecond apart, and a service that answers in
about one millisecond then mostly serves them one after the other: no race).

- one code, 20 concurrent sign-ins: exactly one 200, nineteen 409 VERIFICATION_CODE_ALREADY_USED;
- two users PATCHing themselves to one e-mail at once: exactly one 200, one 409 USER_EMAIL_ALREADY_EXISTS, and
  the e-mail (and sign-in with it) belongs to the winner;
- 50 concurrent PATCHes of one user, each writing one of four top-level fields: no write is lost to another.

Each fails on a store with the race it is about (checked by planting one in the service process): a consuming
attempt that marks the code used in a second command (two or more 200s), an e-mail check outside the write
script (two 200s), a user write that reads the record and writes it back whole (a lost update).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.processes import RedisServer
from tests.support import client_headers, server_headers

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

CALLBACK = "http://localhost:3000/handler/magic-link-callback"
TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def service(redis_server: RedisServer) -> Iterator[Server]:
    """The service on Redis, dev project (its keys are the session redis-server's default namespace)."""
    running = start_hypercorn(
        {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": redis_server.url, "IDENTITY_RATE_LIMITS": "off"}
    )
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture
def http(service: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.base_url, timeout=TIMEOUT_S) as client:
        yield client


@dataclass(frozen=True)
class Call:
    """One JSON request."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


def send_held(
    own: httpx.Client, call: Call, release: threading.Event, on_release: Callable[[], None]
) -> httpx.Response:
    """Send `call` with its body held back: the head and all but the last byte go at once, the last byte when
    `release` is set (`on_release` runs just before). The service cannot act on a request before its body is
    complete, so requests released together are processed together, rather than one by one as threads would
    manage to send them."""
    payload = orjson.dumps(call.json)

    def body() -> Iterator[bytes]:
        yield payload[:-1]
        if not release.wait(timeout=TIMEOUT_S):
            raise TimeoutError("never released")
        on_release()
        yield payload[-1:]

    headers = {**call.headers, "content-type": "application/json"}
    return own.request(call.method, call.path, headers=headers, content=body())


def at_once(base_url: str, calls: list[Call]) -> list[httpx.Response]:
    """Each call from its own thread and client, bodies held back until every one is waiting, then released
    together; their responses, in order."""
    barrier = threading.Barrier(len(calls) + 1)
    release = threading.Event()
    responses: list[httpx.Response | None] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Call) -> None:
        try:
            with httpx.Client(base_url=base_url, timeout=TIMEOUT_S) as own:
                own.get("/api/v1")  # connected before the start
                barrier.wait(timeout=TIMEOUT_S)
                responses[index] = send_held(own, call, release, lambda: None)
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)
            release.set()

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=TIMEOUT_S)
    time.sleep(0.2)  # every head and partial body is in the service's hands
    release.set()
    for thread in threads:
        thread.join(timeout=TIMEOUT_S * 2)
    assert not any(thread.is_alive() for thread in threads), "a request hung"
    if errors:
        raise errors[0]
    return [response for response in responses if response is not None]


def new_email() -> str:
    return f"race-{uuid.uuid4().hex[:12]}@example.com"


def sign_in_code(http: httpx.Client, email: str) -> str:
    """Send a sign-in code to `email`; the code as the user types it (OTP + nonce), read from the outbox."""
    sent = http.post(
        "/api/v1/auth/otp/send-sign-in-code", headers=client_headers(), json={"email": email, "callback_url": CALLBACK}
    )
    assert sent.status_code == 200, sent.text
    outbox = http.get("/api/v1/emails/outbox", headers=server_headers(), params={"to": email}).json()["items"]
    otp = re.search(r"Your code is ([0-9A-Z]{6})$", outbox[0]["subject"])
    assert otp is not None, outbox[0]["subject"]
    return otp.group(1) + sent.json()["nonce"]


def sign_in(http: httpx.Client, code: str) -> httpx.Response:
    return http.post("/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": code})


def test_twenty_concurrent_sign_ins_with_one_code_give_exactly_one_session(http: httpx.Client) -> None:
    email = new_email()
    code = sign_in_code(http, email)
    sign_in_call = Call("POST", "/api/v1/auth/otp/sign-in", client_headers(), {"code": code})
    responses = at_once(str(http.base_url), [sign_in_call] * 20)
    assert sorted(r.status_code for r in responses) == [200] + [409] * 19
    refused = {r.headers["x-service-known-error"] for r in responses if r.status_code == 409}
    assert refused == {"VERIFICATION_CODE_ALREADY_USED"}
    winner = next(r.json() for r in responses if r.status_code == 200)
    assert winner["is_new_user"] is True
    user = http.get(f"/api/v1/users/{winner['user_id']}", headers=server_headers()).json()
    assert (user["primary_email"], user["primary_email_verified"]) == (email, True)
    sessions = http.get("/api/v1/auth/sessions", headers=server_headers(), params={"user_id": winner["user_id"]})
    assert len(sessions.json()["items"]) == 1
    listed = http.get("/api/v1/users", headers=server_headers(), params={"query": email}).json()["items"]
    assert [u["id"] for u in listed] == [winner["user_id"]]  # one user for the e-mail, not one per racer


def _create_user(http: httpx.Client, email: str, **fields: Any) -> dict[str, Any]:
    body = {"primary_email": email, "primary_email_auth_enabled": True, **fields}
    created = http.post("/api/v1/users", headers=server_headers(), json=body)
    assert created.status_code == 201, created.text
    user: dict[str, Any] = created.json()
    return user


@pytest.mark.parametrize("round_", range(5))
def test_two_users_racing_for_one_email_one_wins_and_holds_it(http: httpx.Client, round_: int) -> None:
    first, second = _create_user(http, new_email()), _create_user(http, new_email())
    wanted = new_email()

    def claim(user: dict[str, Any]) -> Call:
        # Verified too, so that the winner can sign in with it below.
        body = {"primary_email": wanted, "primary_email_verified": True}
        return Call("PATCH", f"/api/v1/users/{user['id']}", server_headers(), body)

    responses = at_once(str(http.base_url), [claim(first), claim(second)])
    assert sorted(r.status_code for r in responses) == [200, 409]
    lost = next(r for r in responses if r.status_code == 409)
    assert lost.headers["x-service-known-error"] == "USER_EMAIL_ALREADY_EXISTS"
    assert lost.json()["details"]["email"] == wanted
    winner, loser = (first, second) if responses[0].status_code == 200 else (second, first)
    assert responses[0 if winner is first else 1].json()["primary_email"] == wanted

    stored_winner = http.get(f"/api/v1/users/{winner['id']}", headers=server_headers()).json()
    stored_loser = http.get(f"/api/v1/users/{loser['id']}", headers=server_headers()).json()
    assert [stored_winner[f] for f in ("primary_email", "primary_email_verified", "primary_email_auth_enabled")] == [
        wanted,
        True,
        True,
    ]
    assert stored_loser["primary_email"] == loser["primary_email"] != wanted  # nothing of the lost write stayed
    # The e-mail index agrees: signing in with the e-mail is the winner's sign-in, not a new user's.
    signed_in = sign_in(http, sign_in_code(http, wanted))
    assert signed_in.status_code == 200, signed_in.text
    assert (signed_in.json()["user_id"], signed_in.json()["is_new_user"]) == (winner["id"], False)
    # The winner's old address stays theirs, a non-primary auth channel (as in the original): not free for another.
    body = {"primary_email": winner["primary_email"], "primary_email_auth_enabled": True}
    assert http.post("/api/v1/users", headers=server_headers(), json=body).status_code == 409


FAMILIES = ("display_name", "client_metadata", "server_metadata", "client_read_only_metadata")
WRITERS = 50


def _family(writer: int) -> str:
    return FAMILIES[writer % len(FAMILIES)]


def _value(writer: int) -> Any:
    """The value only writer `writer` sends (for its family)."""
    family = _family(writer)
    return f"name by writer {writer}" if family == "display_name" else {"writer": writer, "family": family}


@dataclass
class Write:
    """One acknowledged PATCH: who sent it, when (test clock), and the user as that write left it."""

    writer: int
    sent: float
    acked: float
    after: dict[str, Any]

    @property
    def family(self) -> str:
        return _family(self.writer)


@pytest.mark.parametrize("wave", [WRITERS, 10], ids=["all-at-once", "waves-of-10"])
def test_fifty_concurrent_patches_of_different_fields_lose_no_write(http: httpx.Client, wave: int) -> None:
    """Writer i PATCHes one top-level field, FAMILIES[i % 4], with its own value: 50 writers, each in its own
    thread with its own client, every request open (body held back) before the first is released. Released all at
    once, or in waves: a wave once every write of the wave before was acknowledged. PATCH reads the user, then
    writes only the fields it was given, atomically, and answers with the user as that write left it.

    Real time orders writes of different waves: if A was acknowledged before B was sent, A came first. A field may
    therefore never show a value older than one acknowledged before the reader was sent: whatever a write of field
    g answers about field f, and whatever f holds at the end, is the value of an f-writer that no acknowledged
    f-writer is known to have followed. A PATCH that wrote back a stale copy of a field it was not given (a lost
    update) breaks this (checked: a store that read the user and wrote it back whole failed it every time). At the
    end every field holds the value of its last acknowledged writer, and the user is exactly what the last write
    applied answered."""
    user = _create_user(http, new_email(), display_name="before", client_metadata={"writer": None})
    barrier = threading.Barrier(WRITERS + 1)
    gates = [threading.Event() for _ in range(WRITERS // wave + 1)]
    sent_at = [0.0] * WRITERS
    acknowledged = [0] * len(gates)
    lock = threading.Lock()
    writes: list[Write | None] = [None] * WRITERS
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            with httpx.Client(base_url=str(http.base_url), timeout=TIMEOUT_S) as own:
                own.get("/api/v1")  # connected before the start
                barrier.wait(timeout=TIMEOUT_S)
                mine = writer // wave
                call = Call("PATCH", f"/api/v1/users/{user['id']}", server_headers(), {_family(writer): _value(writer)})
                response = send_held(own, call, gates[mine], lambda: sent_at.__setitem__(writer, time.monotonic()))
                acked = time.monotonic()
                assert response.status_code == 200, response.text
                writes[writer] = Write(writer, sent_at[writer], acked, {f: response.json()[f] for f in FAMILIES})
                with lock:
                    acknowledged[mine] += 1
                    if acknowledged[mine] == wave:
                        gates[mine + 1].set()
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)
            for gate in gates:  # let the others finish rather than wait for a wave that never ends
                gate.set()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    barrier.wait(timeout=TIMEOUT_S)
    time.sleep(0.2)  # every head and partial body is in the service's hands
    gates[0].set()
    for thread in threads:
        thread.join(timeout=TIMEOUT_S * 2)
    assert not any(thread.is_alive() for thread in threads), "a request hung"
    if errors:
        raise errors[0]
    done = [w for w in writes if w is not None]
    assert len(done) == WRITERS
    final = http.get(f"/api/v1/users/{user['id']}", headers=server_headers()).json()

    def writer_of(family: str, value: Any) -> Write | None:
        """The write whose value `value` is (None: the value from before every write)."""
        return next((w for w in done if w.family == family and _value(w.writer) == value), None)

    def overtaken(family: str, seen: Write | None, read_sent: float) -> list[int]:
        """f-writers acknowledged before a read was sent that are known to have come after `seen`: a read showing
        `seen`'s value must find none."""
        return [
            w.writer
            for w in done
            if w.family == family and w.acked < read_sent and (seen is None or seen.acked < w.sent)
        ]

    for w in done:
        assert w.after[w.family] == _value(w.writer)
        for family in FAMILIES:
            seen = writer_of(family, w.after[family])
            assert not overtaken(family, seen, w.sent), (
                f"writer {w.writer} ({w.family}) answered {family} = {w.after[family]!r}, older than writers "
                f"{overtaken(family, seen, w.sent)}, acknowledged before it was sent: a lost update"
            )
    for family in FAMILIES:
        seen = writer_of(family, final[family])
        assert seen is not None, f"{family} lost every write: {final[family]!r}"
        assert not overtaken(family, seen, float("inf")), f"{family} ends at an overwritten value {final[family]!r}"
        last = max((w for w in done if w.family == family), key=lambda w: w.acked)
        if all(w.acked < last.sent for w in done if w.family == family and w is not last):
            assert final[family] == _value(last.writer)  # the last one was alone at the end: it is what stays
    # The last write applied answered with the user exactly as it ended up.
    assert {f: final[f] for f in FAMILIES} in [w.after for w in done]
    # Fields nobody wrote are untouched.
    assert (final["primary_email"], final["primary_email_auth_enabled"]) == (user["primary_email"], True)
