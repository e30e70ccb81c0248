"""The route table: (method, path pattern) -> flow, with who may call it and how its inputs are validated.

Paths are relative to the service root; every endpoint lives under /api/v1.
"""

from __future__ import annotations

from identity_proto.flows import meta, projects
from identity_proto.routing import ADMIN_ONLY, Route
from identity_proto.schemas import ProjectCreateBody, ProjectIdParams, ProjectUpdateBody

__all__ = ["API_PREFIX", "ROUTES"]

API_PREFIX = "/api/v1"

ROUTES: tuple[Route, ...] = (
    Route("GET", API_PREFIX, meta.welcome, access=None),
    Route("GET", f"{API_PREFIX}/projects/current", projects.get_current_project),
    Route("PATCH", f"{API_PREFIX}/projects/current", projects.update_current_project, ADMIN_ONLY, ProjectUpdateBody),
    Route("GET", f"{API_PREFIX}/internal/projects", projects.list_projects_endpoint, ADMIN_ONLY),
    Route("POST", f"{API_PREFIX}/internal/projects", projects.create_project_endpoint, ADMIN_ONLY, ProjectCreateBody),
    Route(
        "DELETE",
        f"{API_PREFIX}/internal/projects/{{project_id}}",
        projects.delete_project_endpoint,
        ADMIN_ONLY,
        params=ProjectIdParams,
    ),
)
