"""Dev/test mode: the shared clock override and resetting a project's data."""

from __future__ import annotations

import dataclasses

import orjson

from backends.redis.codecs import _json
from backends.redis.keys import KeySpace
from backends.redis.plan import Call, Plan, _plans
from backends.redis.projects import _unlink_matching
from identity_proto.effects import LoadClockOverride, ResetProjectData, SetClockOverride
from identity_proto.records import ClockOverride


@_plans(LoadClockOverride)
def _load_clock_override(keys: KeySpace, effect: LoadClockOverride) -> Plan[ClockOverride | None]:
    raw = yield Call("GET", keys.clock_override())
    return None if raw is None else ClockOverride(**orjson.loads(raw))


@_plans(SetClockOverride)
def _set_clock_override(keys: KeySpace, effect: SetClockOverride) -> Plan[None]:
    if effect.override is None:
        yield Call("DEL", keys.clock_override())
    else:
        yield Call("SET", keys.clock_override(), _json(dataclasses.asdict(effect.override)))


@_plans(ResetProjectData)
def _reset_project_data(keys: KeySpace, effect: ResetProjectData) -> Plan[bool]:
    # Like DeleteProject, a SCAN of the project's slot prefix, keeping its record: a test-only operation, so a
    # write racing the reset may survive it (repeating the reset removes it).
    record = keys.project(effect.project_id)
    if not (yield Call("EXISTS", record)):
        return False
    yield from _unlink_matching(keys.project_pattern(effect.project_id), keep=record)
    yield Call("SREM", keys.webhook_projects, effect.project_id)  # webhooks: the set is in its own slot
    return True
