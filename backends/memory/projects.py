"""The memory store: projects."""

from __future__ import annotations

from typing import Any

from backends.memory.store import MemoryStore, _performs
from identity_proto.effects import CreateProject, DeleteProject, EnsureProject, ListProjects, LoadProject, UpdateProject
from identity_proto.records import Project, replaced


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
    result = effect.project if stored is None else replaced(stored, {"keys": effect.project.keys})
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
        changes["config"] = effect.config.apply(stored.config)
    updated = replaced(stored, changes)
    store.projects[updated.id] = updated
    return updated


@_performs(ListProjects)
def _list_projects(store: MemoryStore, effect: ListProjects) -> tuple[Project, ...]:
    return tuple(sorted(store.projects.values(), key=lambda p: (p.created_at_millis, p.id)))


@_performs(DeleteProject)
def _delete_project(store: MemoryStore, effect: DeleteProject) -> bool:
    store.tenants.pop(effect.project_id, None)
    store.webhook_projects.discard(effect.project_id)  # webhooks
    return store.projects.pop(effect.project_id, None) is not None
