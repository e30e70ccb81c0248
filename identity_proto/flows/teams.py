"""Teams, memberships and team permissions (reference §5.1-5.2).

Permissions: a membership holds permission ids. The system permissions (`$read_members`, `$update_team`,
`$delete_team`, `$remove_members`, `$invite_members`, `$manage_api_keys`) are what the endpoints check; `team_admin`
holds all of them and `team_member` holds `$read_members` and `$invite_members`. The project's config says which ids
a team's creator and its other members receive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType
from identity_proto.changes import TeamChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    AddMembership,
    ChangePermission,
    CreateTeam,
    DeleteTeam,
    Flow,
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    RemoveMembership,
    TeamWrite,
    UpdateTeam,
    perform,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.http import Response
from identity_proto.records import Membership, Project, Team
from identity_proto.render import json_response, render_team
from identity_proto.tokens import new_uuid
from identity_proto.users import checked_profile_image

if TYPE_CHECKING:
    from identity_proto.schemas import ClientTeamCreateBody, ClientTeamUpdateBody, ListMembershipsQuery, ListTeamsQuery

__all__ = [
    "PERMISSION_DEFINITIONS",
    "SYSTEM_PERMISSIONS",
    "add_membership",
    "create_team",
    "delete_team",
    "effective_permissions",
    "get_team",
    "grant_permission",
    "list_permissions",
    "list_teams",
    "remove_membership",
    "require_permission",
    "revoke_permission",
    "update_team",
]

SYSTEM_PERMISSIONS = (
    "$read_members",
    "$update_team",
    "$delete_team",
    "$remove_members",
    "$invite_members",
    "$manage_api_keys",  # API keys: creating, listing, reading and revoking the team's keys
)
PERMISSION_DEFINITIONS: dict[str, tuple[str, ...]] = {
    "team_admin": SYSTEM_PERMISSIONS,
    "team_member": ("$read_members", "$invite_members"),
}


def effective_permissions(membership: Membership) -> frozenset[str]:
    """Every permission id the membership holds, directly or through the ids it holds."""
    held = set(membership.permissions)
    for permission_id in membership.permissions:
        held.update(PERMISSION_DEFINITIONS.get(permission_id, ()))
    return frozenset(held)


def _known_permission(project: Project, permission_id: str) -> bool:
    config = project.config
    return (
        permission_id in SYSTEM_PERMISSIONS
        or permission_id in PERMISSION_DEFINITIONS
        or permission_id in config.team_creator_default_permissions
        or permission_id in config.team_member_default_permissions
    )


def require_permission(ctx: RequestContext, team_id: str, permission_id: str) -> Flow[Membership]:
    """The caller's membership of `team_id`, which must hold `permission_id` (401 TEAM_PERMISSION_REQUIRED, also
    when the caller is no member)."""
    auth = ctx.require_auth()
    user_id = _require_user(ctx)
    membership = yield from perform(LoadMembership(auth.project.id, team_id, user_id))
    if membership is None or permission_id not in effective_permissions(membership):
        raise KnownError(
            ErrorCode.TEAM_PERMISSION_REQUIRED,
            details={"team_id": team_id, "user_id": user_id, "permission_id": permission_id},
        )
    return membership


def _require_user(ctx: RequestContext) -> str:
    user_id = ctx.require_auth().user_id
    if user_id is None:
        raise KnownError(ErrorCode.USER_AUTHENTICATION_REQUIRED)
    return user_id


def _membership_not_found(team_id: str, user_id: str) -> KnownError:
    return KnownError(ErrorCode.TEAM_MEMBERSHIP_NOT_FOUND, details={"team_id": team_id, "user_id": user_id})


# --------------------------------------------------------------------------------------------------------------
# Teams


def create_team(ctx: RequestContext) -> Flow[Response]:
    """POST /teams -> 201. Clients only when the project allows it, and only as themselves; the creator gets the
    project's creator permissions."""
    auth = ctx.require_auth()
    project = auth.project
    body: ClientTeamCreateBody = ctx.body
    creator_id: str | None
    if auth.access_type is AccessType.CLIENT:
        me = _require_user(ctx)
        if not project.config.client_team_creation_enabled:
            raise KnownError(ErrorCode.CLIENT_TEAM_CREATION_DISABLED)
        creator_id = ctx.resolve_user_id(body.creator_user_id or "me")
        if creator_id != me:
            raise KnownError(ErrorCode.CANNOT_CREATE_TEAM_FOR_OTHER_USER)
    else:
        creator_id = ctx.resolve_user_id(body.creator_user_id) if body.creator_user_id else None
    team = Team(
        id=new_uuid(ctx.entropy),
        display_name=body.display_name,
        created_at_millis=ctx.now_ms,
        profile_image_url=checked_profile_image(body.profile_image_url, auth.access_type),
        client_metadata=body.client_metadata,
        client_read_only_metadata=getattr(body, "client_read_only_metadata", None),
        server_metadata=getattr(body, "server_metadata", None),
    )
    creator = None
    if creator_id is not None:
        permissions = tuple(sorted(project.config.team_creator_default_permissions))
        creator = Membership(team.id, creator_id, ctx.now_ms, permissions=permissions)
    created = yield from perform(CreateTeam(project.id, team, creator))
    if created is TeamWrite.USER_NOT_FOUND:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    return json_response(201, render_team(team, auth.access_type))


def list_teams(ctx: RequestContext) -> Flow[Response]:
    """GET /teams?user_id=: a client lists only its own teams; server lists all, or one user's."""
    auth = ctx.require_auth()
    query: ListTeamsQuery = ctx.query
    user_id = ctx.resolve_user_id(query.user_id) if query.user_id else None
    if auth.access_type is AccessType.CLIENT and (user_id is None or user_id != auth.user_id):
        raise KnownError(ErrorCode.CLIENT_CAN_ONLY_LIST_OWN_TEAMS)
    teams = yield from perform(ListTeams(auth.project.id, user_id))
    return json_response(200, {"items": [render_team(t, auth.access_type) for t in teams], "is_paginated": False})


def _load_team_for(ctx: RequestContext, team_id: str) -> Flow[Team]:
    """The team; a client must be a member (404 TEAM_MEMBERSHIP_NOT_FOUND), a server gets 404 TEAM_NOT_FOUND."""
    auth = ctx.require_auth()
    if auth.access_type is AccessType.CLIENT:
        user_id = _require_user(ctx)
        if (yield from perform(LoadMembership(auth.project.id, team_id, user_id))) is None:
            raise _membership_not_found(team_id, user_id)
    team = yield from perform(LoadTeam(auth.project.id, team_id))
    if team is None:
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})
    return team


def get_team(ctx: RequestContext) -> Flow[Response]:
    """GET /teams/{team_id}."""
    team = yield from _load_team_for(ctx, ctx.params.team_id)
    return json_response(200, render_team(team, ctx.require_auth().access_type))


def update_team(ctx: RequestContext) -> Flow[Response]:
    """PATCH /teams/{team_id}: clients need `$update_team`."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    body: ClientTeamUpdateBody = ctx.body
    if auth.access_type is AccessType.CLIENT:
        yield from require_permission(ctx, team_id, "$update_team")
    changes: dict[str, Any] = {name: getattr(body, name) for name in body.model_fields_set}
    if "profile_image_url" in changes:
        changes["profile_image_url"] = checked_profile_image(body.profile_image_url, auth.access_type)
    updated = yield from perform(UpdateTeam(auth.project.id, team_id, TeamChanges.of(changes.items())))
    if updated is None:
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})
    return json_response(200, render_team(updated, auth.access_type))


def delete_team(ctx: RequestContext) -> Flow[Response]:
    """DELETE /teams/{team_id}: clients need `$delete_team`; memberships go with the team, and users who had it
    selected have no selected team afterwards."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    if auth.access_type is AccessType.CLIENT:
        yield from require_permission(ctx, team_id, "$delete_team")
    if not (yield from perform(DeleteTeam(auth.project.id, team_id))):
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})
    return json_response(200, {"success": True})


# --------------------------------------------------------------------------------------------------------------
# Memberships


def add_membership(ctx: RequestContext) -> Flow[Response]:
    """POST /team-memberships/{team_id}/{user_id} (server, admin) -> 201 {team_id, user_id}."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    permissions = tuple(sorted(auth.project.config.team_member_default_permissions))
    added = yield from perform(
        AddMembership(auth.project.id, Membership(team_id, user_id, ctx.now_ms, permissions=permissions))
    )
    if added is TeamWrite.USER_NOT_FOUND:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    if added is TeamWrite.TEAM_NOT_FOUND:
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})
    if added is TeamWrite.MEMBERSHIP_EXISTS:
        raise KnownError(ErrorCode.TEAM_MEMBERSHIP_ALREADY_EXISTS)
    return json_response(201, {"team_id": team_id, "user_id": user_id})


def remove_membership(ctx: RequestContext) -> Flow[Response]:
    """DELETE /team-memberships/{team_id}/{user_id}: a client may always leave; removing others needs
    `$remove_members`. The user's selection of that team is cleared."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    if auth.access_type is AccessType.CLIENT and user_id != auth.user_id:
        me = _require_user(ctx)
        if (yield from perform(LoadMembership(auth.project.id, team_id, me))) is None:
            raise _membership_not_found(team_id, me)
        yield from require_permission(ctx, team_id, "$remove_members")
    if not (yield from perform(RemoveMembership(auth.project.id, team_id, user_id))):
        raise _membership_not_found(team_id, user_id)
    return json_response(200, {"success": True})


# --------------------------------------------------------------------------------------------------------------
# Permissions


def grant_permission(ctx: RequestContext) -> Flow[Response]:
    """POST /team-permissions/{team_id}/{user_id}/{permission_id} (server, admin) -> 201."""
    return (yield from _change_permission(ctx, granted=True))


def revoke_permission(ctx: RequestContext) -> Flow[Response]:
    """DELETE /team-permissions/{team_id}/{user_id}/{permission_id} (server, admin)."""
    return (yield from _change_permission(ctx, granted=False))


def _change_permission(ctx: RequestContext, *, granted: bool) -> Flow[Response]:
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    permission_id: str = ctx.params.permission_id
    if not _known_permission(auth.project, permission_id):
        raise KnownError(ErrorCode.UNKNOWN_TEAM_PERMISSION, context={"permission_id": permission_id})
    membership = yield from perform(LoadMembership(auth.project.id, team_id, user_id))
    if membership is None:
        raise _membership_not_found(team_id, user_id)
    if not granted and permission_id not in membership.permissions:
        raise KnownError(
            ErrorCode.TEAM_PERMISSION_NOT_FOUND,
            details={"team_id": team_id, "user_id": user_id, "permission_id": permission_id},
        )
    changed = yield from perform(ChangePermission(auth.project.id, team_id, user_id, permission_id, granted))
    if changed is None:
        raise _membership_not_found(team_id, user_id)
    if granted:
        return json_response(201, {"id": permission_id, "team_id": team_id, "user_id": user_id})
    return json_response(200, {"success": True})


def list_permissions(ctx: RequestContext) -> Flow[Response]:
    """GET /team-permissions?team_id=&user_id=&recursive=: the permissions of memberships (a client: only its
    own); with recursive=true, what held ids contain is listed too."""
    auth = ctx.require_auth()
    query: ListMembershipsQuery = ctx.query
    user_id = ctx.resolve_user_id(query.user_id) if query.user_id else None
    if auth.access_type is AccessType.CLIENT:
        me = _require_user(ctx)
        if user_id is not None and user_id != me:
            raise KnownError(ErrorCode.CLIENT_CAN_ONLY_LIST_OWN_TEAMS)
        user_id = me
    memberships = yield from perform(ListMemberships(auth.project.id, team_id=query.team_id, user_id=user_id))
    items = []
    for membership in memberships:
        held = effective_permissions(membership) if query.recursive == "true" else frozenset(membership.permissions)
        items += [{"id": p, "team_id": membership.team_id, "user_id": membership.user_id} for p in sorted(held)]
    return json_response(200, {"items": items, "is_paginated": False})
