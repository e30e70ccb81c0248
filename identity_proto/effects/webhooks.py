"""Webhooks: endpoints, the events the stores record (see `identity_proto.events`), and their delivery, as storage
effects (each one atomic step: the memory store's lock, one Lua script on Redis) plus `SendWebhooks`, the one effect
a host performs over the network.

How delivery works (every worker of every process runs the same loop, `flows.webhook_delivery`):

1. `ListWebhookProjects`: the projects that have at least one endpoint.
2. `FanOutEvents(project, now, endpoints, routes)`: events recorded since the project's fan-out cursor become one
   `Delivery` per route (decided by the core from the endpoints it read, guarded on them) that takes their type,
   due now; the cursor moves past them. Atomic, so an event is fanned out exactly once whatever the number of
   workers.
3. `ClaimDeliveries(project, now, lease_ms, limit, tokens, endpoints, sendable)`: deliveries due at `now` are
   claimed, each by exactly one caller: its due time is pushed to `now + lease_ms` and it gets a fresh claim token
   (those of endpoints the core found not sendable fail). A worker that dies holding a claim loses it when the lease
   ends: the delivery is due again and another worker claims it (same message id).
4. `SendWebhooks`: the host POSTs them (concurrently, with a timeout).
5. `RecordAttempt` per delivery, with its claim token: a stale token (the lease ended and someone else claimed it)
   records the attempt but changes nothing else. 2xx: succeeded. Else the next attempt is due after the next step
   of `RETRY_SCHEDULE_MS` (counted on the service's clock, so a fake clock drives retries), or, after the last,
   the delivery has failed.

`CountPendingDeliveries` reads the backlog: the deliveries not yet succeeded or given up (the hosts' metrics).

Endpoint secrets are kept as given (`whsec_<base64>`): a signature needs the key itself. They are rendered only in
the responses that create or rotate them.
"""

from __future__ import annotations

from dataclasses import field
from enum import StrEnum
from typing import TYPE_CHECKING

from identity_proto.effects.base import Effect, StorageEffect
from identity_proto.effects.commit import CommitGuard, CommitWrite
from identity_proto.records import StoredEvent
from identity_proto.tokens import CROCKFORD_ALPHABET, Entropy, random_string

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


#: Message ids (what receivers deduplicate on, `svix-id` / `webhook-id`) are unique across projects, processes and
#: restarts, and the same only when one message is sent again (a retry, a replay): `msg_` + the *tag* of the
#: project's event stream in its store (`MESSAGE_TAG_LENGTH` characters, lower-case Crockford base 32) + the event's
#: position in that stream (its sequence number, or its Redis stream entry id). The memory store draws a random tag
#: for each project's stream when it makes it (`new_message_tag`): a restarted process, another worker, another
#: project, all have another tag. Redis derives the tag from the key namespace and the project id (the stream and its
#: positions outlive restarts, and positions are unique within it: Redis's clock).
MESSAGE_TAG_LENGTH = 16


def new_message_tag(entropy: Entropy) -> str:
    """A random tag for a project's event stream (80 bits)."""
    return random_string(entropy, MESSAGE_TAG_LENGTH)


def message_tag_of(digest: bytes) -> str:
    """The tag that a (hash) digest of at least `MESSAGE_TAG_LENGTH` bytes stands for (a store that derives its
    tags rather than drawing them: Redis)."""
    return "".join(CROCKFORD_ALPHABET[byte % 32] for byte in digest[:MESSAGE_TAG_LENGTH])


def message_id(tag: str, position: str) -> str:
    """The message id of the event at `position` of the stream tagged `tag`."""
    return f"msg_{tag}{position}"


def message_position(message_id: str, tag: str) -> str | None:
    """The position a message id names in the stream tagged `tag`, or None when it is not one of that stream's."""
    prefix = f"msg_{tag}"
    if not message_id.startswith(prefix) or len(message_id) == len(prefix):
        return None
    return message_id[len(prefix) :]


__all__ = [
    "EVENTS_HARD_CAP",
    "EVENTS_IDLE_TTL_MS",
    "RETRY_SCHEDULE_MS",
    "TEST_EVENT_TYPE",
    "AddTestEvent",
    "ClaimDeliveries",
    "ClaimedDelivery",
    "CountPendingDeliveries",
    "DeliveriesAre",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryIs",
    "DeliveryState",
    "DropDelivery",
    "DropWebhookEndpoint",
    "EndpointCountIs",
    "EndpointIs",
    "FanOutEvents",
    "ListDeliveries",
    "ListEvents",
    "ListWebhookEndpoints",
    "ListWebhookProjects",
    "LoadDelivery",
    "LoadWebhookEndpoint",
    "PutWebhookEndpoint",
    "RecordAttempt",
    "RestartDelivery",
    "Route",
    "SendWebhooks",
    "TrimWebhookData",
    "WebhookEndpoint",
    "WebhookRequest",
    "WebhookResult",
]

#: The type of test events (`AddTestEvent`): `identity_proto.events.TEST_EVENT_TYPE`, repeated here for the stores,
#: which import only the storage contract (a unit test checks that the two are one).
TEST_EVENT_TYPE = "stack.test"

#: Every store keeps at most this many of a project's events, and forgets them this long after the project's last
#: event: the bounds of a project no delivery loop trims (the fake's, which records events without endpoints for
#: `project.events()`; one whose last endpoint went). The configured retention (`TrimWebhookData`) is within them.
EVENTS_HARD_CAP = 100_000
EVENTS_IDLE_TTL_MS = 30 * 86_400_000

#: The Svix schedule: after a failed attempt, the next is due this long after it (then the delivery has failed):
#: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. Eight attempts in all.
RETRY_SCHEDULE_MS: tuple[int, ...] = (
    5_000,
    300_000,
    1_800_000,
    7_200_000,
    18_000_000,
    36_000_000,
    36_000_000,
)


@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    id: str
    url: str
    #: `whsec_<base64 of the key>`.
    secret: str = field(repr=False)
    description: str = ""
    #: The event types delivered; None: every type.
    event_types: tuple[str, ...] | None = None
    disabled: bool = False
    created_at_millis: int = 0
    #: After a rotation: the previous secret, still signing (a second `v1,` signature) until `previous_until_millis`.
    previous_secret: str | None = field(default=None, repr=False)
    previous_until_millis: int | None = None


class DeliveryState(StrEnum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    """One POST of a message to an endpoint."""

    at_millis: int
    #: The HTTP status, or None when no answer came (refused, timeout).
    status_code: int | None
    latency_ms: int
    #: Why it failed, for the operator ("timeout", "connection refused", "HTTP 500"); never the response body.
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message (event) on its way to one endpoint."""

    endpoint_id: str
    message_id: str
    event_type: str
    state: DeliveryState
    #: When the next attempt is due (while pending); a claimed delivery's is its lease's end.
    next_attempt_at_millis: int | None
    attempts: tuple[DeliveryAttempt, ...] = ()
    created_at_millis: int = 0


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    delivery: Delivery
    event: StoredEvent
    endpoint: WebhookEndpoint
    #: Proves the claim to `RecordAttempt` (random, from the claimer's entropy).
    claim_token: str
    #: The failed attempts since the retry schedule (re)started.
    failures: int = 0


# ----------------------------------------------------------------------------------------------------------------
# Endpoints (admin routes)


@dataclass(frozen=True, slots=True)
class EndpointIs(CommitGuard):
    """The endpoint `endpoint_id` is stored as `endpoint` (None: there is none)."""

    endpoint_id: str
    endpoint: WebhookEndpoint | None


@dataclass(frozen=True, slots=True)
class EndpointCountIs(CommitGuard):
    """The project has `count` endpoints."""

    count: int


@dataclass(frozen=True, slots=True)
class PutWebhookEndpoint(CommitWrite):
    """Store the endpoint. `new`: it gets the events recorded from now on, and the project is one of those
    `ListWebhookProjects` reads; `skip_history` (the project's first): the fan-out cursor moves past every event
    recorded so far too."""

    endpoint: WebhookEndpoint
    new: bool = False
    skip_history: bool = False


@dataclass(frozen=True, slots=True)
class LoadWebhookEndpoint(StorageEffect["WebhookEndpoint | None"]):
    project_id: str
    endpoint_id: str


@dataclass(frozen=True, slots=True)
class ListWebhookEndpoints(StorageEffect[tuple[WebhookEndpoint, ...]]):
    """The project's endpoints, in creation order."""

    project_id: str


@dataclass(frozen=True, slots=True)
class DropWebhookEndpoint(CommitWrite):
    """Remove the endpoint (its deliveries: `DropDelivery`); the project leaves `ListWebhookProjects` when it was
    its last."""

    endpoint_id: str


# ----------------------------------------------------------------------------------------------------------------
# Events and deliveries


@dataclass(frozen=True, slots=True)
class ListEvents(StorageEffect[tuple[StoredEvent, ...]]):
    """The project's recorded events still kept, oldest first, after the message id `after` (None: from the
    oldest), at most `limit`."""

    project_id: str
    after: str | None = None
    limit: int = 100


@dataclass(frozen=True, slots=True)
class AddTestEvent(StorageEffect[StoredEvent]):
    """Record a `stack.test` event (its `record` the JSON text of its data) delivered only to `endpoint_id`, due
    now. Returns it."""

    project_id: str
    endpoint_id: str
    data_json: str
    now_ms: int


@dataclass(frozen=True, slots=True)
class ListWebhookProjects(StorageEffect[tuple[str, ...]]):
    """The ids of the projects that have at least one endpoint."""


@dataclass(frozen=True, slots=True)
class CountPendingDeliveries(StorageEffect[int]):
    """How many of the project's deliveries are pending (due now or later, claimed or not): the webhook backlog."""

    project_id: str


@dataclass(frozen=True, slots=True)
class Route:
    """The events one endpoint gets (the core's decision, `flows.webhook_delivery.routes`): those of `types`
    (`only`), else every type but them."""

    endpoint_id: str
    types: tuple[str, ...]
    only: bool = True


@dataclass(frozen=True, slots=True)
class FanOutEvents(StorageEffect["int | None"]):
    """Step 2 of the loop (module docstring), at most `limit` events: each becomes one delivery per route that takes
    its type, to an endpoint that started before it. Runs only while the project's endpoints are `endpoints` (as
    read, the routes' source): returns how many events were fanned out, or None (changed meanwhile: read again)."""

    project_id: str
    now_ms: int
    endpoints: tuple[WebhookEndpoint, ...]
    routes: tuple[Route, ...]
    limit: int = 100


@dataclass(frozen=True, slots=True)
class ClaimDeliveries(StorageEffect["tuple[ClaimedDelivery, ...] | None"]):
    """Step 3: claim up to `limit` deliveries due at `now_ms` (oldest due first), each with its own token from
    `claim_tokens` (as many as `limit`); a due delivery to an endpoint not in `sendable`, or whose event is no
    longer kept, is settled as failed instead (no attempt). Runs only while the project's endpoints are `endpoints`
    (as read): else None (read again)."""

    project_id: str
    now_ms: int
    lease_ms: int
    limit: int
    claim_tokens: tuple[str, ...] = field(repr=False)
    endpoints: tuple[WebhookEndpoint, ...] = ()
    sendable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordAttempt(StorageEffect[bool]):
    """Step 5: append `attempt` to the delivery and, only while `claim_token` is its current claim, make it `state`
    with `failures` failed attempts (pending: due again at `next_attempt_at_millis`, unclaimed); else (the lease
    ended and another worker claimed it) the attempt is appended and nothing else changes. Returns whether the
    claim was current. The core decides the outcome (`after`)."""

    project_id: str
    endpoint_id: str
    message_id: str
    claim_token: str = field(repr=False)
    attempt: DeliveryAttempt
    state: DeliveryState
    failures: int = 0
    next_attempt_at_millis: int | None = None

    @classmethod
    def after(cls, project_id: str, claimed: ClaimedDelivery, attempt: DeliveryAttempt) -> RecordAttempt:
        """The attempt of a claimed delivery, settled: succeeded on a 2xx, else due again at `attempt.at_millis +
        RETRY_SCHEDULE_MS[n]` (n: failed attempts before this one), else (after the last) failed."""
        delivery, failures = claimed.delivery, claimed.failures
        ids = (project_id, delivery.endpoint_id, delivery.message_id, claimed.claim_token, attempt)
        if attempt.status_code is not None and 200 <= attempt.status_code < 300:
            return cls(*ids, DeliveryState.SUCCEEDED, failures)
        if failures < len(RETRY_SCHEDULE_MS):
            return cls(*ids, DeliveryState.PENDING, failures + 1, attempt.at_millis + RETRY_SCHEDULE_MS[failures])
        return cls(*ids, DeliveryState.FAILED, failures + 1)


@dataclass(frozen=True, slots=True)
class ListDeliveries(StorageEffect[tuple[Delivery, ...]]):
    """The endpoint's deliveries still kept, newest first, at most `limit` (None: all)."""

    project_id: str
    endpoint_id: str
    limit: int | None = 50


@dataclass(frozen=True, slots=True)
class LoadDelivery(StorageEffect["Delivery | None"]):
    """The delivery of `message_id` to the endpoint; None when there is none (or its event is no longer kept)."""

    project_id: str
    endpoint_id: str
    message_id: str


@dataclass(frozen=True, slots=True)
class DeliveryIs(CommitGuard):
    """The delivery is stored in the state and with the attempts of `delivery` (as the flow read it)."""

    delivery: Delivery


@dataclass(frozen=True, slots=True)
class DeliveriesAre(CommitGuard):
    """The endpoint's deliveries are those of `message_ids` (as `ListDeliveries` read them all), no other."""

    endpoint_id: str
    message_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DropDelivery(CommitWrite):
    """Remove a delivery, whatever its state."""

    endpoint_id: str
    message_id: str


@dataclass(frozen=True, slots=True)
class RestartDelivery(CommitWrite):
    """Make the delivery pending and due at `now_ms` again, unclaimed, its attempts kept and its retry schedule
    restarted (a replay)."""

    endpoint_id: str
    message_id: str
    now_ms: int


@dataclass(frozen=True, slots=True)
class TrimWebhookData(StorageEffect[None]):
    """Retention: forget the project's events recorded before `before_ms` or beyond the newest `keep_events`, and
    settled deliveries whose last attempt was before `before_ms` (pending deliveries are kept with their events)."""

    project_id: str
    before_ms: int
    keep_events: int


# ----------------------------------------------------------------------------------------------------------------
# The network


@dataclass(frozen=True, slots=True)
class WebhookRequest:
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass(frozen=True, slots=True)
class WebhookResult:
    status_code: int | None
    latency_ms: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SendWebhooks(Effect[tuple[WebhookResult, ...]]):
    """POST each request (concurrently, each with `timeout_s`), performed by the host's webhook sender; one result
    per request, in order. Never raises for a receiver's failure: that is a result."""

    requests: tuple[WebhookRequest, ...]
    timeout_s: float = 15.0
