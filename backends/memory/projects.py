"""The memory store: projects."""

from __future__ import annotations

from typing import Any

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import DeleteProject, ListProjects, LoadProject, PatchProject, ProjectConfigIs, PutProject
from identity_proto.records import Project, replaced


@_performs(LoadProject)
def _load_project(store: MemoryStore, effect: LoadProject) -> Project | None:
    return store.projects.get(effect.project_id)


@checks(ProjectConfigIs)
def _project_config_is(tenant: Tenant, guard: ProjectConfigIs) -> bool:
    stored = tenant.store.projects.get(tenant.project_id)
    return stored is not None and all(getattr(stored.config, name) == value for name, value in guard.expected)


@applies(PutProject)
def _put_project(tenant: Tenant, write: PutProject) -> None:
    tenant.store.projects[write.project.id] = write.project


@applies(PatchProject)
def _patch_project(tenant: Tenant, write: PatchProject) -> None:
    stored = tenant.store.projects[write.project_id]
    changes: dict[str, Any] = {"config": write.config.apply(stored.config)}
    if write.display_name is not None:
        changes["display_name"] = write.display_name
    if write.keys is not None:
        changes["keys"] = write.keys
    tenant.store.projects[write.project_id] = replaced(stored, changes)


@_performs(ListProjects)
def _list_projects(store: MemoryStore, effect: ListProjects) -> tuple[Project, ...]:
    return tuple(sorted(store.projects.values(), key=lambda p: (p.created_at_millis, p.id)))


@_performs(DeleteProject)
def _delete_project(store: MemoryStore, effect: DeleteProject) -> bool:
    store.tenants.pop(effect.project_id, None)
    store.webhook_projects.discard(effect.project_id)  # webhooks
    return store.projects.pop(effect.project_id, None) is not None
