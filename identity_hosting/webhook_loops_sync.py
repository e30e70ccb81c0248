# Generated from identity_hosting/webhook_loops_async.py by scripts/generate_sync: do not edit.
"""The sync twin of `identity_hosting.webhook_loops_async`, generated from it: its docstring tells of both."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from identity_hosting.webhook_common import (
    _DEFER_STEP_S,
    BUSY_CLAIM_LIMIT,
    MAX_DEFER_S,
    Lock,
    Signal,
    _FailureLog,
    _found_work,
)
from identity_proto import Entropy, Service, Store, run
from identity_proto.drivers import WebhookSender
from identity_proto.flows.webhook_delivery import PassReport, WebhookDelivery

__all__ = ["DeliveryPasses", "PassObserver"]


class PassObserver(Protocol):
    """Told of every pass of the loop (metrics: `identity_hosting.observability.Metrics`)."""

    def delivery_pass(self, report: PassReport | None) -> None:
        """A pass ended with `report`, or failed (None: the store was unavailable)."""


class DeliveryPasses:
    """Delivery passes, one after another until `halt()`: `_run` is the loop."""

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
        observer: PassObserver | None = None,
    ) -> None:
        self.delivery = WebhookDelivery(service.options)
        self._store = store
        self._sender = sender
        self._clock = clock
        self._entropy = entropy
        self._poll_s = poll_s
        self._busy = busy
        self._max_defer_s = max_defer_s
        self._observer = observer
        self._failures = _FailureLog()
        self._stopping = Signal()
        self._wake = Signal()
        # One pass at a time: `run_pass` may be called from a test while the loop runs.
        self._pass_lock = Lock()

    def wake(self) -> None:
        """Run the next pass now rather than after the poll interval."""
        self._wake.set()

    def halt(self) -> None:
        """End the loop after the pass under way."""
        self._stopping.set()
        self._wake.set()

    def run_pass(self, claim_limit: int | None = None) -> PassReport:
        """One pass, now."""
        with self._pass_lock:
            flow = self.delivery.run_pass(self._clock(), self._entropy, claim_limit=claim_limit)
            try:
                report = run(flow, self._store, webhooks=self._sender)
            except Exception:
                if self._observer is not None:
                    self._observer.delivery_pass(None)
                raise
            if self._observer is not None:
                self._observer.delivery_pass(report)
            return report

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
