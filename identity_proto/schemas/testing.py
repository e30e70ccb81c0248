"""Dev/test mode."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from identity_proto.schemas.base import Body

#: 9999-12-31T23:59:59.999Z: the last instant a four-digit ISO date names; clock inputs stay within it (on both
#: stores: Redis and Lua count in doubles, and a timestamp past 2**53 ms would lose its last digits).
MAX_MILLIS = 253_402_300_799_999


class ClockBody(Body):
    """POST /testing/clock: any of, applied in this order: reset, freeze (true/false), set, advance."""

    reset: bool = False
    freeze: bool | None = None
    set_millis: int | None = Field(default=None, ge=0, le=MAX_MILLIS)
    advance_millis: int | None = Field(default=None, ge=-MAX_MILLIS, le=MAX_MILLIS)


class ImportBody(Body):
    """POST /testing/projects/{project_id}/import: an export document (checked by the import itself)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
