"""The hosts' webhook delivery loops: each worker runs `flows.webhook_delivery.WebhookDelivery` passes against the
host's store, POSTing through the host's webhook sender.

- `AsyncDeliveryLoop` (the ASGI host): an asyncio task, started after the lifespan start-up and stopped (awaited,
  at most `stop_timeout_s`, then cancelled) at shutdown.
- `DeliveryThread` (the WSGI host): a daemon thread, started with the host and stopped by its `close()`.

A pass that found work is followed by another at once; otherwise the loop waits `poll_s`. A pass that fails (the
store unavailable) is logged and retried after `poll_s`: nothing is lost, the events stay in the store.

Delivery must not slow requests: both loops defer a pass while the worker has requests in flight (`busy()` > 0),
for at most `max_defer_s`, so under a steady load deliveries still go out, in batches, at least that often, and the
backlog drains once the load stops. The ASGI loop also yields to the event loop at every store round trip and
POST (the driver awaits each effect), so a request never waits behind a whole pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable

from identity_proto import AsyncStore, Entropy, Service, Store, arun, run
from identity_proto.drivers import AsyncWebhookSender, WebhookSender
from identity_proto.flows.webhook_delivery import PassReport, WebhookDelivery

__all__ = ["AsyncDeliveryLoop", "DeliveryThread"]

logger = logging.getLogger("identity_service.webhooks")

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
    """Logs a failed pass with its traceback, then the same failure at most once a minute (a store down for an hour
    is one line a minute, not one a second)."""

    interval_s = 60.0

    def __init__(self) -> None:
        self._last: tuple[str, float] | None = None

    def failed(self, exc: Exception, poll_s: float) -> None:
        kind, now = f"{type(exc).__name__}: {exc}", time.monotonic()
        if self._last is not None and self._last[0] == kind and now - self._last[1] < self.interval_s:
            return
        self._last = (kind, now)
        logger.error("webhook delivery pass failed; retrying every %.1f s", poll_s, exc_info=exc)

    def succeeded(self) -> None:
        self._last = None


class AsyncDeliveryLoop:
    """The ASGI host's delivery task."""

    def __init__(
        self,
        service: Service,
        store: AsyncStore,
        sender: AsyncWebhookSender,
        *,
        clock: Callable[[], int],
        entropy: Entropy,
        poll_s: float = 1.0,
        busy: Callable[[], int] = lambda: 0,
        max_defer_s: float = MAX_DEFER_S,
    ) -> None:
        self.delivery = WebhookDelivery(service.options)
        self._store = store
        self._sender = sender
        self._clock = clock
        self._entropy = entropy
        self._poll_s = poll_s
        self._busy = busy
        self._max_defer_s = max_defer_s
        self._failures = _FailureLog()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def start(self) -> None:
        """Start the task on the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="webhook-delivery")

    def wake(self) -> None:
        """Run the next pass now rather than after the poll interval."""
        self._wake.set()

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop after the pass under way (waiting at most `timeout_s`, then cancelling it)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run_pass(self, claim_limit: int | None = None) -> PassReport:
        """One pass, now."""
        flow = self.delivery.run_pass(self._clock(), self._entropy, claim_limit=claim_limit)
        return await arun(flow, self._store, webhooks=self._sender)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            await self._defer_while_busy()
            if self._stopping.is_set():
                return
            try:
                report = await self.run_pass(BUSY_CLAIM_LIMIT if self._busy() > 0 else None)
                self._failures.succeeded()
            except Exception as exc:
                self._failures.failed(exc, self._poll_s)
                report = PassReport()
            if _found_work(report):
                await asyncio.sleep(0)
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll_s)

    async def _defer_while_busy(self) -> None:
        deadline = time.monotonic() + self._max_defer_s
        while self._busy() > 0 and time.monotonic() < deadline and not self._stopping.is_set():
            await asyncio.sleep(_DEFER_STEP_S)


class DeliveryThread:
    """The WSGI host's delivery thread."""

    def __init__(
        self,
        service: Service,
        store: Store,
        sender: WebhookSender,
        *,
        clock: Callable[[], int],
        entropy: Entropy,
        poll_s: float = 1.0,
        busy: Callable[[], int] = lambda: 0,
        max_defer_s: float = MAX_DEFER_S,
    ) -> None:
        self.delivery = WebhookDelivery(service.options)
        self._store = store
        self._sender = sender
        self._clock = clock
        self._entropy = entropy
        self._poll_s = poll_s
        self._busy = busy
        self._max_defer_s = max_defer_s
        self._failures = _FailureLog()
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        # One pass at a time: `run_pass` may be called from a test while the thread runs.
        self._pass_lock = threading.Lock()

    def start(self) -> None:
        """Start the daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="webhook-delivery", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """Run the next pass now rather than after the poll interval."""
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop after the pass under way (waiting at most `timeout_s`: the thread is a daemon)."""
        thread, self._thread = self._thread, None
        self._stopping.set()
        self._wake.set()
        if thread is not None:
            thread.join(timeout_s)

    def run_pass(self, claim_limit: int | None = None) -> PassReport:
        """One pass, now."""
        with self._pass_lock:
            flow = self.delivery.run_pass(self._clock(), self._entropy, claim_limit=claim_limit)
            return run(flow, self._store, webhooks=self._sender)

    def _run(self) -> None:
        while not self._stopping.is_set():
            deadline = time.monotonic() + self._max_defer_s
            while self._busy() > 0 and time.monotonic() < deadline and not self._stopping.is_set():
                self._stopping.wait(_DEFER_STEP_S)
            if self._stopping.is_set():
                return
            try:
                report = self.run_pass(BUSY_CLAIM_LIMIT if self._busy() > 0 else None)
                self._failures.succeeded()
            except Exception as exc:
                self._failures.failed(exc, self._poll_s)
                report = PassReport()
            if _found_work(report):
                continue
            self._wake.wait(self._poll_s)
            self._wake.clear()
