"""The effect vocabulary: every operation a flow needs from the outside world, as a frozen value.

A flow is a generator that *yields* effects and is resumed with their results (`Flow[R]` returns `R`). Drivers
(`identity_proto.drivers`) perform the effects:

- `StorageEffect`: performed by a store (backends/). Each one is **atomic by contract**: a backend performs it
  all or not at all, and no other effect observes it half done. Two writes that must happen together are one
  effect. Backends raise only `StorageUnavailable`; domain outcomes are return values.
- `ComputeEffect`: CPU-heavy pure work (password hashing). `compute()` runs it; the async driver runs it in a
  worker thread so the event loop never stalls.

Each effect's docstring is its contract; each backend implements it once. The typed helpers at the bottom are what
flows call: `project = yield from load_project(project_id)`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from identity_proto.records import Project

__all__ = [
    "ComputeEffect",
    "CreateProject",
    "DeleteProject",
    "Effect",
    "EnsureProject",
    "Flow",
    "ListProjects",
    "LoadProject",
    "StorageEffect",
    "UpdateProject",
    "create_project",
    "delete_project",
    "ensure_project",
    "list_projects",
    "load_project",
    "perform",
    "update_project",
]

R = TypeVar("R", covariant=True)
T = TypeVar("T")


class Effect(Generic[R]):
    """Something a flow needs done; `R` is the type of its result."""

    __slots__ = ()


class StorageEffect(Effect[R]):
    """An atomic storage operation, performed by a store."""

    __slots__ = ()


class ComputeEffect(Effect[R]):
    """CPU-heavy pure work, performed by the driver (in a thread under the async driver)."""

    __slots__ = ()

    def compute(self) -> R:
        """Do the work and return its result."""
        raise NotImplementedError


#: A generator flow: yields effects, is sent their results, returns `T`.
Flow = Generator[Effect[Any], Any, T]


def perform(effect: Effect[T]) -> Flow[T]:
    """Yield one effect and return its result, typed."""
    result = yield effect
    return cast(T, result)


# --------------------------------------------------------------------------------------------------------------
# Projects


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
    config: tuple[tuple[str, Any], ...] = ()


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
    project_id: str, *, display_name: str | None = None, config: tuple[tuple[str, Any], ...] = ()
) -> Flow[Project | None]:
    """Implements `UpdateProject`."""
    return (yield from perform(UpdateProject(project_id, display_name, config)))


def list_projects() -> Flow[tuple[Project, ...]]:
    """Implements `ListProjects`."""
    return (yield from perform(ListProjects()))


def delete_project(project_id: str) -> Flow[bool]:
    """Implements `DeleteProject`."""
    return (yield from perform(DeleteProject(project_id)))
