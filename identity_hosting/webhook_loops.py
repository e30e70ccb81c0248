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

Where the code is: `identity_hosting.webhook_loops_async` (`AsyncDeliveryPasses`: the passes and the loop, the
source), `identity_hosting.webhook_loops_sync` (`DeliveryPasses`, generated from it by `scripts/generate_sync`: edit
the source), `identity_hosting.webhook_common` (what both share that is no I/O, `BusyMeter`; the hand-written pairs
where they differ: `Signal` / `AsyncSignal`, `Lock` / `AsyncLock`), and here, hand-written, what differs genuinely:
starting and stopping the loop (an asyncio task, a thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from identity_hosting.webhook_common import BUSY_CLAIM_LIMIT, MAX_DEFER_S, BusyMeter
from identity_hosting.webhook_loops_async import AsyncDeliveryPasses
from identity_hosting.webhook_loops_sync import DeliveryPasses

__all__ = ["BUSY_CLAIM_LIMIT", "MAX_DEFER_S", "AsyncDeliveryLoop", "BusyMeter", "DeliveryThread"]


class AsyncDeliveryLoop(AsyncDeliveryPasses):
    """The ASGI host's delivery task."""

    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the task on the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="webhook-delivery")

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Stop after the pass under way (waiting at most `timeout_s`, then cancelling it)."""
        task, self._task = self._task, None
        if task is None:
            return
        self.halt()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class DeliveryThread(DeliveryPasses):
    """The WSGI host's delivery thread."""

    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the daemon thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="webhook-delivery", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop after the pass under way (waiting at most `timeout_s`: the thread is a daemon)."""
        thread, self._thread = self._thread, None
        self.halt()
        if thread is not None:
            thread.join(timeout_s)
