"""Projects: their effects, and the typed helpers flows call."""

from __future__ import annotations

from dataclasses import dataclass, field

from identity_proto.changes import ProjectConfigChanges
from identity_proto.effects.base import Flow, StorageEffect, perform
from identity_proto.records import Project


@dataclass(frozen=True, slots=True)
class LoadProject(StorageEffect["Project | None"]):
    """The project with this id, or None."""

    project_id: str


@dataclass(frozen=True, slots=True)
class CreateProject(StorageEffect[bool]):
    """Store a new project. False (and nothing changes) when a project with its id exists."""

    project: Project


@dataclass(frozen=True, slots=True)
class EnsureProject(StorageEffect[Project]):
    """Store `project` if its id is free; otherwise keep the stored record but replace its key hashes with
    `project.keys` (keys configured at start-up are authoritative; config edits made since are kept).
    Returns the record as stored afterwards."""

    project: Project


@dataclass(frozen=True, slots=True)
class UpdateProject(StorageEffect["Project | None"]):
    """Field-level update: set `display_name` if not None, and each (config field, value) of `config`, leaving
    every other field as stored (so two concurrent updates of different fields both survive).
    Returns the updated project, or None when it does not exist."""

    project_id: str
    display_name: str | None = None
    config: ProjectConfigChanges = field(default_factory=ProjectConfigChanges)

    def __post_init__(self) -> None:
        # Loose (field, value) pairs are accepted and validated here, once (stores never check names again).
        object.__setattr__(self, "config", ProjectConfigChanges.of(self.config))


@dataclass(frozen=True, slots=True)
class ListProjects(StorageEffect[tuple[Project, ...]]):
    """Every project, oldest first (ties by id)."""


@dataclass(frozen=True, slots=True)
class DeleteProject(StorageEffect[bool]):
    """Remove a project and all of its data. False when it did not exist."""

    project_id: str


def load_project(project_id: str) -> Flow[Project | None]:
    """Implements `LoadProject`."""
    return (yield from perform(LoadProject(project_id)))


def create_project(project: Project) -> Flow[bool]:
    """Implements `CreateProject`."""
    return (yield from perform(CreateProject(project)))


def ensure_project(project: Project) -> Flow[Project]:
    """Implements `EnsureProject`."""
    return (yield from perform(EnsureProject(project)))


def update_project(
    project_id: str, *, display_name: str | None = None, config: ProjectConfigChanges | None = None
) -> Flow[Project | None]:
    """Implements `UpdateProject`."""
    return (yield from perform(UpdateProject(project_id, display_name, config or ProjectConfigChanges())))


def list_projects() -> Flow[tuple[Project, ...]]:
    """Implements `ListProjects`."""
    return (yield from perform(ListProjects()))


def delete_project(project_id: str) -> Flow[bool]:
    """Implements `DeleteProject`."""
    return (yield from perform(DeleteProject(project_id)))
