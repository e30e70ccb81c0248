"""What the webhook senders (`identity_hosting.webhook_sender`) and delivery loops (`identity_hosting.webhook_loops`)
share that is no I/O: failures named as results, the senders' limits, the loops' pacing, load meter and failure log.
And the hand-written pairs of primitives their asyncio sources import by their async names (the generated sync twins
import the sync ones): `FanOut` / `AsyncFanOut` (a thread pool / `asyncio.gather`), `deadline` / `async_deadline`
(nothing / `asyncio.timeout`), `Signal` / `AsyncSignal` and `Lock` / `AsyncLock` (threading / asyncio)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from identity_proto.effects.webhooks import WebhookResult
from identity_proto.egress import is_allowed_address
from identity_proto.errors import StorageUnavailable
from identity_proto.flows.webhook_delivery import PassReport

if TYPE_CHECKING:
    import httpx

# httpx (and httpcore, and what they import) is imported by the senders, not here: the delivery loops import this
# module, and a worker whose deliveries never go out need not load an HTTP client to start (tests/unit/
# test_import_cost.py).

logger = logging.getLogger("identity_service.webhooks")

_T = TypeVar("_T")
_R = TypeVar("_R")

# Senders

#: At most this much of a receiver's answer is read (and then dropped): only the status counts.
MAX_RESPONSE_BYTES = 4096
#: Concurrent POSTs of the sync sender.
_SYNC_CONCURRENCY = 16
#: The connection pool of each sender.
_MAX_CONNECTIONS = 64
_MAX_KEEPALIVE_CONNECTIONS = 16


def _limits() -> httpx.Limits:
    """The connection pool of each sender."""
    import httpx

    return httpx.Limits(max_connections=_MAX_CONNECTIONS, max_keepalive_connections=_MAX_KEEPALIVE_CONNECTIONS)


def is_public_address(address: str) -> bool:
    """Whether `address` (an IP address) is one a production service may POST to (`identity_proto.egress`)."""
    return is_allowed_address(address)


def _failure(exc: Exception) -> str:
    import httpx  # loaded by then: only a sender's POST fails

    from identity_hosting.egress_check import AddressNotAllowed

    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return "timeout"
    if isinstance(exc, AddressNotAllowed):
        return "address not allowed"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused" if _refused(exc) else "connection failed"
    return "connection failed"


def _refused(exc: BaseException) -> bool:
    """Whether a connection error comes from a refused connection (somewhere down its chain of causes; the async
    transport wraps each address's attempt in a group)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or "refused" in str(current).lower():
            return True
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return False


def _result(status: int | None, started: float, error: str | None = None) -> WebhookResult:
    latency = max(0, int((time.perf_counter() - started) * 1000))
    if error is None and status is not None and not 200 <= status < 300:
        error = f"HTTP {status}"
    return WebhookResult(status_code=status, latency_ms=latency, error=error)


def _client_options(timeout_s: float) -> dict[str, Any]:
    import httpx

    return {"timeout": httpx.Timeout(timeout_s), "follow_redirects": False, "trust_env": False}


class FanOut:
    """The sync sender's concurrent POSTs: a small thread pool, made when first needed (one call runs on the calling
    thread)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def map(self, call: Callable[[_T], _R], items: Sequence[_T]) -> tuple[_R, ...]:
        if len(items) == 1:
            return (call(items[0]),)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(_SYNC_CONCURRENCY, thread_name_prefix="webhook-post")
            pool = self._pool
        return tuple(pool.map(call, items))

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


class AsyncFanOut:
    """The asyncio sender's concurrent POSTs: on the event loop."""

    async def map(self, call: Callable[[_T], Awaitable[_R]], items: Sequence[_T]) -> tuple[_R, ...]:
        return tuple(await asyncio.gather(*(call(item) for item in items)))

    async def aclose(self) -> None:
        return None


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Nothing: a sync POST is bounded by its timeout on each of connect, write and read only."""
    yield


@contextlib.asynccontextmanager
async def async_deadline(seconds: float) -> AsyncIterator[None]:
    """The whole exchange bounded (`TimeoutError`): a receiver trickling its answer byte by byte cannot hold it."""
    async with asyncio.timeout(seconds):
        yield


# Loops

#: While requests are in flight a pass waits, checking this often...
_DEFER_STEP_S = 0.01
#: ...but never longer than this in all.
MAX_DEFER_S = 0.5
#: Deliveries claimed per project by a pass that runs while its worker still has requests in flight (after deferring
#: `MAX_DEFER_S`): a few, so that a saturated worker spends little on delivery (measured: 50 concurrent POSTs per
#: pass cost a loaded memory-store worker half its PATCH rate, most of it in httpcore's pool bookkeeping). The
#: backlog drains at the full `CLAIM_LIMIT` once the load lets up.
BUSY_CLAIM_LIMIT = 8
#: A worker counts as busy while a request is in flight or one started this recently: under a steady load the
#: moment the delivery task runs is usually one between requests (none in flight), which is not idleness.
BUSY_WINDOW_S = 0.05


class BusyMeter:
    """What a host tells its delivery loop about its load: `started()` / `finished()` around each request;
    `__call__` is the `busy` signal (requests in flight, plus one when a request started within `BUSY_WINDOW_S`)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self._last_start = -1e9
        self._lock = threading.Lock()

    def started(self) -> None:
        with self._lock:
            self.in_flight += 1
            self._last_start = time.monotonic()

    def finished(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def __call__(self) -> int:
        recent = time.monotonic() - self._last_start < BUSY_WINDOW_S
        return self.in_flight + (1 if recent else 0)


def _found_work(report: PassReport) -> bool:
    return report.more or report.attempted > 0 or report.fanned_out > 0


class _FailureLog:
    """What a failing pass logs. The store unreachable (`StorageUnavailable`: Redis down or restarting) is an
    outage, not a bug: one line when it begins and one when the store answers again, however long it lasts and
    however many passes fail meanwhile. Any other failure is logged with its traceback, then the same failure at
    most once a minute (a bug hit every pass for an hour is one line a minute, not one a second)."""

    interval_s = 60.0

    def __init__(self) -> None:
        self._last: tuple[str, float] | None = None
        self._outage = False

    def failed(self, exc: Exception, poll_s: float) -> None:
        if isinstance(exc, StorageUnavailable):
            if not self._outage:
                self._outage = True
                logger.warning("webhook deliveries paused: %s; retrying every %.1f s", exc, poll_s)
            return
        kind, now = f"{type(exc).__name__}: {exc}", time.monotonic()
        if self._last is not None and self._last[0] == kind and now - self._last[1] < self.interval_s:
            return
        self._last = (kind, now)
        logger.error("webhook delivery pass failed; retrying every %.1f s", poll_s, exc_info=exc)

    def succeeded(self) -> None:
        if self._outage:
            logger.warning("webhook deliveries resumed: the store answers again")
        self._outage = False
        self._last = None


#: The sync loop's events (`wait(timeout_s)` returns when set or after `timeout_s`) and its pass lock.
Signal = threading.Event
Lock = threading.Lock
AsyncLock = asyncio.Lock


class AsyncSignal:
    """`Signal` on the event loop."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self, timeout_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._event.wait()
