"""Redis down: how long requests in flight wait for their 503, and how many connections they attempt.

`python -m benchmarks.redis_down` makes an `AsyncRedisStore` (what a Hypercorn worker serves with) for a loopback
port where Redis is gone, in two ways: nothing listening (connections refused) and something accepting and
dropping connections (a Redis that is there but broken: each connect also fails its handshake). For 1, 10 and 50
concurrent requests it prints the median and slowest time to the `StorageUnavailable` each gets (the service's
503), the connections attempted, and then the same for as many requests again once the store knows Redis is down
(`runner.CircuitBreaker`). A fresh store per size: the first wave meets a closed circuit, as when Redis just went.

Baseline, in the same run: one request's 503 alone (n=1); the ratio of the slowest of n to it is the figure that
must not grow with n. Loopback only; bounded (every wave ends within the store's 2 s socket timeouts)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from typing import Any

from backends.redis import AsyncRedisStore
from identity_proto.effects import LoadProject
from identity_proto.errors import StorageUnavailable

PROJECT = LoadProject("00000000-0000-4000-8000-000000000000")
SIZES = (1, 10, 50)


class DroppingListener:
    """A loopback port where something accepts connections and closes them at once (a Redis that is there but
    broken: the worst case for clients, which connect and then fail the handshake); it counts them. Also used by
    `tests/redis_ops/test_circuit_breaker.py`."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(1024)
        self.port = self.socket.getsockname()[1]
        self.socket.settimeout(0.05)  # accept() wakes up to see `close()`
        self.accepted = 0
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self.socket.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._closing.set()
        self._thread.join(timeout=5)
        self.socket.close()


async def _wave(store: AsyncRedisStore, n: int) -> list[float]:
    async def one() -> float:
        started = time.perf_counter()
        with contextlib.suppress(StorageUnavailable):
            await store.apply(PROJECT)
        return time.perf_counter() - started

    return sorted(await asyncio.gather(*(one() for _ in range(n))))


async def _measure(kind: str) -> list[dict[str, Any]]:
    listener = DroppingListener() if kind == "dropping" else None
    if listener is not None:
        port = listener.port
    else:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
    rows = []
    try:
        for n in SIZES:
            store = AsyncRedisStore.from_url(f"redis://127.0.0.1:{port}/0")
            before = listener.accepted if listener else 0
            first = await _wave(store, n)
            middle = listener.accepted if listener else 0
            later = await _wave(store, n)
            after = listener.accepted if listener else 0
            await store.aclose()
            rows.append(
                {
                    "redis": kind,
                    "in_flight": n,
                    "median_s": first[len(first) // 2],
                    "slowest_s": first[-1],
                    "connections": middle - before if listener else None,
                    "later_slowest_s": later[-1],
                    "later_connections": after - middle if listener else None,
                }
            )
    finally:
        if listener is not None:
            listener.close()
    return rows


def main() -> None:
    import logging

    logging.getLogger("identity_service").setLevel(logging.ERROR)  # the breaker's lines: not the figures
    for kind in ("refusing", "dropping"):
        rows = asyncio.run(_measure(kind))
        alone = rows[0]["slowest_s"]
        for row in rows:
            connections = "" if row["connections"] is None else f", {row['connections']} connections"
            later = "" if row["later_connections"] is None else f", {row['later_connections']} connections"
            print(
                f"Redis {kind:8} {row['in_flight']:>2} in flight: 503 after median {row['median_s']:.3f} s, "
                f"slowest {row['slowest_s']:.3f} s ({row['slowest_s'] / alone:.1f}x one alone){connections}; "
                f"then {row['in_flight']} more: slowest {row['later_slowest_s'] * 1000:.2f} ms{later}"
            )


if __name__ == "__main__":
    main()
