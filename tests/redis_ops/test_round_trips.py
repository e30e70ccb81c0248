"""Redis round trips of the benchmark's operations, counted as the benchmark counts them (`benchmarks.inproc`: every
command outside a pipeline, scripts included, and every pipeline, is one), on a `RedisStore` driven in process by
the production-mode service (and by the same service in dev mode, where the clock override is read on every
request). What the benchmark's roundtrips section prints, held here so a change that adds a trip fails a test."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from backends.redis import RedisStore
from backends.redis.plan import admitted, admitted_sources
from benchmarks.common import admin_headers, client_headers
from benchmarks.inproc import Driver, counting_client
from identity_proto.effects import SetClockOverride
from identity_proto.records import ClockOverride
from tests.processes import RedisServer

pytestmark = [pytest.mark.redis]

#: (rate limits, dev mode) of each run: the shipped default is rate limits on, production mode.
MODES = [(False, False), (True, False), (False, True), (True, True)]
MODE_IDS = ["limits-off", "limits-on", "limits-off-dev", "limits-on-dev"]

#: Round trips by operation and rate limits (off, on), in either mode. With rate limits on, a request whose first
#: trip writes takes its counters with that write (`Admit`: the write's script behind them, run only when they are
#: within their limits); in dev mode the clock override is looked at in that same trip (a read: with the reads; a
#: write: in the `Admit`, which writes nothing when an override is set; each write of a first `Together` so).
#: Dev mode adds none.
TRIPS: dict[str, tuple[int, int]] = {
    "get_me": (1, 1),
    "patch_me": (1, 1),
    "server_patch": (1, 1),
    "refresh": (1, 1),
    "otp_send": (1, 3),
    "otp_sign_in": (2, 2),
    "otp_sign_in_default_permissions": (2, 2),
}


def _admitted(name: str) -> str:
    """How the counting client names a run of script `name` behind an `Admit`'s prelude."""
    source = admitted_sources()[admitted(name)]
    return f"EVALSHA {hashlib.sha1(source.encode()).hexdigest()[:8]}"  # noqa: S324 - the script's id, as Redis names it


def _driver(redis_server: RedisServer, *, rate_limits: bool, dev: bool = False) -> tuple[Driver, Any]:
    client = counting_client(redis_server.url)
    store = RedisStore(client, namespace=f"trips-{uuid.uuid4().hex}:")  # a namespace of its own: no flush
    return Driver(store, rate_limits=rate_limits, dev_mode=dev), client


def _trips(client: Any, operation: Callable[[], Any]) -> tuple[list[str], Any]:
    client.trips.clear()
    value = operation()
    return list(client.trips), value


def _expected(name: str, rate_limits: bool, dev: bool) -> int:
    return TRIPS[name][rate_limits]


def _otp_trips(driver: Driver, client: Any) -> tuple[list[str], list[str]]:
    email = f"trips-{uuid.uuid4().hex[:8]}@example.com"
    send = driver.otp_send(email)
    driver.otp_sign_in(send())  # the first signs the address up; the others are a returning user's
    driver.otp_sign_in(send())  # once before it is counted: Redis has then loaded every script they run
    sent, code = _trips(client, send)
    signed, _ = _trips(client, lambda: driver.otp_sign_in(code))
    return sent, signed


@pytest.mark.parametrize(("rate_limits", "dev"), MODES, ids=MODE_IDS)
def test_an_otp_sign_in_of_a_returning_user_takes_its_counted_round_trips(
    redis_server: RedisServer, rate_limits: bool, dev: bool
) -> None:
    driver, client = _driver(redis_server, rate_limits=rate_limits, dev=dev)
    sent, signed = _otp_trips(driver, client)
    # Without limits, the code's commit and the read of the address's holder go together, one pipeline
    # (`store_sign_in_code`); signing in is the code's attempt (which reads the holder too), then one commit. With
    # them: the request's counters and the address's counter (looked at, not counted: a read) in one pipeline; the
    # code and the holder; the address's count once the mail goes out. Signing in: the code's attempt behind the
    # request's counters (one script: a request over a limit does not spend the code), then one commit.
    assert len(sent) == _expected("otp_send", rate_limits, dev), sent
    assert len(signed) == _expected("otp_sign_in", rate_limits, dev), signed
    if not dev:
        assert sent[-1 if not rate_limits else 1].startswith("pipeline[EVALSHA "), sent
    if dev and rate_limits:  # the override rides with the first pipeline
        assert sent[0].startswith("pipeline[GET, "), sent
    if dev or rate_limits:  # the attempt behind the counters and the override
        assert signed[0] == _admitted("attempt_code"), signed


@pytest.mark.parametrize(("rate_limits", "dev"), MODES, ids=MODE_IDS)
def test_an_otp_sign_in_with_default_permissions_takes_as_many_round_trips(
    redis_server: RedisServer, rate_limits: bool, dev: bool
) -> None:
    driver, client = _driver(redis_server, rate_limits=rate_limits, dev=dev)
    driver.call("POST", "/api/v1/project-permission-definitions", admin_headers(), {"id": "read"}, status=201)
    driver.call(
        "PATCH", "/api/v1/projects/current", admin_headers(), {"config": {"user_default_permissions": ["read"]}}
    )
    sent, signed = _otp_trips(driver, client)
    assert len(sent) == _expected("otp_send", rate_limits, dev), sent
    assert len(signed) == _expected("otp_sign_in_default_permissions", rate_limits, dev), signed
    # A sign-up (the user, its permissions, its session: one commit) takes as many as a returning user's sign-in.
    send = driver.otp_send(f"trips-new-{uuid.uuid4().hex[:8]}@example.com")
    code = send()
    signed_up, _ = _trips(client, lambda: driver.otp_sign_in(code))
    assert len(signed_up) == _expected("otp_sign_in_default_permissions", rate_limits, dev), signed_up


@pytest.mark.parametrize(("rate_limits", "dev"), MODES, ids=MODE_IDS)
def test_get_and_patch_of_me_and_a_refresh_take_their_counted_round_trips(
    redis_server: RedisServer, rate_limits: bool, dev: bool
) -> None:
    driver, client = _driver(redis_server, rate_limits=rate_limits, dev=dev)
    ops = driver.operations(driver.new_user(f"trips-{uuid.uuid4().hex[:8]}@example.com"))
    for name in ("get_me", "patch_me", "server_patch", "refresh"):
        ops[name]()  # caches warm, as the benchmark counts its second request
        trips, _ = _trips(client, ops[name])
        assert len(trips) == _expected(name, rate_limits, dev), (name, trips)
        if name == "get_me" and dev and rate_limits:
            assert trips[0].startswith("pipeline[GET, "), (name, trips)
        if name != "get_me" and (dev or rate_limits):  # a write: its script behind the counters and the override
            script = "use_refresh_token" if name == "refresh" else "commit"
            assert trips == [_admitted(script)], (name, trips)


def test_with_the_clock_set_a_request_is_counted_at_the_set_time_only(redis_server: RedisServer) -> None:
    """Dev mode, rate limits on, a frozen clock: the override read with the first trip is set, so the counts that
    trip took in the host clock's windows are taken back and the request is answered again at the set time."""
    driver, client = _driver(redis_server, rate_limits=True, dev=True)
    user = driver.new_user(f"trips-{uuid.uuid4().hex[:8]}@example.com")
    # Five minutes ahead: the access token is still valid there, and the windows are others.
    frozen = driver.clock() + 5 * 60_000
    driver.store.apply(SetClockOverride(ClockOverride(frozen_ms=frozen)))
    counters_before = _counters(driver, client)
    trips, me = _trips(client, lambda: driver.call("GET", "/api/v1/users/me", client_headers(user["access_token"])))
    assert me["id"] == user["id"]
    # The speculative trip (override, counts, reads); the counts taken back; then the request again at the set time
    # (here the project read again, as the cache judges freshness at the set time, then counts and reads), as it
    # went when the override was read alone first: only with the clock set does reading it along cost a trip.
    assert trips[0].startswith("pipeline[GET, INCRBY"), trips
    assert trips[1] == "pipeline[INCRBY, PEXPIRE, INCRBY, PEXPIRE]", trips
    assert len(trips) == 4, trips
    window = f":{frozen - frozen % 60_000}}}"
    changed = {key: value for key, value in _counters(driver, client).items() if counters_before.get(key) != value}
    # ip and project: counted once each at the set time; at the host's time, taken back to nothing
    assert sorted(value for key, value in changed.items() if key.endswith(window)) == [1, 1], changed
    assert sorted(value for key, value in changed.items() if not key.endswith(window)) == [0, 0], changed


def _counters(driver: Driver, client: Any) -> dict[str, int]:
    namespace = driver.store.keys.namespace
    found = {}
    for key in client.scan_iter(match=f"{namespace}{{rl:*"):
        name = key.decode() if isinstance(key, bytes) else key
        found[name] = int(client.get(name))
    return found


def test_rate_limits_hold_on_a_clock_set_days_in_the_past(redis_server: RedisServer) -> None:
    """Dev mode on Redis with the clock set two days back: the counters are given a time to live (the rest of their
    window by the core's clock), not an instant that Redis's own clock has long passed, so they count and limit."""
    driver, _client = _driver(redis_server, rate_limits=True, dev=True)
    driver.call(
        "PATCH",
        "/api/v1/projects/current",
        admin_headers(),
        {"config": {"rate_limits": {"project": {"limit": 3, "window_seconds": 60}}}},
    )
    past = driver.clock() - 2 * 24 * 3_600_000
    driver.store.apply(SetClockOverride(ClockOverride(frozen_ms=past)))
    headers = client_headers()
    statuses = [driver.handle(driver.request("GET", "/api/v1/projects/current", headers)).status for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429], statuses
