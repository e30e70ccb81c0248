"""The memory store: dev/test mode."""

from __future__ import annotations

from backends.memory.store import MemoryStore, _performs
from identity_proto.effects import LoadClockOverride, ResetProjectData, SetClockOverride
from identity_proto.records import ClockOverride


@_performs(LoadClockOverride)
def _load_clock_override(store: MemoryStore, effect: LoadClockOverride) -> ClockOverride | None:
    return store.clock_override


@_performs(SetClockOverride)
def _set_clock_override(store: MemoryStore, effect: SetClockOverride) -> None:
    store.clock_override = effect.override


@_performs(ResetProjectData)
def _reset_project_data(store: MemoryStore, effect: ResetProjectData) -> bool:
    if effect.project_id not in store.projects:
        return False
    store.tenants.pop(effect.project_id, None)
    store.webhook_projects.discard(effect.project_id)  # webhooks
    return True
