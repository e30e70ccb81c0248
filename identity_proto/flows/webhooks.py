"""Webhook endpoints (admin access): create, list, read, update, delete, rotate the secret, read the recent
deliveries, replay one, send a test event; and the original's `POST /internal/send-test-webhook`.

The original keeps endpoints in Svix and has no route of its own for them (reference part 2 §8); these routes are
ours, in the shape of the service's other admin resources: create 201, read and update 200, delete 200
`{"success": true}`, lists `{"items", "is_paginated": false}`.

Rules:
1. An endpoint's secret (`whsec_` + base64 of 24 random bytes) is shown whole only in the answers that make it:
   creation and rotation. Every other answer names the endpoint without it.
2. A rotation keeps the previous secret signing beside the new one for `PREVIOUS_SECRET_OVERLAP_MS` (24 h), so
   receivers can switch without losing a message; a second rotation within that time drops the oldest secret.
3. The URL (`check_endpoint_url`): the schema accepts only http(s) URLs every parser reads alike, without
   credentials; the flow refuses the service's own origin always, and in production addresses a careful operator
   keeps out of reach of the internet's requests (`identity_proto.egress`: IP literals that are not global unicast,
   and local names such as `localhost`), unless `ServiceOptions.webhook_allow_private`. Dev mode allows them
   (receivers on the developer's machine). A name that *resolves* to such an address is the sender's business, at
   delivery (the same rule, `identity_hosting.egress`).
4. `event_types`: known types only, or null for every type (the schema).
"""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import TYPE_CHECKING, Any

import orjson

from identity_proto.context import RequestContext
from identity_proto.effects import Flow, perform
from identity_proto.effects.commit import commit
from identity_proto.effects.webhooks import (
    AddTestEvent,
    DeliveriesAre,
    Delivery,
    DeliveryIs,
    DeliveryState,
    DropDelivery,
    DropWebhookEndpoint,
    EndpointCountIs,
    EndpointIs,
    ListDeliveries,
    ListWebhookEndpoints,
    LoadDelivery,
    LoadWebhookEndpoint,
    PutWebhookEndpoint,
    RestartDelivery,
    WebhookEndpoint,
)
from identity_proto.egress import ALLOW_PRIVATE_SETTING, IPAddress, host_refusal, ip_literal
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.events import TEST_EVENT_TYPE
from identity_proto.http import Response
from identity_proto.render import json_response
from identity_proto.tokens import Entropy, new_uuid
from identity_proto.urls import UnsafeURL, WebURL, parse_web_url

if TYPE_CHECKING:
    from identity_proto.schemas import WebhookDeliveriesQuery, WebhookEndpointParams, WebhookMessageParams
    from identity_proto.schemas.webhooks import (
        SendTestWebhookBody,
        WebhookEndpointCreateBody,
        WebhookEndpointUpdateBody,
    )

__all__ = [
    "PREVIOUS_SECRET_OVERLAP_MS",
    "TEST_EVENT_MESSAGE",
    "add_webhook_endpoint",
    "check_endpoint_url",
    "create_webhook_endpoint",
    "delete_webhook_endpoint",
    "drop_webhook_endpoint",
    "get_webhook_endpoint",
    "list_webhook_deliveries",
    "list_webhook_endpoints",
    "new_webhook_secret",
    "render_delivery",
    "render_webhook_endpoint",
    "replace_webhook_endpoint",
    "replay_delivery",
    "replay_webhook_delivery",
    "rotate_webhook_secret",
    "send_endpoint_test_event",
    "send_test_webhook",
    "update_webhook_endpoint",
]

#: How long a rotated-out secret keeps signing (rule 2).
PREVIOUS_SECRET_OVERLAP_MS = 24 * 3600 * 1000
#: The original's test event's message (reference part 2 §8).
TEST_EVENT_MESSAGE = "Stack webhook test event triggered from the Stack dashboard."
#: `POST /internal/send-test-webhook`'s answers (reference part 2 §8, quoted).
ENDPOINT_NOT_FOUND_MESSAGE = "Endpoint not found. Make sure it still exists."
NOT_DELIVERED_MESSAGE = "Webhook not delivered. Make sure the endpoint is configured correctly."

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


# --------------------------------------------------------------------------------------------------------------
# Secrets, URLs, rendering


def new_webhook_secret(entropy: Entropy) -> str:
    """A fresh endpoint secret in the Svix format: `whsec_` + base64 of 24 random bytes (the signing key)."""
    return "whsec_" + base64.b64encode(entropy.token_bytes(24)).decode("ascii")


def _ip_literal(url: WebURL) -> IPAddress | None:
    return ip_literal(url.origin.host)


def _names_this_machine(url: WebURL) -> bool:
    address = _ip_literal(url)
    if address is not None:
        return address.is_loopback or address.is_unspecified
    return url.origin.host == "localhost" or url.origin.host.endswith(".localhost")


def _same_service(url: WebURL, service: WebURL) -> bool:
    """Whether `url` reaches the service at `service`: the same host and port whatever the scheme (80 and 443 count
    as one: behind a TLS-terminating proxy the service sees http on the https origin), a loopback name (localhost,
    127.0.0.1, [::1]) standing for any other when the service is on this machine."""
    ports = {url.origin.port, service.origin.port}
    if len(ports) > 1 and not ports <= {80, 443}:
        return False
    if url.origin.host == service.origin.host:
        return True
    return _names_this_machine(url) and _names_this_machine(service)


def check_endpoint_url(ctx: RequestContext, url: str) -> None:
    """Refuse, with 400 WEBHOOK_URL_NOT_ALLOWED naming why, an endpoint URL the service must not call (rule 3).
    `url` has passed the schema (`schemas.webhooks`), so it parses."""
    parsed = parse_web_url(url)
    own = [ctx.base_url]
    host_header = ctx.request.header("host")
    if host_header:
        own.append(f"{ctx.request.scheme}://{host_header}")
    for base in own:
        try:
            service = parse_web_url(base)
        except UnsafeURL:
            continue
        if _same_service(parsed, service):
            _refuse("it points at this service itself (a webhook would call the service that sends it)")
    if ctx.options.dev_mode or ctx.options.webhook_allow_private:
        return
    refusal = host_refusal(parsed.origin.host)
    if refusal is not None:
        _refuse(f"{refusal}; set {ALLOW_PRIVATE_SETTING} to allow it")


def _refuse(reason: str) -> None:
    raise KnownError(ErrorCode.WEBHOOK_URL_NOT_ALLOWED, details={"reason": reason})


def render_webhook_endpoint(endpoint: WebhookEndpoint, now_ms: int, *, with_secret: bool = False) -> dict[str, Any]:
    """An endpoint as admin reads it; its secret only `with_secret` (rule 1), the previous one never."""
    previous_until = endpoint.previous_until_millis
    if endpoint.previous_secret is None or previous_until is None or previous_until <= now_ms:
        previous_until = None
    rendered: dict[str, Any] = {
        "id": endpoint.id,
        "url": endpoint.url,
        "description": endpoint.description,
        "event_types": None if endpoint.event_types is None else list(endpoint.event_types),
        "disabled": endpoint.disabled,
        "created_at_millis": endpoint.created_at_millis,
        "previous_secret_expires_at_millis": previous_until,
    }
    if with_secret:
        rendered["secret"] = endpoint.secret
    return rendered


def render_delivery(delivery: Delivery) -> dict[str, Any]:
    """A message on its way to one endpoint, with its attempts (oldest first)."""
    return {
        "message_id": delivery.message_id,
        "event_type": delivery.event_type,
        "state": delivery.state.value,
        "created_at_millis": delivery.created_at_millis,
        "next_attempt_at_millis": delivery.next_attempt_at_millis if delivery.state is DeliveryState.PENDING else None,
        "attempts": [
            {
                "at_millis": attempt.at_millis,
                "status_code": attempt.status_code,
                "latency_ms": attempt.latency_ms,
                "error": attempt.error,
            }
            for attempt in delivery.attempts
        ],
    }


def _load(ctx: RequestContext[object, object, WebhookEndpointParams]) -> Flow[WebhookEndpoint]:
    """The endpoint of the path, or 404 WEBHOOK_ENDPOINT_NOT_FOUND."""
    endpoint = yield from perform(LoadWebhookEndpoint(ctx.require_auth().project.id, ctx.params.endpoint_id))
    if endpoint is None:
        raise KnownError(ErrorCode.WEBHOOK_ENDPOINT_NOT_FOUND)
    return endpoint


# --------------------------------------------------------------------------------------------------------------
# Endpoints


def create_webhook_endpoint(ctx: RequestContext[WebhookEndpointCreateBody]) -> Flow[Response]:
    """POST /webhook-endpoints `{url, event_types?, description?}` -> 201, the endpoint with its `secret`."""
    body: WebhookEndpointCreateBody = ctx.body
    check_endpoint_url(ctx, body.url)
    endpoint = WebhookEndpoint(
        id=new_uuid(ctx.entropy),
        url=body.url,
        secret=new_webhook_secret(ctx.entropy),
        description=body.description,
        event_types=None if body.event_types is None else tuple(body.event_types),
        created_at_millis=ctx.now_ms,
    )
    yield from add_webhook_endpoint(ctx.require_auth().project.id, endpoint)
    return json_response(201, render_webhook_endpoint(endpoint, ctx.now_ms, with_secret=True))


def list_webhook_endpoints(ctx: RequestContext) -> Flow[Response]:
    """GET /webhook-endpoints: every endpoint of the project, oldest first, without secrets."""
    endpoints = yield from perform(ListWebhookEndpoints(ctx.require_auth().project.id))
    items = [render_webhook_endpoint(endpoint, ctx.now_ms) for endpoint in endpoints]
    return json_response(200, {"items": items, "is_paginated": False})


def get_webhook_endpoint(ctx: RequestContext[None, None, WebhookEndpointParams]) -> Flow[Response]:
    """GET /webhook-endpoints/{endpoint_id}."""
    endpoint = yield from _load(ctx)
    return json_response(200, render_webhook_endpoint(endpoint, ctx.now_ms))


def update_webhook_endpoint(
    ctx: RequestContext[WebhookEndpointUpdateBody, None, WebhookEndpointParams],
) -> Flow[Response]:
    """PATCH /webhook-endpoints/{endpoint_id} `{url?, event_types?, description?, disabled?}`: the keys sent
    change (`event_types: null`: every type), the others stay."""
    body: WebhookEndpointUpdateBody = ctx.body
    given = body.model_fields_set
    if body.url is not None:
        check_endpoint_url(ctx, body.url)
    endpoint = yield from _load(ctx)
    changes: dict[str, Any] = {
        name: getattr(body, name) for name in ("url", "description", "disabled") if name in given
    }
    if "event_types" in given:
        changes["event_types"] = None if body.event_types is None else tuple(body.event_types)
    updated = dataclasses.replace(endpoint, **changes)
    yield from replace_webhook_endpoint(ctx.require_auth().project.id, updated, endpoint)
    return json_response(200, render_webhook_endpoint(updated, ctx.now_ms))


def add_webhook_endpoint(project_id: str, endpoint: WebhookEndpoint) -> Flow[None]:
    """Store a new endpoint; the project's first skips the events recorded before it (nobody's)."""
    first = not (yield from perform(ListWebhookEndpoints(project_id)))
    guards = (EndpointCountIs(0),) if first else ()
    yield from commit(project_id, guards, (PutWebhookEndpoint(endpoint, new=True, skip_history=first),))


def replace_webhook_endpoint(
    project_id: str, endpoint: WebhookEndpoint, stored: WebhookEndpoint | None = None
) -> Flow[WebhookEndpoint | None]:
    """Store `endpoint` in place of the one of its id, guarded on that one as read (`stored`; read here when not
    given: None when there is none)."""
    if stored is None and (stored := (yield from perform(LoadWebhookEndpoint(project_id, endpoint.id)))) is None:
        return None
    yield from commit(project_id, (EndpointIs(endpoint.id, stored),), (PutWebhookEndpoint(endpoint),))
    return endpoint


def drop_webhook_endpoint(project_id: str, endpoint_id: str) -> Flow[bool]:
    """Drop the endpoint and its deliveries (pending ones too), guarded on them as read: a delivery made meanwhile
    conflicts. False when there is no such endpoint."""
    if (endpoint := (yield from perform(LoadWebhookEndpoint(project_id, endpoint_id)))) is None:
        return False
    ids = tuple(d.message_id for d in (yield from perform(ListDeliveries(project_id, endpoint_id, None))))
    guards = (EndpointIs(endpoint_id, endpoint), DeliveriesAre(endpoint_id, ids))
    drops = (*(DropDelivery(endpoint_id, message_id) for message_id in ids), DropWebhookEndpoint(endpoint_id))
    yield from commit(project_id, guards, drops)
    return True


def delete_webhook_endpoint(ctx: RequestContext[None, None, WebhookEndpointParams]) -> Flow[Response]:
    """DELETE /webhook-endpoints/{endpoint_id}: the endpoint and its deliveries (pending ones are dropped)."""
    if not (yield from drop_webhook_endpoint(ctx.require_auth().project.id, ctx.params.endpoint_id)):
        raise KnownError(ErrorCode.WEBHOOK_ENDPOINT_NOT_FOUND)
    return json_response(200, {"success": True})


def rotate_webhook_secret(ctx: RequestContext[None, None, WebhookEndpointParams]) -> Flow[Response]:
    """POST /webhook-endpoints/{endpoint_id}/rotate-secret -> 200, the endpoint with its new `secret`; the
    previous one signs too until `previous_secret_expires_at_millis` (rule 2)."""
    endpoint = yield from _load(ctx)
    rotated = dataclasses.replace(
        endpoint,
        secret=new_webhook_secret(ctx.entropy),
        previous_secret=endpoint.secret,
        previous_until_millis=ctx.now_ms + PREVIOUS_SECRET_OVERLAP_MS,
    )
    yield from replace_webhook_endpoint(ctx.require_auth().project.id, rotated, endpoint)
    return json_response(200, render_webhook_endpoint(rotated, ctx.now_ms, with_secret=True))


def list_webhook_deliveries(ctx: RequestContext[None, WebhookDeliveriesQuery, WebhookEndpointParams]) -> Flow[Response]:
    """GET /webhook-endpoints/{endpoint_id}/deliveries?limit=: the endpoint's recent messages, newest first, each
    with its attempts (status code, latency, error)."""
    endpoint = yield from _load(ctx)
    deliveries = yield from perform(ListDeliveries(ctx.require_auth().project.id, endpoint.id, ctx.query.limit))
    return json_response(200, {"items": [render_delivery(d) for d in deliveries], "is_paginated": False})


def replay_webhook_delivery(ctx: RequestContext[None, None, WebhookMessageParams]) -> Flow[Response]:
    """POST /webhook-endpoints/{endpoint_id}/deliveries/{message_id}/replay: the message is due again now (same
    id, attempts kept, the retry schedule restarted) -> 200, the delivery."""
    endpoint = yield from _load(ctx)
    message_id = ctx.params.message_id
    replayed = yield from replay_delivery(ctx.require_auth().project.id, endpoint.id, message_id, ctx.now_ms)
    if replayed is None:
        raise KnownError(ErrorCode.WEBHOOK_MESSAGE_NOT_FOUND, details={"message_id": message_id})
    return json_response(200, render_delivery(replayed))


def replay_delivery(project_id: str, endpoint_id: str, message_id: str, now_ms: int) -> Flow[Delivery | None]:
    """Make the delivery of `message_id` to the endpoint pending and due at `now_ms` again (its attempts kept, the
    retry schedule restarted), guarded on it as read; None when there is none (or its event is no longer kept)."""
    delivery = yield from perform(LoadDelivery(project_id, endpoint_id, message_id))
    if delivery is None:
        return None
    yield from commit(project_id, (DeliveryIs(delivery),), (RestartDelivery(endpoint_id, message_id, now_ms),))
    return dataclasses.replace(delivery, state=DeliveryState.PENDING, next_attempt_at_millis=now_ms)


def _test_event_data(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {"message": TEST_EVENT_MESSAGE, "endpointUrl": endpoint.url}


def send_endpoint_test_event(ctx: RequestContext[None, None, WebhookEndpointParams]) -> Flow[Response]:
    """POST /webhook-endpoints/{endpoint_id}/test: a `stack.test` event for this endpoint only, due now -> 200
    `{message_id, type, data}` (its delivery shows in the endpoint's deliveries)."""
    endpoint = yield from _load(ctx)
    data = _test_event_data(endpoint)
    event = yield from perform(
        AddTestEvent(ctx.require_auth().project.id, endpoint.id, orjson.dumps(data).decode(), ctx.now_ms)
    )
    return json_response(200, {"message_id": event.id, "type": TEST_EVENT_TYPE, "data": data})


def send_test_webhook(ctx: RequestContext[SendTestWebhookBody]) -> Flow[Response]:
    """POST /internal/send-test-webhook `{endpoint_id}` (the original's dashboard route) -> always 200 `{success,
    error_message?}`: an unknown endpoint is "Endpoint not found. Make sure it still exists."; else a `stack.test`
    event is recorded for it and `success` says whether a delivery of it has succeeded."""
    body: SendTestWebhookBody = ctx.body
    project_id = ctx.require_auth().project.id
    endpoint = None
    if _UUID.fullmatch(body.endpoint_id):
        endpoint = yield from perform(LoadWebhookEndpoint(project_id, body.endpoint_id))
    if endpoint is None:
        return json_response(200, {"success": False, "error_message": ENDPOINT_NOT_FOUND_MESSAGE})
    data = orjson.dumps(_test_event_data(endpoint)).decode()
    event = yield from perform(AddTestEvent(project_id, endpoint.id, data, ctx.now_ms))
    deliveries = yield from perform(ListDeliveries(project_id, endpoint.id))
    delivered = any(d.message_id == event.id and d.state is DeliveryState.SUCCEEDED for d in deliveries)
    if delivered:
        return json_response(200, {"success": True})
    return json_response(200, {"success": False, "error_message": NOT_DELIVERED_MESSAGE})
