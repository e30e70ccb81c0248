"""Projects: the current project (read by anyone, configured by admin), and the internal project's management
endpoints, plus the start-up flow that makes sure a host's configured projects exist."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from identity_proto.auth import AccessType, check_project_admits
from identity_proto.changes import ProjectConfigChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    Flow,
    create_project,
    delete_project,
    ensure_project,
    list_projects,
    load_project,
    update_project,
)
from identity_proto.errors import ErrorCode, KnownError, PlainError
from identity_proto.flows.oauth_accounts import configured_providers  # OAuth accounts
from identity_proto.http import Response
from identity_proto.records import INTERNAL_PROJECT_ID, Project, ProjectConfig, ProjectKeys
from identity_proto.render import json_response, render_original_project, render_project
from identity_proto.tokens import Entropy, access_token_key, hash_secret, new_api_key, new_signing_key, new_uuid

if TYPE_CHECKING:
    from identity_proto.schemas import (
        AnyProjectIdParams,
        JwksQuery,
        OriginalProjectUpdateBody,
        ProjectConfigPatch,
        ProjectCreateBody,
        ProjectIdParams,
        ProjectUpdateBody,
    )

__all__ = [
    "IssuedKeys",
    "ProjectSeed",
    "bootstrap_projects",
    "create_project_endpoint",
    "delete_current_project",
    "delete_project_endpoint",
    "disable_project",
    "get_current_project",
    "get_current_project_original",
    "jwks",
    "list_projects_endpoint",
    "new_project",
    "update_current_project",
    "update_current_project_original",
]


@dataclass(frozen=True, slots=True)
class IssuedKeys:
    """A project's API keys in plaintext: shown once, when they are made, and never stored."""

    publishable_client_key: str
    secret_server_key: str
    super_secret_admin_key: str

    def hashed(self) -> ProjectKeys:
        """What the store keeps of them."""
        return ProjectKeys(
            publishable_client_key_hash=hash_secret(self.publishable_client_key),
            secret_server_key_hash=hash_secret(self.secret_server_key),
            super_secret_admin_key_hash=hash_secret(self.super_secret_admin_key),
        )


@dataclass(frozen=True, slots=True)
class ProjectSeed:
    """A project a host configures at start-up (the default project): its id, name and keys."""

    id: str
    display_name: str
    keys: IssuedKeys


def new_project(
    entropy: Entropy,
    now_ms: int,
    display_name: str,
    config: ProjectConfig | None = None,
    *,
    project_id: str | None = None,
    keys: IssuedKeys | None = None,
) -> tuple[Project, IssuedKeys]:
    """A new project record (fresh id and signing key unless given) and its plaintext keys."""
    if keys is None:
        keys = IssuedKeys(
            publishable_client_key=new_api_key(entropy, "pck_"),
            secret_server_key=new_api_key(entropy, "ssk_"),
            super_secret_admin_key=new_api_key(entropy, "sak_"),
        )
    project = Project(
        id=project_id or new_uuid(entropy),
        display_name=display_name,
        created_at_millis=now_ms,
        signing_key=new_signing_key(entropy),
        config=config or ProjectConfig(),
        keys=keys.hashed(),
    )
    return project, keys


def bootstrap_projects(
    default: ProjectSeed | None,
    internal_admin_key: str | None,
    *,
    now_ms: int,
    entropy: Entropy,
    disable: tuple[str, ...] = (),
) -> Flow[tuple[str, ...]]:
    """Make sure the internal project and the host's default project exist, with the configured keys, and that the
    projects named in `disable` (production: the dev project, whose keys are public) authenticate nothing.

    Safe to run by every worker at every start: existing projects keep their config, signing key and data; only
    their key hashes follow the configuration. Without an internal admin key the internal API accepts no key.
    Returns the ids of `disable` found in the store (each now disabled; see `disable_project`).
    """
    internal, _ = new_project(entropy, now_ms, "Internal", project_id=INTERNAL_PROJECT_ID)
    internal_keys = ProjectKeys(
        super_secret_admin_key_hash=hash_secret(internal_admin_key) if internal_admin_key else None
    )
    yield from ensure_project(dataclasses.replace(internal, keys=internal_keys))
    if default is not None:
        project, _ = new_project(entropy, now_ms, default.display_name, project_id=default.id, keys=default.keys)
        yield from ensure_project(project)
    kept = {INTERNAL_PROJECT_ID, default.id if default else None}
    disabled = []
    for project_id in (project_id for project_id in disable if project_id not in kept):
        if (yield from disable_project(project_id)):
            disabled.append(project_id)
    return tuple(disabled)


def disable_project(project_id: str) -> Flow[bool]:
    """Make a stored project accept no key and require one from clients, so that no access of any type (nor the
    OAuth refresh grant) authenticates with it; its data is kept. Starting again with it configured gives it its
    configured keys again (clients then keep needing theirs: `require_publishable_client_key` stays on, as any
    config edit does). False when no such project is stored (nothing is created then)."""
    changes = ProjectConfigChanges.of(require_publishable_client_key=True)
    return (yield from update_project(project_id, config=changes, keys=ProjectKeys())) is not None


def get_current_project(ctx: RequestContext) -> Flow[Response]:
    """GET /projects/current: the public view for client and server (the original's client fields in
    compatibility mode), everything but secrets for admin (ours in both modes: this service's dashboard reads and
    edits the config in our shape; the original's admin view is `GET /internal/projects/current`)."""
    auth = ctx.require_auth()
    return json_response(200, render_project(auth.project, auth.access_type, compat=ctx.options.compat))
    yield  # a flow, even though this one needs no effect


def get_current_project_original(ctx: RequestContext) -> Flow[Response]:
    """GET /internal/projects/current (admin; compatibility mode): the original's admin view of the project."""
    return json_response(200, render_original_project(ctx.require_auth().project))
    yield  # a flow, even though this one needs no effect


def delete_current_project(ctx: RequestContext) -> Flow[Response]:
    """DELETE /internal/projects/current (admin; compatibility mode): the project and all of its data, as the
    original's dashboard deletes a project with that project's admin access. The internal project is not deleted
    this way (it is the service's own: it manages every project)."""
    project_id = ctx.require_auth().project.id
    if project_id == INTERNAL_PROJECT_ID:
        raise PlainError(400, "The internal project cannot be deleted.")
    deleted = yield from delete_project(project_id)
    ctx.forget_project(project_id)
    if not deleted:  # deleted between authentication and now
        raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, details={"project_id": project_id})
    return json_response(200, {"success": True})


def update_current_project(ctx: RequestContext[ProjectUpdateBody]) -> Flow[Response]:
    """PATCH /projects/current (admin): display name and any subset of the config keys."""
    body: ProjectUpdateBody = ctx.body
    updated = yield from _update_current(ctx, body.display_name, body.config)
    return json_response(200, render_project(updated, AccessType.ADMIN, compat=ctx.options.compat))


def update_current_project_original(ctx: RequestContext[OriginalProjectUpdateBody]) -> Flow[Response]:
    """PATCH /internal/projects/current (admin; compatibility mode): the original's admin project update (its
    SDK's `project.update`, its dashboard's settings pages), in its names and shapes, answered with its admin
    view. The same update as PATCH /projects/current, translated (`OriginalProjectUpdateBody`)."""
    original: OriginalProjectUpdateBody = ctx.body
    config = original.config.ours() if original.config is not None else None
    updated = yield from _update_current(ctx, original.display_name, config)
    return json_response(200, render_original_project(updated))


def _update_current(ctx: RequestContext, display_name: str | None, config: ProjectConfigPatch | None) -> Flow[Project]:
    auth = ctx.require_auth()
    changes = config.changes() if config is not None else None
    # OAuth accounts: provider secrets are write-only (kept from the stored config) and some types dev-only
    if changes is not None and "oauth_providers" in changes.as_dict():
        stored = yield from load_project(auth.project.id)
        changes = configured_providers(ctx, stored.config if stored is not None else None, changes)
    updated = yield from update_project(auth.project.id, display_name=display_name, config=changes)
    ctx.forget_project(auth.project.id)
    if updated is None:  # deleted between authentication and now
        raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, details={"project_id": auth.project.id})
    return updated


def create_project_endpoint(ctx: RequestContext[ProjectCreateBody]) -> Flow[Response]:
    """POST /internal/projects: a new project; its keys are in this response and nowhere else, ever."""
    _require_internal(ctx)
    body: ProjectCreateBody = ctx.body
    config = ProjectConfig()
    if body.config is not None:
        changes = configured_providers(ctx, None, body.config.changes())  # OAuth accounts
        config = dataclasses.replace(config, **dict(changes))
    project, keys = new_project(ctx.entropy, ctx.now_ms, body.display_name, config)
    if not (yield from create_project(project)):  # a fresh 122-bit id never collides; say so if it did
        raise RuntimeError("generated project id already exists")
    return json_response(
        201,
        {
            **render_project(project, AccessType.ADMIN, compat=ctx.options.compat),
            "publishable_client_key": keys.publishable_client_key,
            "secret_server_key": keys.secret_server_key,
            "super_secret_admin_key": keys.super_secret_admin_key,
        },
    )


def list_projects_endpoint(ctx: RequestContext) -> Flow[Response]:
    """GET /internal/projects: every project but the internal one, oldest first, without keys."""
    _require_internal(ctx)
    projects = yield from list_projects()
    items = [
        render_project(p, AccessType.ADMIN, compat=ctx.options.compat) for p in projects if p.id != INTERNAL_PROJECT_ID
    ]
    return json_response(200, {"items": items, "is_paginated": False})


def delete_project_endpoint(ctx: RequestContext[None, None, ProjectIdParams]) -> Flow[Response]:
    """DELETE /internal/projects/{project_id}: the project and all of its data."""
    _require_internal(ctx)
    project_id: str = ctx.params.project_id
    deleted = yield from delete_project(project_id)
    ctx.forget_project(project_id)
    if not deleted:
        raise KnownError(ErrorCode.PROJECT_NOT_FOUND, details={"project_id": project_id})
    return json_response(200, {"success": True})


def _require_internal(ctx: RequestContext) -> None:
    if ctx.require_auth().project.id != INTERNAL_PROJECT_ID:
        raise KnownError(ErrorCode.EXPECTED_INTERNAL_PROJECT)


def jwks(ctx: RequestContext[None, JwksQuery, AnyProjectIdParams]) -> Flow[Response]:
    """GET /projects/{project_id}/.well-known/jwks.json?include_restricted=&include_anonymous= (no
    authentication): the public key that verifies the project's signed-up users' access tokens; with
    `include_restricted=true` also the key of its restricted users' tokens, and with `include_anonymous=true` that
    one and the key of its anonymous users' tokens (reference part 2 §4: so a backend verifying against the plain
    set never accepts a restricted or anonymous user); 404 for an unknown project."""
    project_id: str = ctx.params.project_id
    check_project_admits(project_id, None)
    project = yield from load_project(project_id)
    if project is None:
        raise KnownError(ErrorCode.PROJECT_NOT_FOUND, details={"project_id": project_id})
    audiences = [project.id]
    if ctx.query.include_restricted == "true" or ctx.query.include_anonymous == "true":
        audiences.append(f"{project.id}:restricted")
    if ctx.query.include_anonymous == "true":
        audiences.append(f"{project.id}:anon")
    keys = [access_token_key(project.signing_key, audience).public_jwk() for audience in audiences]
    return json_response(200, {"keys": keys}, headers=(("cache-control", "public, max-age=3600"),))
