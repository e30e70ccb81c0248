"""Redis dies under load and comes back: the service answers 2xx or 503 STORAGE_UNAVAILABLE, never anything else,
never hangs, recovers by itself, and loses no write it acknowledged.

A redis-server of this test's own (AOF on, fsync on every write: `--appendonly yes --appendfsync always`) and a
Hypercorn on it. A few threads create users as fast as they can (server `POST /api/v1/users`, each with its own
display name) and record every answer. Mid-load the redis-server is SIGKILLed (by its Popen handle, no shutdown
save), then started again on the same port and directory: it reloads its AOF, and Hypercorn, never restarted, must
serve 2xx again. At the end every user whose creation was acknowledged must be there, under its name: with
fsync always, Redis replies only after the write is on disk. The dev project too (in dev mode a vanished project
would answer CURRENT_PROJECT_NOT_FOUND; with AOF it must not).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import Server, start_hypercorn, stop_server
from tests.processes import stop
from tests.redis_ops.servers import RedisProcess, start_redis
from tests.support import server_headers

pytestmark = [pytest.mark.e2e, pytest.mark.redis, pytest.mark.slow]

THREADS = 4
#: The clients' timeout: a request that takes longer counts as hung.
CLIENT_TIMEOUT_S = 8.0
#: How long each phase lasts: up, down (killed), up again.
PHASE_S = 1.5
#: How long the service may take to serve 2xx again once redis-server answers PING.
RECOVERY_S = 10.0


@dataclass(frozen=True)
class Outcome:
    """One request of the load: what it was and what came back (status None: no HTTP answer at all)."""

    name: str
    sent: float
    elapsed: float
    status: int | None
    known_error: str | None
    body: str
    user_id: str | None = None
    transport_error: str | None = None


class Load:
    """THREADS threads creating users until stopped; every answer recorded."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(THREADS)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=CLIENT_TIMEOUT_S * 2)
        assert not any(thread.is_alive() for thread in self._threads), "a load thread hung"

    def acknowledged_since(self, moment: float) -> int:
        with self._lock:
            return sum(1 for o in self.outcomes if o.user_id is not None and o.sent >= moment)

    def wait_for_acknowledgements(self, count: int, since: float, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.acknowledged_since(since) < count:
            assert time.monotonic() < deadline, f"fewer than {count} users created within {timeout_s} s"
            time.sleep(0.02)

    def _run(self, thread: int) -> None:
        with httpx.Client(base_url=self.base_url, timeout=CLIENT_TIMEOUT_S) as http:
            n = 0
            while not self._stop.is_set():
                n += 1
                name = f"load {thread}-{n}"
                sent = time.monotonic()
                try:
                    response = http.post("/api/v1/users", headers=server_headers(), json={"display_name": name})
                except httpx.HTTPError as exc:
                    outcome = Outcome(name, sent, time.monotonic() - sent, None, None, "", None, type(exc).__name__)
                else:
                    created = response.json() if response.status_code == 201 else {}
                    outcome = Outcome(
                        name,
                        sent,
                        time.monotonic() - sent,
                        response.status_code,
                        response.headers.get("x-service-known-error"),
                        response.text,
                        created.get("id"),
                    )
                with self._lock:
                    self.outcomes.append(outcome)


@pytest.fixture
def persistent_redis(tmp_path: Path) -> Iterator[RedisProcess]:
    server = start_redis(tmp_path / "redis", "--appendonly", "yes", "--appendfsync", "always", "--save", "")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def service(persistent_redis: RedisProcess) -> Iterator[Server]:
    running = start_hypercorn(
        {"IDENTITY_BACKEND": "redis", "IDENTITY_REDIS_URL": persistent_redis.url, "IDENTITY_RATE_LIMITS": "off"}
    )
    try:
        yield running
    finally:
        stop_server(running)


def test_redis_killed_under_load_then_back_from_its_aof(
    persistent_redis: RedisProcess, service: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    with Load(service.base_url) as load:
        load.wait_for_acknowledgements(20, since=started, timeout_s=RECOVERY_S)
        time.sleep(PHASE_S)
        persistent_redis.kill()
        killed = time.monotonic()
        time.sleep(PHASE_S)
        restarting = time.monotonic()
        persistent_redis.restart()  # same port, same directory: the AOF is reloaded
        restarted = time.monotonic()
        load.wait_for_acknowledgements(20, since=restarted, timeout_s=RECOVERY_S)
        time.sleep(PHASE_S)
    outcomes = load.outcomes

    # Only 2xx or 503 STORAGE_UNAVAILABLE, each answered within the client's timeout.
    others = [o for o in outcomes if o.status not in {201, 503}]
    assert not others, f"{len(others)} answers neither 201 nor 503, e.g. {others[:3]}"
    unavailable = [o for o in outcomes if o.status == 503]
    for o in unavailable:
        assert o.known_error == "STORAGE_UNAVAILABLE", o
        assert o.body.startswith('{"code":"STORAGE_UNAVAILABLE"'), o.body
        assert "Traceback" not in o.body
        assert str(persistent_redis.port) not in o.body  # nothing about where the store lives
    assert max(o.elapsed for o in outcomes) < CLIENT_TIMEOUT_S
    # Each phase as expected: 201s before the kill, 503s while Redis is down, 201s after it came back.
    assert any(o.status == 201 and o.sent + o.elapsed < killed for o in outcomes)
    down = [o for o in outcomes if killed + 0.1 <= o.sent and o.sent + o.elapsed < restarting]
    assert down, "no request was sent while Redis was down"
    assert {o.status for o in down} == {503}, "Redis was down, yet something else than 503 came back"
    assert sum(1 for o in outcomes if o.status == 201 and o.sent >= restarted) >= 20

    # Every acknowledged user is there, with its own name.
    acknowledged = [o for o in outcomes if o.user_id is not None]
    with httpx.Client(base_url=service.base_url, timeout=CLIENT_TIMEOUT_S) as http:

        def stored_name(user_id: str) -> tuple[int, str | None]:
            found = http.get(f"/api/v1/users/{user_id}", headers=server_headers())
            return found.status_code, found.json().get("display_name")

        with ThreadPoolExecutor(THREADS) as pool:
            stored = list(pool.map(stored_name, [o.user_id for o in acknowledged if o.user_id is not None]))
        missing = [(o.name, found) for o, found in zip(acknowledged, stored, strict=True) if found != (200, o.name)]
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged users lost, e.g. {missing[:3]}"
        project = http.get("/api/v1/projects/current", headers=server_headers())
        assert project.status_code == 200, project.text  # the dev project came back with the AOF too
    # The delivery loop, whose passes fail while Redis is down: at most one line when the outage began and one when
    # the store answered again, no traceback (a pass failing for another reason still logs one). Under load the
    # loop defers its passes to requests, and may not run one during the outage at all: then neither line.
    stop(service.process)
    log = service.process.stderr.read().decode() if service.process.stderr else ""
    webhook_lines = [line for line in log.splitlines() if "webhook" in line]
    paused = sum("webhook deliveries paused" in line for line in webhook_lines)
    assert paused <= 1, webhook_lines
    assert sum("webhook deliveries resumed" in line for line in webhook_lines) == paused, webhook_lines
    assert not any("delivery pass failed" in line for line in webhook_lines), webhook_lines
    assert "Traceback" not in log, log[-3000:]
    with capsys.disabled():
        print(
            f"\nfault run: {len(outcomes)} requests, {len(acknowledged)} users acknowledged and all found after the "
            f"restart, {len(unavailable)} answered 503 while Redis was down ({time.monotonic() - started:.1f} s)"
        )
