"""E-mail: the outbox."""

from __future__ import annotations

from pydantic import Field, field_validator

from identity_proto.schemas.base import Query, _email


class OutboxQuery(Query):
    """GET /emails/outbox."""

    to: str | None = Field(default=None, max_length=256)
    _to_rule = field_validator("to")(_email)
    limit: int = Field(default=100, ge=1, le=1000)
