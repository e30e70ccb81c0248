"""Teams and memberships (reference §5.1-5.2), and the team permission check the endpoints make.

Permissions: a membership holds permission ids directly; what it has is those and what their definitions contain
(`identity_proto.permissions`; the project's definitions are in its config). The system permissions
(`$read_members`, `$update_team`, `$delete_team`, `$remove_members`, `$invite_members`, `$manage_api_keys`) are
what the endpoints check; the built-in `team_admin` contains all of them and `team_member` `$read_members` and
`$invite_members`. The project's config says which ids a team's creator and its other members receive. Granting,
revoking and listing team permissions is `flows.permissions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType
from identity_proto.changes import TeamChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    AddMembership,
    CreateTeam,
    DeleteTeam,
    Flow,
    ListTeams,
    LoadMembership,
    LoadTeam,
    RemoveMembership,
    TeamWrite,
    perform,
)
from identity_proto.effects.commit import Announce, FieldsAre, PatchTeam, RecordKind, commit
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.http import Response
from identity_proto.permissions import definitions_by_id, held_permissions
from identity_proto.records import Membership, ProjectConfig, Team
from identity_proto.render import json_response, render_team
from identity_proto.tokens import new_uuid
from identity_proto.users import checked_profile_image

if TYPE_CHECKING:
    from identity_proto.schemas import ClientTeamCreateBody, ClientTeamUpdateBody, ListTeamsQuery

__all__ = [
    "add_membership",
    "create_team",
    "delete_team",
    "effective_permissions",
    "get_team",
    "list_teams",
    "patch_team",
    "remove_membership",
    "require_permission",
    "update_team",
]


def effective_permissions(config: ProjectConfig, membership: Membership) -> frozenset[str]:
    """Every team permission id the membership holds, directly or contained (recursively) in what it holds."""
    return held_permissions(membership.permissions, definitions_by_id(config, "team"), recursive=True)


def require_permission(ctx: RequestContext, team_id: str, permission_id: str) -> Flow[Membership]:
    """The caller's membership of `team_id`, which must hold `permission_id` (401 TEAM_PERMISSION_REQUIRED, also
    when the caller is no member)."""
    auth = ctx.require_auth()
    user_id = _require_user(ctx)
    membership = yield from perform(LoadMembership(auth.project.id, team_id, user_id))
    if membership is None or permission_id not in effective_permissions(auth.project.config, membership):
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
    updated = yield from patch_team(auth.project.id, team_id, TeamChanges.of(changes.items()))
    if updated is None:
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})
    return json_response(200, render_team(updated, auth.access_type))


def patch_team(project_id: str, team_id: str, changes: TeamChanges) -> Flow[Team | None]:
    """Set the changed fields of a team and announce `team.updated`; the team as changed, or None when there is no
    such team. Field-level: a concurrent update of other fields survives; a concurrent deletion is a conflict
    (`CommitConflict`: the service re-runs the request, which then finds no team)."""
    team = yield from perform(LoadTeam(project_id, team_id))
    if team is None:
        return None
    yield from commit(
        project_id,
        guards=(FieldsAre(team),),
        writes=(PatchTeam(team_id, changes),),
        events=(Announce("team.updated", (RecordKind.TEAM, team_id)),),
    )
    return changes.apply(team)


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
