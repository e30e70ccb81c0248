"""The in-memory store: dicts behind one lock. For tests, embedding, and single-process deployments.

Contract (identity_proto.effects): every effect is atomic. Here that is one `threading.RLock` held for the whole
of each effect, so a WSGI host calling from many threads (or an ASGI host from its event loop) never sees a half
done write. No effect does I/O or waits while holding the lock, so the async twin simply calls the sync store.

Records are immutable dataclasses: readers get the stored object itself, never a copy that could drift.
Expiry is decided by the core against the request's clock; this store keeps what it is told to keep.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from identity_proto.effects import (
    CreateProject,
    DeleteProject,
    EnsureProject,
    ListProjects,
    LoadProject,
    StorageEffect,
    UpdateProject,
)
from identity_proto.records import Project

__all__ = ["AsyncMemoryStore", "MemoryStore"]

T = TypeVar("T")
E = TypeVar("E", bound=StorageEffect[Any])

_Handler = Callable[["MemoryStore", Any], Any]
_HANDLERS: dict[type[StorageEffect[Any]], _Handler] = {}


def _performs(effect_type: type[E]) -> Callable[[Callable[[MemoryStore, E], Any]], Callable[[MemoryStore, E], Any]]:
    """Register the function below as this store's implementation of `effect_type`."""

    def register(handler: Callable[[MemoryStore, E], Any]) -> Callable[[MemoryStore, E], Any]:
        _HANDLERS[effect_type] = handler
        return handler

    return register


class MemoryStore:
    """A thread-safe, in-process store."""

    #: The effect types this store performs (the contract tests check that it is all of them).
    performs = _HANDLERS

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.projects: dict[str, Project] = {}

    def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect atomically."""
        handler = _HANDLERS.get(type(effect))
        if handler is None:
            raise TypeError(f"MemoryStore cannot perform {type(effect).__name__}")
        with self._lock:
            return cast(T, handler(self, effect))

    def close(self) -> None:
        """Nothing to release."""


class AsyncMemoryStore:
    """The asyncio face of a `MemoryStore` (the same data; effects never block, so no thread is needed)."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.sync = store if store is not None else MemoryStore()

    async def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect atomically."""
        return self.sync.apply(effect)

    async def aclose(self) -> None:
        """Nothing to release."""


# --------------------------------------------------------------------------------------------------------------
# Projects


@_performs(LoadProject)
def _load_project(store: MemoryStore, effect: LoadProject) -> Project | None:
    return store.projects.get(effect.project_id)


@_performs(CreateProject)
def _create_project(store: MemoryStore, effect: CreateProject) -> bool:
    if effect.project.id in store.projects:
        return False
    store.projects[effect.project.id] = effect.project
    return True


@_performs(EnsureProject)
def _ensure_project(store: MemoryStore, effect: EnsureProject) -> Project:
    stored = store.projects.get(effect.project.id)
    result = effect.project if stored is None else dataclasses.replace(stored, keys=effect.project.keys)
    store.projects[result.id] = result
    return result


@_performs(UpdateProject)
def _update_project(store: MemoryStore, effect: UpdateProject) -> Project | None:
    stored = store.projects.get(effect.project_id)
    if stored is None:
        return None
    changes: dict[str, Any] = {}
    if effect.display_name is not None:
        changes["display_name"] = effect.display_name
    if effect.config:
        changes["config"] = dataclasses.replace(stored.config, **dict(effect.config))
    updated = dataclasses.replace(stored, **changes)
    store.projects[updated.id] = updated
    return updated


@_performs(ListProjects)
def _list_projects(store: MemoryStore, effect: ListProjects) -> tuple[Project, ...]:
    return tuple(sorted(store.projects.values(), key=lambda p: (p.created_at_millis, p.id)))


@_performs(DeleteProject)
def _delete_project(store: MemoryStore, effect: DeleteProject) -> bool:
    return store.projects.pop(effect.project_id, None) is not None
