"""Test-only operations over HTTP, for test suites in other languages. These routes exist only when the service
runs in dev/test mode (a production service answers 404 for every one of them), and only the internal project's
admin may call them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.context import RequestContext
from identity_proto.effects import Flow, LoadClockOverride, ResetProjectData, SetClockOverride, perform
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.portability import export_project_data, import_project_data
from identity_proto.http import Response
from identity_proto.records import INTERNAL_PROJECT_ID, ClockOverride
from identity_proto.render import json_response

if TYPE_CHECKING:
    from identity_proto.schemas import AnyProjectIdParams, ClockBody, ImportBody

__all__ = ["export_project", "get_clock", "import_project", "reset_project", "set_clock"]


def _require_internal(ctx: RequestContext) -> None:
    if ctx.require_auth().project.id != INTERNAL_PROJECT_ID:
        raise KnownError(ErrorCode.EXPECTED_INTERNAL_PROJECT)


def _clock_json(ctx: RequestContext, override: ClockOverride | None) -> dict[str, object]:
    return {
        "now_millis": ctx.now_ms,
        "frozen": override is not None and override.frozen_ms is not None,
        "offset_millis": 0 if override is None or override.frozen_ms is not None else override.offset_ms,
    }


def get_clock(ctx: RequestContext) -> Flow[Response]:
    """GET /testing/clock: the service's time and whether it is frozen."""
    _require_internal(ctx)
    override = yield from perform(LoadClockOverride())
    return json_response(200, _clock_json(ctx, override))


def set_clock(ctx: RequestContext[ClockBody]) -> Flow[Response]:
    """POST /testing/clock {reset?, freeze?, set_millis?, advance_millis?}: codes, tokens and sessions expire
    against this clock exactly as against real time."""
    _require_internal(ctx)
    body: ClockBody = ctx.body
    override = yield from perform(LoadClockOverride())
    now = ctx.now_ms
    host_now = now if override is None else (now - override.offset_ms if override.frozen_ms is None else now)
    if body.reset:
        override, now = None, host_now
    frozen = override is not None and override.frozen_ms is not None
    if body.freeze is not None:
        frozen = body.freeze
    if body.set_millis is not None:
        now = body.set_millis
    if body.advance_millis is not None:
        now += body.advance_millis
    if body.reset and body.freeze is None and body.set_millis is None and body.advance_millis is None:
        new: ClockOverride | None = None
    else:
        new = ClockOverride(frozen_ms=now) if frozen else ClockOverride(offset_ms=now - host_now)
    yield from perform(SetClockOverride(new))
    return json_response(200, {"now_millis": now, "frozen": frozen, "offset_millis": 0 if frozen else now - host_now})


def reset_project(ctx: RequestContext[None, None, AnyProjectIdParams]) -> Flow[Response]:
    """POST /testing/projects/{project_id}/reset: every user, team, session, code and e-mail of one project goes;
    the project (keys, config) and every other project stay."""
    _require_internal(ctx)
    project_id: str = ctx.params.project_id
    if not (yield from perform(ResetProjectData(project_id))):
        raise KnownError(ErrorCode.PROJECT_NOT_FOUND, details={"project_id": project_id})
    return json_response(200, {"success": True})


def export_project(ctx: RequestContext[None, None, AnyProjectIdParams]) -> Flow[Response]:
    """GET /testing/projects/{project_id}/export: the project's data as JSON, secrets as the store keeps them
    (hashes; webhook signing secrets as they are: `flows.portability` says what is carried and what never)."""
    _require_internal(ctx)
    return json_response(200, (yield from export_project_data(ctx.params.project_id, ctx.now_ms)))


def import_project(ctx: RequestContext[ImportBody, None, AnyProjectIdParams]) -> Flow[Response]:
    """POST /testing/projects/{project_id}/import: add an export's records (all of them, or nothing)."""
    _require_internal(ctx)
    data = ctx.body.model_dump()
    counts = yield from import_project_data(ctx.params.project_id, data)
    return json_response(200, {"imported": counts})
