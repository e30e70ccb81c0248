"""Webhook endpoints (admin): the bodies and path parameters of `/webhook-endpoints` and
`/internal/send-test-webhook`.

What the schema checks: types, lengths, the URL's syntax (`identity_proto.urls`: an http(s) URL every parser reads
alike, without credentials) and that `event_types` names known event types (`identity_proto.events.EVENT_TYPES`).
Whether the URL may be called at all (the service's own origin, private addresses) depends on the service's
options, so the flow decides it (`flows.webhooks.check_endpoint_url`), with its own known error.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from identity_proto.events import EVENT_TYPES
from identity_proto.schemas.base import (
    UUID_PATTERN,
    WEB_URL_PATTERN,
    Body,
    Query,
    _items_rule,
    _not_null,
    documented,
    is_uuid,
)
from identity_proto.urls import UnsafeURL, parse_web_url

#: The longest endpoint URL accepted.
MAX_WEBHOOK_URL_LENGTH = 2048
MAX_WEBHOOK_DESCRIPTION_LENGTH = 4096
#: A message id: `msg_` + the project's tag + its position (`identity_proto.events.message_id`).
_MESSAGE_ID_PATTERN = r"^msg_[0-9A-Za-z-]{1,64}$"


@documented({"pattern": WEB_URL_PATTERN})
def _endpoint_url(value: str | None) -> str | None:
    """An endpoint URL, normalised as a browser reads it (what is checked is what is called)."""
    if value is None:
        return None
    try:
        return parse_web_url(value).href
    except UnsafeURL as exc:
        raise ValueError(f"is not a valid webhook URL: it {exc}") from None


@documented(lambda schema: _items_rule(schema, {"enum": list(EVENT_TYPES)}, minItems=1))
def _event_types(value: list[str] | None) -> tuple[str, ...] | None:
    """Known event types, each once, in the order given; null: every type. An empty list would deliver nothing
    at all, which is never what a caller means (inferred): it is refused, pointing at `disabled` and null."""
    if value is None:
        return None
    if not value:
        raise ValueError("must not be empty (null delivers every type; disable the endpoint to deliver none)")
    unknown = [kind for kind in value if kind not in EVENT_TYPES]
    if unknown:
        raise ValueError(f"contains unknown event types: {', '.join(unknown)}. Known: {', '.join(EVENT_TYPES)}")
    return tuple(dict.fromkeys(value))


class WebhookEndpointCreateBody(Body):
    """POST /webhook-endpoints."""

    url: str = Field(max_length=MAX_WEBHOOK_URL_LENGTH)
    event_types: list[str] | None = None
    description: str = Field(default="", max_length=MAX_WEBHOOK_DESCRIPTION_LENGTH)

    _url = field_validator("url")(_endpoint_url)
    _types = field_validator("event_types")(_event_types)
    _non_null = field_validator("description", mode="before")(_not_null)


class WebhookEndpointUpdateBody(Body):
    """PATCH /webhook-endpoints/{endpoint_id}: only the keys sent change; `event_types: null` means every type
    (so the flow tells an absent key from a null one by `model_fields_set`)."""

    url: str | None = Field(default=None, max_length=MAX_WEBHOOK_URL_LENGTH)
    event_types: list[str] | None = None
    description: str | None = Field(default=None, max_length=MAX_WEBHOOK_DESCRIPTION_LENGTH)
    disabled: bool | None = None

    _url = field_validator("url")(_endpoint_url)
    _types = field_validator("event_types")(_event_types)
    _non_null = field_validator("url", "description", "disabled", mode="before")(_not_null)


class SendTestWebhookBody(Body):
    """POST /internal/send-test-webhook (the original's dashboard route)."""

    endpoint_id: str = Field(max_length=64)


@documented({"pattern": UUID_PATTERN})
def _uuid(value: str) -> str:
    if not is_uuid(value):
        raise ValueError("must be a valid UUID")
    return value


class WebhookEndpointParams(Query):
    """Path parameters naming a webhook endpoint."""

    endpoint_id: str
    _id = field_validator("endpoint_id")(_uuid)


class WebhookMessageParams(WebhookEndpointParams):
    """Path parameters naming one message (event) of an endpoint's deliveries."""

    message_id: str = Field(pattern=_MESSAGE_ID_PATTERN)


class WebhookDeliveriesQuery(Query):
    """GET /webhook-endpoints/{endpoint_id}/deliveries: how many of the newest deliveries (at most 100)."""

    limit: int = Field(default=50, ge=1, le=100)
