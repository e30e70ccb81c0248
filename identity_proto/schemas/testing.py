"""Dev/test mode."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from identity_proto.schemas.base import Body


class ClockBody(Body):
    """POST /testing/clock: any of, applied in this order: reset, freeze (true/false), set, advance."""

    reset: bool = False
    freeze: bool | None = None
    set_millis: int | None = Field(default=None, ge=0)
    advance_millis: int | None = None


class ImportBody(Body):
    """POST /testing/projects/{project_id}/import: an export document (checked by the import itself)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
