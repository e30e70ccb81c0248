"""Dev/test mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.effects.base import StorageEffect
from identity_proto.records import ClockOverride

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


@dataclass(frozen=True, slots=True)
class LoadClockOverride(StorageEffect["ClockOverride | None"]):
    """The stored clock override (dev/test mode), or None when the service runs on the host's clock."""


@dataclass(frozen=True, slots=True)
class SetClockOverride(StorageEffect[None]):
    """Store a clock override, or remove it (None)."""

    override: ClockOverride | None


@dataclass(frozen=True, slots=True)
class ResetProjectData(StorageEffect[bool]):
    """Remove every user, team, membership, session, code and e-mail of a project, keeping the project itself
    (id, keys, config, signing key). False when there is no such project. A test-only operation: the memory store
    does it at once; Redis scans the project's keys, so a write racing the reset may survive it."""

    project_id: str
