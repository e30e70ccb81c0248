"""A bounded soak: a real Hypercorn on each backend (Redis, memory), concurrent clients for a fixed time.

Each client thread owns a few people (e-mail addresses) and loops, for `SOAK_SECONDS` (default 10), over a mix of:
sign-in by code (send the code, read it from the outbox, sign in), PATCHes of its users' display names and metadata
(as the user, and as the server), reads, access-token refreshes and sign-outs. Every PATCH answered 200 is recorded
as an acknowledged write; only the owning thread writes its users, so the last acknowledged value of each field is
what the store must hold at the end.

At the end: every acknowledged write is read back, no response was a 5xx (nor any other unexpected status, nor a
transport error), and the resident memory of the process that serves (Hypercorn's worker) did not keep growing:
on Redis, RSS at the end is within 50% of RSS after the first third (the warm-up); on the memory store, where
everything the service keeps is in that process, within `MEMORY_RSS_GROWTH` of it plus `MEMORY_RSS_SLACK_KIB`, and
its slope over the last two thirds (least squares) is printed in MiB per minute.

    SOAK_SECONDS=300 SOAK_CLIENTS=16 .venv/bin/pytest tests/hardening/test_soak.py -s
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.hardening._results import write_results
from tests.processes import RedisServer, children
from tests.support import client_headers, server_headers

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "10"))
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "8"))
PEOPLE_PER_CLIENT = int(os.environ.get("SOAK_PEOPLE_PER_CLIENT", "3"))
#: A Redis database of our own on the session's redis-server, emptied first: other suites use database 0.
REDIS_DB = 7
CALLBACK = "http://localhost:3000/handler/magic-link-callback"
_OTP = re.compile(r"Your code is ([0-9A-Z]{6})$")
_LINK_CODE = re.compile(r"[?&]code=([0-9a-z]{45})")
MAX_RSS_GROWTH = 0.5
#: The memory store's bound: RSS at the end at most this much above RSS after warm-up, plus a fixed slack for the
#: allocator's noise (arenas, the interpreter's free lists) on a short run.
MEMORY_RSS_GROWTH = 0.10
MEMORY_RSS_SLACK_KIB = 4096


# ----------------------------------------------------------------------------------------------------------------
# The process that serves, and its memory


def serving_pid(root: int) -> int:
    """Hypercorn with --workers 1 spawns its worker (multiprocessing spawn) next to a resource tracker: the worker
    is the child whose command line runs `spawn_main`; without one, the root process serves."""
    for child in children(root):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            return child
    return root


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


# ----------------------------------------------------------------------------------------------------------------
# The clients


@dataclass
class Person:
    email: str
    user_id: str | None = None
    access_token: str | None = None
    refresh_token: str | None = None
    #: field -> last acknowledged value
    acknowledged: dict[str, Any] = field(default_factory=dict)


@dataclass
class Figures:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: Counter[str] = field(default_factory=Counter)  # by operation
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    transport_errors: list[str] = field(default_factory=list)
    stale_reads: list[str] = field(default_factory=list)
    acknowledged_writes: int = 0


class Client:
    def __init__(self, index: int, base_url: str, figures: Figures, deadline: float) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=10.0)
        self.figures = figures
        self.deadline = deadline
        self.random = random.Random(index)
        self.people = [Person(f"soak-{index}-{n}@example.com") for n in range(PEOPLE_PER_CLIENT)]
        self.index = index

    def request(
        self, operation: str, method: str, path: str, expect: int = 200, **kwargs: Any
    ) -> httpx.Response | None:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            with self.figures.lock:
                self.figures.transport_errors.append(f"{operation}: {type(exc).__name__}: {exc}")
            return None
        with self.figures.lock:
            self.figures.requests[operation] += 1
            self.figures.statuses[response.status_code] += 1
            if response.status_code >= 500:
                self.figures.server_errors.append(
                    f"{operation} {method} {path} -> {response.status_code} {response.text[:300]}"
                )
            elif response.status_code != expect:
                self.figures.unexpected.append(
                    f"{operation} {method} {path} -> {response.status_code} {response.text[:300]}"
                )
        return response if response.status_code == expect else None

    def sign_in(self, person: Person) -> None:
        sent = self.request(
            "send code",
            "POST",
            "/api/v1/auth/otp/send-sign-in-code",
            headers=client_headers(),
            json={"email": person.email, "callback_url": CALLBACK},
        )
        if sent is None:
            return
        nonce = sent.json()["nonce"]
        outbox = self.request(
            "read outbox", "GET", "/api/v1/emails/outbox", headers=server_headers(), params={"to": person.email}
        )
        if outbox is None:
            return
        for mail in outbox.json()["items"]:
            otp, link = _OTP.search(mail["subject"]), _LINK_CODE.search(mail["text"])
            if otp and link and link.group(1)[6:] == nonce:
                code = otp.group(1) + nonce
                break
        else:
            with self.figures.lock:
                self.figures.unexpected.append(f"no mail with nonce {nonce} for {person.email}")
            return
        signed = self.request(
            "sign in", "POST", "/api/v1/auth/otp/sign-in", headers=client_headers(), json={"code": code}
        )
        if signed is None:
            return
        tokens = signed.json()
        if person.user_id is not None and tokens["user_id"] != person.user_id:
            with self.figures.lock:
                self.figures.unexpected.append(f"{person.email} signed in as {tokens['user_id']}, was {person.user_id}")
        person.user_id = tokens["user_id"]
        person.access_token, person.refresh_token = tokens["access_token"], tokens["refresh_token"]

    def check_read(self, person: Person, response: httpx.Response | None, *, client: bool) -> None:
        """Read your writes: only this thread writes this user, so a read shows its last acknowledged values."""
        if response is None:
            return
        user = response.json()
        for name, value in person.acknowledged.items():
            if client and name == "server_metadata":  # a client never sees it
                continue
            if user.get(name) != value:
                with self.figures.lock:
                    self.figures.stale_reads.append(
                        f"{person.email} {name}: acknowledged {value!r}, read {user.get(name)!r}"
                    )

    def step(self) -> None:
        person = self.random.choice(self.people)
        if person.access_token is None:
            self.sign_in(person)
            return
        assert person.user_id is not None
        me = client_headers(**{"x-service-access-token": person.access_token})
        roll = self.random.random()
        tag = f"{self.index}-{self.random.randrange(10**9)}"
        if roll < 0.25:  # the user writes
            body: dict[str, Any] = self.random.choice(
                [{"display_name": f"name {tag}"}, {"client_metadata": {"tag": tag, "n": [1, 2, 3]}}]
            )
            if self.request("patch me", "PATCH", "/api/v1/users/me", headers=me, json=body) is not None:
                person.acknowledged.update(body)
                with self.figures.lock:
                    self.figures.acknowledged_writes += 1
        elif roll < 0.40:  # the server writes
            body = self.random.choice(
                [
                    {"server_metadata": {"tag": tag}},
                    {"display_name": f"server name {tag}"},
                    {"client_read_only_metadata": tag},
                ]
            )
            path = f"/api/v1/users/{person.user_id}"
            if self.request("patch user", "PATCH", path, headers=server_headers(), json=body) is not None:
                person.acknowledged.update(body)
                with self.figures.lock:
                    self.figures.acknowledged_writes += 1
        elif roll < 0.65:
            self.check_read(person, self.request("get me", "GET", "/api/v1/users/me", headers=me), client=True)
        elif roll < 0.75:
            path = f"/api/v1/users/{person.user_id}"
            self.check_read(person, self.request("get user", "GET", path, headers=server_headers()), client=False)
        elif roll < 0.80:
            self.request("get project", "GET", "/api/v1/projects/current", headers=client_headers())
        elif roll < 0.93:
            refreshed = self.request(
                "refresh",
                "POST",
                "/api/v1/auth/sessions/current/refresh",
                headers=client_headers(**{"x-service-refresh-token": person.refresh_token or ""}),
            )
            if refreshed is not None:
                person.access_token = refreshed.json()["access_token"]
        else:
            if self.request("sign out", "DELETE", "/api/v1/auth/sessions/current", headers=me) is not None:
                person.access_token = person.refresh_token = None

    def run(self) -> None:
        try:
            while time.monotonic() < self.deadline:
                self.step()
        finally:
            self.http.close()


# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture
def redis_server_soak(redis_server: RedisServer) -> RedisServer:
    client = redis.Redis(host=redis_server.host, port=redis_server.port, db=REDIS_DB)
    try:
        client.flushdb()
    finally:
        client.close()
    return redis_server


def slope_mib_per_minute(samples: list[tuple[float, int]]) -> float:
    """The least-squares slope of RSS (KiB) over time (s), in MiB per minute."""
    if len(samples) < 2:
        return 0.0
    mean_t = sum(at for at, _ in samples) / len(samples)
    mean_r = sum(rss for _, rss in samples) / len(samples)
    var = sum((at - mean_t) ** 2 for at, _ in samples)
    cov = sum((at - mean_t) * (rss - mean_r) for at, rss in samples)
    return 0.0 if var == 0 else cov / var * 60 / 1024


def soak(env: dict[str, str], results_name: str) -> dict[str, Any]:
    """Run the soak against a Hypercorn started with `env`; assert what every backend must hold; return the figures
    (also written to `results/<name>.json`)."""
    server: Server = start_hypercorn(env)
    try:
        worker = serving_pid(server.process.pid)
        figures = Figures()
        started = time.monotonic()
        deadline = started + SOAK_SECONDS
        clients = [Client(i, server.base_url, figures, deadline) for i in range(CLIENTS)]
        threads = [threading.Thread(target=c.run, name=f"soak-{c.index}", daemon=True) for c in clients]
        rss_start = rss_kib(worker)
        for thread in threads:
            thread.start()
        samples: list[tuple[float, int]] = []
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline + 30:
            samples.append((time.monotonic() - started, rss_kib(worker)))
            time.sleep(0.25)
        for thread in threads:
            thread.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "a soak client did not stop"
        rss_end = rss_kib(worker)
        warm = [rss for at, rss in samples if at >= SOAK_SECONDS / 3] or [rss_end]
        rss_after_warm_up = warm[0]

        # Every acknowledged write, read back.
        lost: list[str] = []
        checked = 0
        with httpx.Client(base_url=server.base_url, timeout=10.0) as http:
            for client in clients:
                for person in client.people:
                    if person.user_id is None or not person.acknowledged:
                        continue
                    user = http.get(f"/api/v1/users/{person.user_id}", headers=server_headers())
                    assert user.status_code == 200, user.text
                    for name, value in person.acknowledged.items():
                        checked += 1
                        if user.json().get(name) != value:
                            lost.append(
                                f"{person.email} {name}: acknowledged {value!r}, stored {user.json().get(name)!r}"
                            )
    finally:
        stop_server(server)

    total = sum(figures.requests.values())
    result = {
        "seconds": SOAK_SECONDS,
        "clients": CLIENTS,
        "requests": total,
        "requests_per_second": round(total / SOAK_SECONDS, 1),
        "requests_by_operation": dict(figures.requests),
        "statuses": {str(k): v for k, v in sorted(figures.statuses.items())},
        "server_errors_5xx": len(figures.server_errors),
        "unexpected_statuses": len(figures.unexpected),
        "transport_errors": len(figures.transport_errors),
        "acknowledged_writes": figures.acknowledged_writes,
        "fields_read_back": checked,
        "lost_writes": len(lost),
        "stale_reads": len(figures.stale_reads),
        "serving_pid_is_a_worker": worker != server.process.pid,
        "rss_kib_at_start": rss_start,
        "rss_kib_after_warm_up": rss_after_warm_up,
        "rss_kib_at_end": rss_end,
        "rss_growth_after_warm_up": round(rss_end / rss_after_warm_up - 1, 3),
        "rss_mib_per_minute_after_warm_up": round(
            slope_mib_per_minute([(at, rss) for at, rss in samples if at >= SOAK_SECONDS / 3]), 2
        ),
        # The curve, thinned to about 40 points: a bounded cache filling flattens out, a leak keeps its slope.
        "rss_kib_curve": [(round(at, 1), rss) for at, rss in samples[:: max(1, len(samples) // 40)]],
        "samples": [
            *figures.server_errors,
            *figures.unexpected,
            *figures.transport_errors,
            *lost,
            *figures.stale_reads,
        ][:30],
    }
    path = write_results(results_name, result)
    print(
        f"\n{results_name}: {total} requests in {SOAK_SECONDS:.0f} s by {CLIENTS} clients "
        f"({result['requests_per_second']}/s), "
        f"{len(figures.server_errors)} 5xx, {len(figures.unexpected)} unexpected statuses, "
        f"{len(figures.transport_errors)} transport errors, {figures.acknowledged_writes} acknowledged writes "
        f"({checked} fields read back), {len(lost)} lost, {len(figures.stale_reads)} stale reads; "
        f"RSS of pid {worker}: {rss_start} KiB at start, {rss_after_warm_up} KiB after warm-up, {rss_end} KiB at end "
        f"({result['rss_mib_per_minute_after_warm_up']} MiB/min after warm-up); "
        f"figures in {path}"
    )
    assert figures.server_errors == []
    assert figures.transport_errors == []
    assert figures.unexpected == []
    assert lost == []
    assert figures.stale_reads == []
    assert figures.acknowledged_writes > 0
    return result


@pytest.mark.timeout(max(120, int(SOAK_SECONDS * 3) + 60))
def test_soak_on_redis(redis_server_soak: RedisServer) -> None:
    url = f"redis://{redis_server_soak.host}:{redis_server_soak.port}/{REDIS_DB}"
    result = soak({"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": url}, "soak")
    assert result["rss_kib_at_end"] <= result["rss_kib_after_warm_up"] * (1 + MAX_RSS_GROWTH), result


@pytest.mark.timeout(max(120, int(SOAK_SECONDS * 3) + 60))
def test_soak_on_memory() -> None:
    """Everything the memory store keeps is in the serving process: its RSS is what the store holds. It must be
    bounded by what must be kept (users, live codes and sessions, undelivered events), not by traffic."""
    result = soak({"IDENTITY_BACKEND": "memory"}, "soak_memory")
    bound = result["rss_kib_after_warm_up"] * (1 + MEMORY_RSS_GROWTH) + MEMORY_RSS_SLACK_KIB
    assert result["rss_kib_at_end"] <= bound, result
