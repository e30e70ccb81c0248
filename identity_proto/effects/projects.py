"""Projects: their effects, and the typed helpers flows call. Writes are a `Commit`: a new project (`PutProject`,
guarded by `IsAbsent`), a change of some of its fields (`PatchProject`, guarded by `RecordExists`)."""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from identity_proto.changes import Pairs, ProjectConfigChanges
from identity_proto.effects.base import Flow, StorageEffect, perform
from identity_proto.effects.commit import CommitConflict, CommitGuard, CommitWrite, IsAbsent, RecordKind, commit
from identity_proto.effects.teams import RecordExists
from identity_proto.records import Project, ProjectKeys

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


@dataclass(frozen=True, slots=True)
class LoadProject(StorageEffect["Project | None"]):
    """The project with this id, or None."""

    project_id: str


@dataclass(frozen=True, slots=True)
class ProjectConfigIs(CommitGuard):
    """The project's config fields named in `expected` hold the values there (a compare-and-set on what a change
    was decided on). Guard the project's existence first (`RecordExists`)."""

    expected: ProjectConfigChanges

    def __post_init__(self) -> None:
        object.__setattr__(self, "expected", ProjectConfigChanges.of(self.expected))


@dataclass(frozen=True, slots=True)
class PutProject(CommitWrite):
    """Store a project (guard its id with `IsAbsent`) and list it with every project."""

    project: Project


@dataclass(frozen=True, slots=True)
class PatchProject(CommitWrite):
    """Set `display_name` if not None, each (config field, value) of `config`, and the key hashes if not None,
    leaving every other field as stored (two concurrent changes of different fields both survive). New key hashes
    (start-up's configuration) list the project again too (repairing an entry a crash lost)."""

    project_id: str
    display_name: str | None = None
    config: ProjectConfigChanges = field(default_factory=ProjectConfigChanges)
    keys: ProjectKeys | None = None

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
    """Store a new project. False (and nothing changes) when a project with its id exists."""
    try:
        yield from commit(project.id, (IsAbsent(RecordKind.PROJECT, project.id),), (PutProject(project),))
    except CommitConflict:
        return False
    return True


def ensure_project(project: Project) -> Flow[Project]:
    """Store `project` if its id is free; otherwise keep the stored record but replace its key hashes with
    `project.keys` (keys configured at start-up are authoritative; config edits made since are kept).
    Returns the record as stored afterwards."""
    if (yield from create_project(project)):
        return project
    ensured = yield from update_project(project.id, keys=project.keys)
    return ensured if ensured is not None else (yield from ensure_project(project))  # deleted meanwhile


def update_project(
    project_id: str,
    display_name: str | None = None,
    config: ProjectConfigChanges | Pairs | None = None,
    keys: ProjectKeys | None = None,
) -> Flow[Project | None]:
    """Set the fields given (`PatchProject`). Returns the updated project, or None when it does not exist."""
    change = PatchProject(project_id, display_name, ProjectConfigChanges.of(config or ()), keys)
    project = (RecordKind.PROJECT, project_id)
    try:
        (updated,) = yield from commit(project_id, (RecordExists(*project),), (change,), returns=(project,))
    except CommitConflict:
        return None
    return updated  # type: ignore[no-any-return]


def list_projects() -> Flow[tuple[Project, ...]]:
    """Implements `ListProjects`."""
    return (yield from perform(ListProjects()))


def delete_project(project_id: str) -> Flow[bool]:
    """Implements `DeleteProject`."""
    return (yield from perform(DeleteProject(project_id)))
