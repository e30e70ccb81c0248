"""Redis round trips of the benchmark's operations, counted as the benchmark counts them (`benchmarks.inproc`: every
command outside a pipeline, scripts included, and every pipeline, is one), on a `RedisStore` driven in process by
the production-mode service. What the benchmark's roundtrips section prints, held here so a change that adds a trip
fails a test."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from backends.redis import RedisStore
from benchmarks.inproc import Driver, counting_client
from tests.processes import RedisServer

pytestmark = [pytest.mark.redis]


def _driver(redis_server: RedisServer, *, rate_limits: bool) -> tuple[Driver, Any]:
    client = counting_client(redis_server.url)
    store = RedisStore(client, namespace=f"trips-{uuid.uuid4().hex}:")  # a namespace of its own: no flush
    return Driver(store, rate_limits=rate_limits), client


def _trips(client: Any, operation: Callable[[], Any]) -> tuple[list[str], Any]:
    client.trips.clear()
    value = operation()
    return list(client.trips), value


@pytest.mark.parametrize("rate_limits", [False, True], ids=["limits-off", "limits-on"])
def test_an_otp_sign_in_of_a_returning_user_takes_three_round_trips_seven_with_rate_limits_on(
    redis_server: RedisServer, rate_limits: bool
) -> None:
    driver, client = _driver(redis_server, rate_limits=rate_limits)
    email = f"trips-{uuid.uuid4().hex[:8]}@example.com"
    send = driver.otp_send(email)
    driver.otp_sign_in(send())  # the first signs the address up; the second is a returning user's

    sent, code = _trips(client, send)
    signed, _ = _trips(client, lambda: driver.otp_sign_in(code))

    if not rate_limits:
        # The code's commit and the read of the address's holder go together, one pipeline (`store_sign_in_code`);
        # signing in is the code's attempt (which reads the holder too), then one commit.
        assert len(sent) == 1, sent
        assert sent[0].startswith("pipeline["), sent
        assert len(signed) == 2, signed
    else:
        # The request's counters; the address's counter (alone: a request over the limit writes nothing); the code
        # and the holder; the address's count once the mail goes out. Signing in: the counters, then as above.
        assert len(sent) == 4, sent
        assert len(signed) == 3, signed


def test_get_and_patch_of_me_and_a_refresh_take_one_round_trip_each_with_rate_limits_off(
    redis_server: RedisServer,
) -> None:
    driver, client = _driver(redis_server, rate_limits=False)
    ops = driver.operations(driver.new_user(f"trips-{uuid.uuid4().hex[:8]}@example.com"))
    for name in ("get_me", "patch_me", "server_patch", "refresh"):
        ops[name]()  # caches warm, as the benchmark counts its second request
        trips, _ = _trips(client, ops[name])
        assert len(trips) == 1, (name, trips)
