"""Permissions (reference part 2 §6): the project's permission definitions of both scopes (admin), team and
project permission grants (server and admin grant and revoke; clients list their own).

Rules (`identity_proto.permissions` holds the vocabulary):
- Definitions live in the project config. Each change (create, update, delete) is read from the store afresh,
  decided here, and written as one `ChangePermissionDefinitions`: a compare-and-set of the definitions and the
  default-permission lists, with the grants a rename or a delete rewrites, in the same atomic step. A write that
  lost a race with another is decided again on what that one left.
- Grants are direct: a membership's permission ids (team scope), a user's project permission ids (project
  scope). Granting checks the id against the definitions as stored (not the worker's cached project), so a
  definition created by another worker a moment ago can be granted at once.
- Listing expands grants through the definitions (`held_permissions`): `recursive` (default false in the API,
  the SDK always sends it) adds what held definitions contain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType
from identity_proto.changes import MembershipChanges, Pairs, ProjectConfigChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    DefinitionsWrite,
    Flow,
    ListMemberships,
    ListProjectPermissions,
    LoadMembership,
    LoadProject,
    LoadUser,
    MembershipFieldsAre,
    PatchMembership,
    PatchProject,
    ProjectConfigIs,
    ProjectGrantIs,
    RecordExists,
    RevokePermission,
    Together,
    perform,
)
from identity_proto.effects.commit import Announce, CommitConflict, GrantPermissions, RecordKind, commit
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.teams import change_read_permission, refusal
from identity_proto.http import Response
from identity_proto.permissions import SYSTEM_PERMISSIONS, definitions_by_id, held_permissions, listed_definitions
from identity_proto.records import Membership, PermissionDefinition, Project, ProjectConfig
from identity_proto.render import json_response, text_response

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ListProjectPermissionsQuery,
        ListTeamPermissionsQuery,
        PermissionDefinitionCreateBody,
        PermissionDefinitionParams,
        PermissionDefinitionUpdateBody,
        ProjectPermissionParams,
        TeamPermissionParams,
    )

__all__ = [
    "change_definitions",
    "create_project_permission_definition",
    "create_team_permission_definition",
    "delete_project_permission_definition",
    "delete_team_permission_definition",
    "grant_project_permission",
    "grant_project_permissions",
    "grant_team_permission",
    "list_project_permission_definitions",
    "list_project_permissions",
    "list_team_permission_definitions",
    "list_team_permissions",
    "revoke_project_permission",
    "revoke_project_permission_of",
    "revoke_team_permission",
    "update_project_permission_definition",
    "update_team_permission_definition",
]

#: The config lists of default grants: a definition's rename rewrites them and its removal strips it from them
#: (ours: the original leaves them naming an id that no longer exists, which then fails every team creation or
#: sign-up that grants it; a careful user expects the defaults to follow the definition).
_DEFAULT_LISTS = ("team_creator_default_permissions", "team_member_default_permissions", "user_default_permissions")

#: How often a definition change is decided again after losing a race (each loss means another change landed).
_MAX_ATTEMPTS = 16

#: Reference §6 (e2e): a client listing anyone's permissions but its own gets this, as plain text.
_CLIENT_OWN_ONLY = (
    'Client can only list permissions for their own user. user_id must be either "me" or the ID of the current user'
)


# --------------------------------------------------------------------------------------------------------------
# Definitions (admin)


def render_definition(definition: PermissionDefinition) -> dict[str, Any]:
    """`{id, description?, contained_permission_ids}`: `description` is absent when there is none (e2e)."""
    out: dict[str, Any] = {"id": definition.id}
    if definition.description:
        out["description"] = definition.description
    out["contained_permission_ids"] = sorted(definition.contained_permission_ids)
    return out


def _list_definitions(ctx: RequestContext, scope: str) -> Flow[Response]:
    project = yield from _fresh_project(ctx)
    items = [render_definition(d) for d in listed_definitions(project.config, scope)]
    return json_response(200, {"items": items, "is_paginated": False})


def _create_definition(ctx: RequestContext[PermissionDefinitionCreateBody], scope: str) -> Flow[Response]:
    body: PermissionDefinitionCreateBody = ctx.body

    def change(config: ProjectConfig) -> _Change:
        if any(d.id == body.id for d in config.permission_definitions):  # any scope: ids are unique across both
            raise KnownError(ErrorCode.PERMISSION_ID_ALREADY_EXISTS, details={"permission_id": body.id})
        contained = _checked_contained(config, scope, body.contained_permission_ids)
        created = PermissionDefinition(body.id, scope, body.description or None, contained)
        return _Change(created, (*config.permission_definitions, created))

    made = yield from _change_definitions(ctx, change)
    return json_response(201, render_definition(made))


def _update_definition(
    ctx: RequestContext[PermissionDefinitionUpdateBody, None, PermissionDefinitionParams], scope: str
) -> Flow[Response]:
    old_id: str = ctx.params.permission_id
    body: PermissionDefinitionUpdateBody = ctx.body
    new_id = body.id if body.id is not None else old_id

    def change(config: ProjectConfig) -> _Change:
        # Reference §6: an unknown id is 404 whatever its scope; an id of the other scope is found, and the
        # update makes it a definition of this route's scope (the original's behaviour, kept).
        if not any(d.id == old_id for d in config.permission_definitions):
            raise KnownError(ErrorCode.PERMISSION_NOT_FOUND, details={"permission_id": old_id})
        if new_id != old_id and any(d.id == new_id for d in config.permission_definitions):
            raise KnownError(ErrorCode.PERMISSION_ID_ALREADY_EXISTS, details={"permission_id": new_id})
        contained = _checked_contained(config, scope, body.contained_permission_ids)
        # It replaces: an omitted description or contained list takes its default (none).
        updated = PermissionDefinition(new_id, scope, body.description or None, contained)
        others = tuple(_renamed_within(d, old_id, new_id) for d in config.permission_definitions if d.id != old_id)
        renamed = (old_id, new_id) if new_id != old_id else None
        return _Change(updated, (*others, updated), renamed=renamed)

    made = yield from _change_definitions(ctx, change)
    return json_response(200, render_definition(made))


def _delete_definition(ctx: RequestContext[None, None, PermissionDefinitionParams], scope: str) -> Flow[Response]:
    permission_id: str = ctx.params.permission_id

    def change(config: ProjectConfig) -> _Change:
        found = next((d for d in config.permission_definitions if d.id == permission_id), None)
        if found is None or found.scope != scope:
            raise KnownError(ErrorCode.PERMISSION_NOT_FOUND, details={"permission_id": permission_id})
        others = tuple(_renamed_within(d, permission_id, None) for d in config.permission_definitions if d is not found)
        return _Change(found, others, removed=permission_id)

    yield from _change_definitions(ctx, change)
    return json_response(200, {"success": True})


class _Change:
    """What one definition change decided: the definition to answer with, the new definitions, and the id whose
    grants it renames or removes."""

    __slots__ = ("definition", "definitions", "removed", "renamed")

    def __init__(
        self,
        definition: PermissionDefinition,
        definitions: tuple[PermissionDefinition, ...],
        *,
        renamed: tuple[str, str] | None = None,
        removed: str | None = None,
    ) -> None:
        self.definition = definition
        self.definitions = tuple(sorted(definitions, key=lambda d: d.id))
        self.renamed = renamed
        self.removed = removed


def _change_definitions(ctx: RequestContext, decide: Any) -> Flow[PermissionDefinition]:
    """Read the project afresh, `decide` the change on its config (raising the change's known errors), and write
    it as one compare-and-set; decided again when another change landed in between."""
    project_id = ctx.require_auth().project.id
    for _attempt in range(_MAX_ATTEMPTS):
        project = yield from _fresh_project(ctx)
        config = project.config
        change: _Change = decide(config)
        old = change.removed if change.removed is not None else change.renamed[0] if change.renamed else None
        new = change.renamed[1] if change.renamed is not None else None
        changes: list[tuple[str, Any]] = [("permission_definitions", change.definitions)]
        if old is not None:
            for name in _DEFAULT_LISTS:
                held: tuple[str, ...] = getattr(config, name)
                if old in held:
                    kept = [p for p in held if p != old] + ([new] if new is not None and new not in held else [])
                    changes.append((name, tuple(kept)))
        expected = [("permission_definitions", config.permission_definitions)]
        expected += [(name, getattr(config, name)) for name in _DEFAULT_LISTS]
        written = yield from change_definitions(project_id, expected, changes, change.renamed, change.removed)
        if written is DefinitionsWrite.CONFLICT:
            continue
        ctx.forget_project(project_id)
        if written is DefinitionsWrite.PROJECT_NOT_FOUND:
            raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, context={"project_id": project_id})
        return change.definition
    raise RuntimeError(f"permission definitions of {project_id}: {_MAX_ATTEMPTS} concurrent changes won in a row")


def change_definitions(
    project_id: str,
    expected: Pairs,
    config: Pairs,
    renamed: tuple[str, str] | None = None,
    removed: str | None = None,
) -> Flow[Project | DefinitionsWrite]:
    """One change of the permission definitions, committed with what it implies: when the config fields of
    `expected` still hold their values there, set those of `config`; with `renamed` (old id, new id) or `removed`,
    every direct grant of that id (memberships and project grants: ids are unique across scopes) is rewritten in
    the same commit, each guarded on the grants as read. Returns the updated project, else CONFLICT or
    PROJECT_NOT_FOUND (nothing written)."""
    old, new = renamed if renamed is not None else (removed, None)
    project = (RecordKind.PROJECT, project_id)
    guards: list[Any] = [RecordExists(*project), ProjectConfigIs(ProjectConfigChanges.of(expected))]
    writes: list[Any] = [PatchProject(project_id, config=ProjectConfigChanges.of(config))]
    if old is not None:
        reads = Together((ListMemberships(project_id), ListProjectPermissions(project_id)))
        memberships, grants = yield from perform(reads)
        for membership in memberships:
            if old in membership.permissions:
                kept = tuple(sorted({p for p in membership.permissions if p != old} | ({new} if new else set())))
                guards.append(MembershipFieldsAre(membership, ("permissions",)))
                changes = MembershipChanges.of(permissions=kept)
                writes.append(PatchMembership(membership.team_id, membership.user_id, changes))
        for user_id, held in grants:
            if old in held:
                guards.append(ProjectGrantIs(user_id, old, len(held)))
                writes.append(RevokePermission(user_id, old, last=len(held) == 1))
                writes += [GrantPermissions(user_id, (new,))] if new is not None else []
    try:
        (updated,) = yield from commit(project_id, tuple(guards), tuple(writes), returns=(project,))
    except CommitConflict as conflict:
        return DefinitionsWrite.PROJECT_NOT_FOUND if conflict.guard is guards[0] else DefinitionsWrite.CONFLICT
    return updated  # type: ignore[no-any-return]


def _checked_contained(config: ProjectConfig, scope: str, contained: list[str] | None) -> tuple[str, ...]:
    """The contained ids, sorted and without repeats; each must be a definition of `scope` (for `team`, a system
    permission too), else 400 CONTAINED_PERMISSION_NOT_FOUND naming the first that is not."""
    known = definitions_by_id(config, scope)
    for permission_id in contained or ():
        if permission_id not in known:
            raise KnownError(ErrorCode.CONTAINED_PERMISSION_NOT_FOUND, details={"permission_id": permission_id})
    return tuple(sorted(set(contained or ())))


def _renamed_within(definition: PermissionDefinition, old: str, new: str | None) -> PermissionDefinition:
    """`definition` with `old` renamed to `new` (or removed, for None) in its contained ids."""
    if old not in definition.contained_permission_ids:
        return definition
    kept = {p for p in definition.contained_permission_ids if p != old} | ({new} if new is not None else set())
    return PermissionDefinition(definition.id, definition.scope, definition.description, tuple(sorted(kept)))


def _fresh_project(ctx: RequestContext) -> Flow[Project]:
    """The caller's project as stored now (not as this worker cached it)."""
    project_id = ctx.require_auth().project.id
    project = yield from perform(LoadProject(project_id))
    if project is None:
        raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, context={"project_id": project_id})
    return project


def list_team_permission_definitions(ctx: RequestContext) -> Flow[Response]:
    """GET /team-permission-definitions (admin): the custom team definitions and the six system permissions."""
    return (yield from _list_definitions(ctx, "team"))


def create_team_permission_definition(ctx: RequestContext[PermissionDefinitionCreateBody]) -> Flow[Response]:
    """POST /team-permission-definitions (admin) -> 201."""
    return (yield from _create_definition(ctx, "team"))


def update_team_permission_definition(
    ctx: RequestContext[PermissionDefinitionUpdateBody, None, PermissionDefinitionParams],
) -> Flow[Response]:
    """PATCH /team-permission-definitions/{permission_id} (admin)."""
    return (yield from _update_definition(ctx, "team"))


def delete_team_permission_definition(ctx: RequestContext[None, None, PermissionDefinitionParams]) -> Flow[Response]:
    """DELETE /team-permission-definitions/{permission_id} (admin)."""
    return (yield from _delete_definition(ctx, "team"))


def list_project_permission_definitions(ctx: RequestContext) -> Flow[Response]:
    """GET /project-permission-definitions (admin): the custom project definitions."""
    return (yield from _list_definitions(ctx, "project"))


def create_project_permission_definition(ctx: RequestContext[PermissionDefinitionCreateBody]) -> Flow[Response]:
    """POST /project-permission-definitions (admin) -> 201."""
    return (yield from _create_definition(ctx, "project"))


def update_project_permission_definition(
    ctx: RequestContext[PermissionDefinitionUpdateBody, None, PermissionDefinitionParams],
) -> Flow[Response]:
    """PATCH /project-permission-definitions/{permission_id} (admin)."""
    return (yield from _update_definition(ctx, "project"))


def delete_project_permission_definition(ctx: RequestContext[None, None, PermissionDefinitionParams]) -> Flow[Response]:
    """DELETE /project-permission-definitions/{permission_id} (admin)."""
    return (yield from _delete_definition(ctx, "project"))


# --------------------------------------------------------------------------------------------------------------
# Grants


def _scope_error(config: ProjectConfig, permission_id: str, scope: str) -> KnownError | None:
    """Why `permission_id` cannot be granted in `scope`: 404 PERMISSION_NOT_FOUND when nothing defines it,
    404 WRONG_PERMISSION_SCOPE when a definition of the other scope does; None when it can."""
    if scope == "team" and permission_id in SYSTEM_PERMISSIONS:
        return None
    found = next((d for d in config.permission_definitions if d.id == permission_id), None)
    if found is None:
        return KnownError(ErrorCode.PERMISSION_NOT_FOUND, details={"permission_id": permission_id})
    if found.scope != scope:
        details = {"permission_id": permission_id, "expected_scope": scope, "actual_scope": found.scope}
        return KnownError(ErrorCode.WRONG_PERMISSION_SCOPE, details=details)
    return None


def _require_member(ctx: RequestContext, team_id: str, user_id: str) -> Flow[tuple[Membership, Project]]:
    """The membership; 404 USER_NOT_FOUND when the user does not exist, else 404 TEAM_MEMBERSHIP_NOT_FOUND. With
    the caller's project as stored now (`_fresh_project`), read in the same trip."""
    project_id = ctx.require_auth().project.id
    membership, project = yield from perform(
        Together((LoadMembership(project_id, team_id, user_id), LoadProject(project_id)))
    )
    if membership is None:
        if (yield from perform(LoadUser(project_id, user_id))) is None:
            raise KnownError(ErrorCode.USER_NOT_FOUND)
        raise KnownError(ErrorCode.TEAM_MEMBERSHIP_NOT_FOUND, details={"team_id": team_id, "user_id": user_id})
    if project is None:
        raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, context={"project_id": project_id})
    return membership, project


def grant_team_permission(ctx: RequestContext[None, None, TeamPermissionParams]) -> Flow[Response]:
    """POST /team-permissions/{team_id}/{user_id}/{permission_id} (server, admin) -> 201 {id, team_id, user_id}.
    The user (404), their membership (404), then the id: a system permission or a team definition (404
    PERMISSION_NOT_FOUND, 404 WRONG_PERMISSION_SCOPE). Granting one held already is a 201 too."""
    project_id = ctx.require_auth().project.id
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    permission_id: str = ctx.params.permission_id
    membership, project = yield from _require_member(ctx, team_id, user_id)
    refused = _scope_error(project.config, permission_id, "team")
    if refused is not None:
        raise refused
    yield from change_read_permission(project_id, membership, permission_id, True)
    return json_response(201, {"id": permission_id, "team_id": team_id, "user_id": user_id})


def revoke_team_permission(ctx: RequestContext[None, None, TeamPermissionParams]) -> Flow[Response]:
    """DELETE /team-permissions/{team_id}/{user_id}/{permission_id} (server, admin): the user (404) and the
    membership (404) as for granting; the id must be held directly and defined, else 401
    TEAM_PERMISSION_NOT_FOUND."""
    project_id = ctx.require_auth().project.id
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    permission_id: str = ctx.params.permission_id
    membership, project = yield from _require_member(ctx, team_id, user_id)
    direct = held_permissions(membership.permissions, definitions_by_id(project.config, "team"), recursive=False)
    if permission_id not in direct:
        details = {"team_id": team_id, "user_id": user_id, "permission_id": permission_id}
        raise KnownError(ErrorCode.TEAM_PERMISSION_NOT_FOUND, details=details)
    yield from change_read_permission(project_id, membership, permission_id, False)
    return json_response(200, {"success": True})


def grant_project_permission(ctx: RequestContext[None, None, ProjectPermissionParams]) -> Flow[Response]:
    """POST /project-permissions/{user_id}/{permission_id} (server, admin) -> 201 {id, user_id}: the user (404
    USER_NOT_FOUND), then the id (404 PERMISSION_NOT_FOUND, 404 WRONG_PERMISSION_SCOPE), in that order (e2e)."""
    project_id = ctx.require_auth().project.id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    permission_id: str = ctx.params.permission_id
    project = yield from _fresh_project(ctx)
    refused = _scope_error(project.config, permission_id, "project")
    if refused is not None:
        if (yield from perform(LoadUser(project_id, user_id))) is None:
            raise KnownError(ErrorCode.USER_NOT_FOUND)
        raise refused
    # webhooks: an explicit grant records `project_permission.created` (sign-up defaults do not)
    if not (yield from grant_project_permissions(project_id, user_id, (permission_id,), announce=True)):
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    return json_response(201, {"id": permission_id, "user_id": user_id})


def revoke_project_permission(ctx: RequestContext[None, None, ProjectPermissionParams]) -> Flow[Response]:
    """DELETE /project-permissions/{user_id}/{permission_id} (server, admin): the user (404 USER_NOT_FOUND); the id
    must be held directly and defined, else 404 PERMISSION_NOT_FOUND."""
    project_id = ctx.require_auth().project.id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    permission_id: str = ctx.params.permission_id
    user, grants, project = yield from perform(
        Together((LoadUser(project_id, user_id), ListProjectPermissions(project_id, user_id), LoadProject(project_id)))
    )
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    if project is None:  # as `_fresh_project`
        raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, context={"project_id": project_id})
    defined = permission_id in definitions_by_id(project.config, "project")
    held = grants[0][1] if grants else ()
    if not defined or not (yield from revoke_project_permission_of(project_id, user_id, permission_id, held)):
        raise KnownError(ErrorCode.PERMISSION_NOT_FOUND, details={"permission_id": permission_id})
    return json_response(200, {"success": True})


def grant_project_permissions(
    project_id: str, user_id: str, permission_ids: tuple[str, ...], *, announce: bool = False
) -> Flow[bool]:
    """Grant `permission_ids` to the user directly (one held already changes nothing), in one commit guarded on the
    user existing (False: nothing written; a grant never points at a missing user). With `announce` (an explicit
    grant), one `project_permission.created` per id, held already or not, as the original; a sign-up's default
    grants announce none (reference part 2 §8)."""
    events = tuple(Announce("project_permission.created", ids=(p, user_id)) for p in permission_ids) if announce else ()
    refused = yield from refusal(
        project_id, (RecordExists(RecordKind.USER, user_id),), (GrantPermissions(user_id, permission_ids),), events
    )
    return refused is None


def revoke_project_permission_of(
    project_id: str, user_id: str, permission_id: str, held: tuple[str, ...]
) -> Flow[bool]:
    """Remove the user's direct grant of `permission_id`, deciding on `held` (the ids they hold, as read), and
    announce `project_permission.deleted`. False when they did not hold it (nothing written). Guarded on the grant
    and on how many they hold (taking the last one drops the user from the holders): a concurrent grant or revoke
    of theirs is a conflict, and the request re-runs."""
    if permission_id not in held:
        return False
    last = len(held) == 1
    yield from commit(
        project_id,
        (ProjectGrantIs(user_id, permission_id, len(held)),),
        (RevokePermission(user_id, permission_id, last),),
        (Announce("project_permission.deleted", ids=(permission_id, user_id)),),
    )
    return True


# --------------------------------------------------------------------------------------------------------------
# Listing


def _listed_user(ctx: RequestContext, user_id: str | None) -> str | Response | None:
    """The user whose permissions are listed (`me` resolved). A client must name itself: 400
    CANNOT_GET_OWN_USER_WITHOUT_USER without a user, else the plain 403 of the reference (returned)."""
    auth = ctx.require_auth()
    if auth.access_type is AccessType.CLIENT:
        if auth.user_id is None:
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        if user_id is None or ctx.resolve_user_id(user_id) != auth.user_id:
            return text_response(403, _CLIENT_OWN_ONLY)
    return ctx.resolve_user_id(user_id) if user_id is not None else None


def list_team_permissions(ctx: RequestContext[None, ListTeamPermissionsQuery]) -> Flow[Response]:
    """GET /team-permissions?team_id=&user_id=&permission_id=&recursive=: the team permissions of memberships
    (a client: only its own), expanded through the team definitions, sorted by team, user and id."""
    query: ListTeamPermissionsQuery = ctx.query
    user_id = _listed_user(ctx, query.user_id)
    if isinstance(user_id, Response):
        return user_id
    project = ctx.require_auth().project
    memberships = yield from perform(ListMemberships(project.id, team_id=query.team_id, user_id=user_id))
    definitions = definitions_by_id(project.config, "team")
    items = [
        {"id": permission_id, "team_id": m.team_id, "user_id": m.user_id}
        for m in memberships
        for permission_id in held_permissions(m.permissions, definitions, recursive=query.recursive == "true")
        if query.permission_id is None or permission_id == query.permission_id
    ]
    items.sort(key=lambda item: (item["team_id"], item["user_id"], item["id"]))
    return json_response(200, {"items": items, "is_paginated": False})


def list_project_permissions(ctx: RequestContext[None, ListProjectPermissionsQuery]) -> Flow[Response]:
    """GET /project-permissions?user_id=&permission_id=&recursive=: users' project permissions (a client: only
    its own; a server without filters: every grant), expanded through the project definitions, sorted by user
    and id."""
    query: ListProjectPermissionsQuery = ctx.query
    user_id = _listed_user(ctx, query.user_id)
    if isinstance(user_id, Response):
        return user_id
    project = ctx.require_auth().project
    grants = yield from perform(ListProjectPermissions(project.id, user_id))
    definitions = definitions_by_id(project.config, "project")
    items = [
        {"id": permission_id, "user_id": holder}
        for holder, direct in grants
        for permission_id in sorted(held_permissions(direct, definitions, recursive=query.recursive == "true"))
        if query.permission_id is None or permission_id == query.permission_id
    ]
    return json_response(200, {"items": items, "is_paginated": False})
