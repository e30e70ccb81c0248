"""Queries of the endpoints about the service itself."""

from __future__ import annotations

from pydantic import Field

from identity_proto.schemas.base import Query


class HealthQuery(Query):
    """GET /health: `db` (any value, as the original's) also asks the store to answer."""

    db: str | None = Field(default=None, max_length=16)
