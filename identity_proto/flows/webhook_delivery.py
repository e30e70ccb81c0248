"""Webhook delivery: one pass of the loop every host worker runs (the five steps of `identity_proto.effects.webhooks`),
then retention.

A pass, for every project with an endpoint: fan out the events recorded since the last pass (at most
`FAN_OUT_LIMIT`) along the `routes` the core decides from the project's endpoints (as last read: both steps are
guarded on them and read them again when they changed), claim the deliveries due now (at most `CLAIM_LIMIT`, each
under a lease of `LEASE_MS`), sign and POST them (one `SendWebhooks`, concurrent, `ServiceOptions.webhook_timeout_s`
each), record each attempt with its claim token. Then, at most once a minute per project and per worker, forget
what retention lets go (`ServiceOptions.webhook_retention_ms`, `webhook_keep_events`).

Time is the service's: the host's clock, moved by the dev-mode clock override exactly as `Service.handle` moves it,
so a test that advances the clock makes retries due. Delivery is at least once: a worker that dies after a POST and
before recording it, or whose lease ends mid-POST, leaves the delivery to be sent again, with the same message id.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from identity_proto.context import ServiceOptions
from identity_proto.effects import Flow, LoadClockOverride, LoadProject, StorageEffect, perform
from identity_proto.effects.webhooks import (
    ClaimDeliveries,
    ClaimedDelivery,
    DeliveryAttempt,
    FanOutEvents,
    ListWebhookEndpoints,
    ListWebhookProjects,
    RecordAttempt,
    Route,
    SendWebhooks,
    TrimWebhookData,
    WebhookEndpoint,
    WebhookRequest,
    WebhookResult,
)
from identity_proto.events import TEST_EVENT_TYPE, event_payload
from identity_proto.tokens import Entropy
from identity_proto.webhook_signing import webhook_headers

__all__ = [
    "CLAIM_LIMIT",
    "FAN_OUT_LIMIT",
    "LEASE_MS",
    "TRIM_INTERVAL_MS",
    "PassReport",
    "WebhookDelivery",
    "claim_deliveries",
    "fan_out_events",
    "routes",
    "signed_request",
]

#: Events fanned out per project and pass.
FAN_OUT_LIMIT = 200
#: Deliveries claimed per project and pass (they are POSTed concurrently).
CLAIM_LIMIT = 50
#: How long a claim holds: longer than a POST may take (the timeout), so only a dead or stalled worker's claims
#: come back to the others.
LEASE_MS = 60_000
#: Retention runs at most this often per project (and worker).
TRIM_INTERVAL_MS = 60_000


@dataclass(frozen=True, slots=True)
class PassReport:
    """What one pass did."""

    #: Events fanned out into deliveries.
    fanned_out: int = 0
    #: Deliveries POSTed (attempts recorded).
    attempted: int = 0
    #: Attempts that succeeded (2xx).
    succeeded: int = 0
    #: Whether a limit was reached: more work may be waiting, so the loop should run again at once.
    more: bool = False


def signed_request(claimed: ClaimedDelivery, body: bytes, now_ms: int) -> WebhookRequest:
    """The POST of `claimed` with `body`, signed at `now_ms` (the service's time, in seconds in the headers) with
    the endpoint's secret, and with the previous one too while a rotation's overlap lasts."""
    endpoint = claimed.endpoint
    secrets: tuple[str, ...] = (endpoint.secret,)
    if (
        endpoint.previous_secret is not None
        and endpoint.previous_until_millis is not None
        and now_ms < endpoint.previous_until_millis
    ):
        secrets += (endpoint.previous_secret,)
    headers = webhook_headers(secrets, claimed.delivery.message_id, now_ms // 1000, body)
    return WebhookRequest(url=endpoint.url, headers=headers, body=body)


Endpoints = tuple[WebhookEndpoint, ...]
R = TypeVar("R")


def routes(endpoints: Endpoints) -> tuple[Route, ...]:
    """Which endpoint gets which event: the enabled ones, each the types it asked for (None: every type), never a
    test event (its one delivery is made with it, `AddTestEvent`)."""
    return tuple(
        Route(e.id, (TEST_EVENT_TYPE,), only=False)
        if e.event_types is None
        else Route(e.id, tuple(t for t in e.event_types if t != TEST_EVENT_TYPE))
        for e in endpoints
        if not e.disabled
    )


def _on_endpoints(
    project_id: str, endpoints: Endpoints | None, make: Callable[[Endpoints], StorageEffect[R | None]]
) -> Flow[tuple[R, Endpoints]]:
    """Perform `make(endpoints)` (a step guarded on the project's endpoints as read: `endpoints`, else read here),
    reading them again while they changed meanwhile; returns its answer and the endpoints it ran on."""
    while True:
        if endpoints is None:
            endpoints = yield from perform(ListWebhookEndpoints(project_id))
        done = yield from perform(make(endpoints))
        if done is not None:
            return done, endpoints
        endpoints = None


def _fan_out(project_id: str, now_ms: int, limit: int) -> Callable[[Endpoints], FanOutEvents]:
    return lambda endpoints: FanOutEvents(project_id, now_ms, endpoints, routes(endpoints), limit)


def _claim(
    project_id: str, now_ms: int, lease_ms: int, limit: int, tokens: tuple[str, ...]
) -> Callable[[Endpoints], ClaimDeliveries]:
    """Deliveries to a disabled or deleted endpoint fail (without an attempt: replay them once it is enabled)."""
    return lambda endpoints: ClaimDeliveries(
        project_id, now_ms, lease_ms, limit, tokens, endpoints, tuple(e.id for e in endpoints if not e.disabled)
    )


def fan_out_events(project_id: str, now_ms: int, limit: int = 100) -> Flow[int]:
    """Fan out at most `limit` events along the `routes` of the project's endpoints; returns how many."""
    return (yield from _on_endpoints(project_id, None, _fan_out(project_id, now_ms, limit)))[0]


def claim_deliveries(
    project_id: str, now_ms: int, lease_ms: int, limit: int, tokens: tuple[str, ...]
) -> Flow[tuple[ClaimedDelivery, ...]]:
    """Claim at most `limit` deliveries due at `now_ms` (`_claim`)."""
    return (yield from _on_endpoints(project_id, None, _claim(project_id, now_ms, lease_ms, limit, tokens)))[0]


@dataclass
class WebhookDelivery:
    """The delivery loop's core: `run_pass` is one pass. A host keeps one per worker (it remembers when each
    project was last trimmed)."""

    options: ServiceOptions
    fan_out_limit: int = FAN_OUT_LIMIT
    claim_limit: int = CLAIM_LIMIT
    lease_ms: int = LEASE_MS
    trim_interval_ms: int = TRIM_INTERVAL_MS
    _trimmed_at: dict[str, int] = field(default_factory=dict)
    #: Each project's endpoints as last read: the steps are guarded on them (read again when they changed).
    _endpoints: dict[str, Endpoints] = field(default_factory=dict)

    def run_pass(self, now_ms: int, entropy: Entropy, *, claim_limit: int | None = None) -> Flow[PassReport]:
        """One pass over every project with an endpoint, at the host's time `now_ms`, claiming at most
        `claim_limit` deliveries per project (default `self.claim_limit`: hosts pass less while serving requests)."""
        limit = self.claim_limit if claim_limit is None else claim_limit
        if self.options.dev_mode:
            # Dev/test mode: the clock tests move (kept in the store), exactly as requests see it.
            override = yield from perform(LoadClockOverride())
            if override is not None:
                now_ms = override.now(now_ms)
        project_ids = yield from perform(ListWebhookProjects())
        self._endpoints = {p: e for p, e in self._endpoints.items() if p in project_ids}
        report = PassReport()
        for project_id in project_ids:
            found = yield from self._deliver(project_id, now_ms, entropy, limit)
            report = PassReport(
                fanned_out=report.fanned_out + found.fanned_out,
                attempted=report.attempted + found.attempted,
                succeeded=report.succeeded + found.succeeded,
                more=report.more or found.more,
            )
            yield from self._trim(project_id, now_ms)
        return report

    def _deliver(self, project_id: str, now_ms: int, entropy: Entropy, limit: int) -> Flow[PassReport]:
        fan_out = _fan_out(project_id, now_ms, self.fan_out_limit)
        fanned, endpoints = yield from _on_endpoints(project_id, self._endpoints.get(project_id), fan_out)
        tokens = tuple(_claim_token(entropy) for _ in range(limit))
        claim = _claim(project_id, now_ms, self.lease_ms, limit, tokens)
        claimed, self._endpoints[project_id] = yield from _on_endpoints(project_id, endpoints, claim)
        more = fanned >= self.fan_out_limit or len(claimed) >= limit
        if not claimed:
            return PassReport(fanned_out=fanned, more=more)
        project = yield from perform(LoadProject(project_id))
        if project is None:  # deleted since it was listed: its data goes with it
            return PassReport(fanned_out=fanned)
        requests = tuple(signed_request(item, event_payload(item.event, project.config), now_ms) for item in claimed)
        results: tuple[WebhookResult, ...] = yield from perform(
            SendWebhooks(requests, timeout_s=self.options.webhook_timeout_s)
        )
        succeeded = 0
        for item, result in zip(claimed, results, strict=True):
            # The attempt is dated at the pass's time, not when the answer came: the retry schedule then counts
            # from the attempt exactly (a test that advances the clock by 5 s makes the first retry due).
            attempt = DeliveryAttempt(
                at_millis=now_ms, status_code=result.status_code, latency_ms=result.latency_ms, error=result.error
            )
            yield from perform(RecordAttempt.after(project_id, item, attempt))
            if result.status_code is not None and 200 <= result.status_code < 300:
                succeeded += 1
        return PassReport(fanned_out=fanned, attempted=len(claimed), succeeded=succeeded, more=more)

    def _trim(self, project_id: str, now_ms: int) -> Flow[None]:
        last = self._trimmed_at.get(project_id)
        if last is not None and 0 <= now_ms - last < self.trim_interval_ms:
            return
        self._trimmed_at[project_id] = now_ms
        yield from perform(
            TrimWebhookData(
                project_id,
                before_ms=now_ms - self.options.webhook_retention_ms,
                keep_events=self.options.webhook_keep_events,
            )
        )


def _claim_token(entropy: Entropy) -> str:
    return base64.urlsafe_b64encode(entropy.token_bytes(18)).decode("ascii")
