"""Teams and memberships (reference §5.1-5.2), and the team permission check the endpoints make.

Permissions: a membership holds permission ids directly; what it has is those and what their definitions contain
(`identity_proto.permissions`; the project's definitions are in its config). The system permissions
(`$read_members`, `$update_team`, `$delete_team`, `$remove_members`, `$invite_members`, `$manage_api_keys`) are
what the endpoints check; the built-in `team_admin` contains all of them and `team_member` `$read_members` and
`$invite_members`. The project's config says which ids a team's creator and its other members receive. Granting,
revoking and listing team permissions is `flows.permissions`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType
from identity_proto.changes import MembershipChanges, TeamChanges, UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    DropMembership,
    DropTeam,
    Flow,
    ListApiKeys,
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    LoadUser,
    MembershipFieldsAre,
    MembershipIsAbsent,
    PatchMembership,
    RecordExists,
    StorageEffect,
    TeamApiKeysAre,
    TeamMembersAre,
    TeamWrite,
    Together,
    perform,
)
from identity_proto.effects.commit import (
    Announce,
    Commit,
    CommitConflict,
    Conflict,
    FieldsAre,
    Guard,
    IsAbsent,
    PatchTeam,
    PatchUser,
    PutMembership,
    PutTeam,
    RecordKind,
    Write,
    commit,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.http import Response
from identity_proto.permissions import definitions_by_id, held_permissions
from identity_proto.records import ApiKeyType, Membership, ProjectConfig, Team, User
from identity_proto.render import json_response, render_team
from identity_proto.tokens import new_uuid
from identity_proto.users import checked_profile_image

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ClientTeamCreateBody,
        ClientTeamUpdateBody,
        ListTeamsQuery,
        MembershipParams,
        TeamIdParams,
    )

__all__ = [
    "add_member",
    "add_membership",
    "change_permission",
    "change_read_permission",
    "create_team",
    "delete_team",
    "drop_team",
    "effective_permissions",
    "get_team",
    "list_teams",
    "membership_created",
    "patch_membership",
    "patch_read_membership",
    "patch_team",
    "refusal",
    "remove_member",
    "remove_membership",
    "remove_read_member",
    "require_permission",
    "store_team",
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
    return _require_held(ctx, team_id, user_id, membership, permission_id)


def _require_held(
    ctx: RequestContext, team_id: str, user_id: str, membership: Membership | None, permission_id: str
) -> Membership:
    """`require_permission` on the caller's membership as read."""
    if membership is None or permission_id not in effective_permissions(ctx.require_auth().project.config, membership):
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


def create_team(ctx: RequestContext[ClientTeamCreateBody]) -> Flow[Response]:
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
    created = yield from store_team(project.id, team, creator)
    if created is TeamWrite.USER_NOT_FOUND:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    return json_response(201, render_team(team, auth.access_type, compat=ctx.options.compat))


def list_teams(ctx: RequestContext[None, ListTeamsQuery]) -> Flow[Response]:
    """GET /teams?user_id=: a client lists only its own teams; server lists all, or one user's."""
    auth = ctx.require_auth()
    query: ListTeamsQuery = ctx.query
    user_id = ctx.resolve_user_id(query.user_id) if query.user_id else None
    if auth.access_type is AccessType.CLIENT and (user_id is None or user_id != auth.user_id):
        raise KnownError(ErrorCode.CLIENT_CAN_ONLY_LIST_OWN_TEAMS)
    teams = yield from perform(ListTeams(auth.project.id, user_id))
    return json_response(
        200,
        {"items": [render_team(t, auth.access_type, compat=ctx.options.compat) for t in teams], "is_paginated": False},
    )


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


def get_team(ctx: RequestContext[None, None, TeamIdParams]) -> Flow[Response]:
    """GET /teams/{team_id}."""
    team = yield from _load_team_for(ctx, ctx.params.team_id)
    return json_response(200, render_team(team, ctx.require_auth().access_type, compat=ctx.options.compat))


def update_team(ctx: RequestContext[ClientTeamUpdateBody, None, TeamIdParams]) -> Flow[Response]:
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
    return json_response(200, render_team(updated, auth.access_type, compat=ctx.options.compat))


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


def delete_team(ctx: RequestContext[object, None, TeamIdParams]) -> Flow[Response]:
    """DELETE /teams/{team_id}: clients need `$delete_team`; memberships go with the team, and users who had it
    selected have no selected team afterwards."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    judge = None
    if auth.access_type is AccessType.CLIENT:
        me = _require_user(ctx)

        def judge(members: tuple[Membership, ...]) -> None:
            mine = next((m for m in members if m.user_id == me), None)
            _require_held(ctx, team_id, me, mine, "$delete_team")

    if not (yield from drop_team(auth.project.id, team_id, judge)):
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})
    return json_response(200, {"success": True})


# --------------------------------------------------------------------------------------------------------------
# Memberships


def add_membership(ctx: RequestContext[None, None, MembershipParams]) -> Flow[Response]:
    """POST /team-memberships/{team_id}/{user_id} (server, admin) -> 201 {team_id, user_id}."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    permissions = tuple(sorted(auth.project.config.team_member_default_permissions))
    added = yield from add_member(auth.project.id, Membership(team_id, user_id, ctx.now_ms, permissions=permissions))
    if added is TeamWrite.USER_NOT_FOUND:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    if added is TeamWrite.TEAM_NOT_FOUND:
        raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})
    if added is TeamWrite.MEMBERSHIP_EXISTS:
        raise KnownError(ErrorCode.TEAM_MEMBERSHIP_ALREADY_EXISTS)
    return json_response(201, {"team_id": team_id, "user_id": user_id})


def remove_membership(ctx: RequestContext[None, None, MembershipParams]) -> Flow[Response]:
    """DELETE /team-memberships/{team_id}/{user_id}: a client may always leave; removing others needs
    `$remove_members`. The user's selection of that team is cleared."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    project_id = auth.project.id
    reads: tuple[StorageEffect[Any], ...] = (
        LoadMembership(project_id, team_id, user_id),
        LoadUser(project_id, user_id),
    )
    others = auth.access_type is AccessType.CLIENT and user_id != auth.user_id
    if others:  # the caller's own membership too, in the same trip
        me = _require_user(ctx)
        reads += (LoadMembership(project_id, team_id, me),)
    membership, user, *mine = yield from perform(Together(reads))
    if others:
        if mine[0] is None:
            raise _membership_not_found(team_id, me)
        _require_held(ctx, team_id, me, mine[0], "$remove_members")
    if not (yield from remove_read_member(project_id, membership, user)):
        raise _membership_not_found(team_id, user_id)
    return json_response(200, {"success": True})


# --------------------------------------------------------------------------------------------------------------
# The decisions behind the writes of teams and memberships: each reads (or guards) what it depends on and commits
# once (`effects.commit`). A conflict re-runs the request (`CommitConflict`); a refusal the guards alone decide is
# answered from the first guard that did not hold, in one trip.


def refusal(
    project_id: str, guards: tuple[Guard, ...], writes: tuple[Write, ...], events: tuple[Announce, ...]
) -> Flow[int | None]:
    """Commit; None when it was applied, else the index of the first guard that did not hold (nothing written)."""
    answer = yield from perform(Commit(project_id, guards, writes, events))
    return answer.guard if isinstance(answer, Conflict) else None


def membership_created(membership: Membership) -> tuple[Announce, ...]:
    """A new membership's events: `team_membership.created`, then one `team_permission.created` per permission it
    got."""
    team_id, user_id = membership.team_id, membership.user_id
    return (
        Announce("team_membership.created", ids=(team_id, user_id)),
        *(Announce("team_permission.created", ids=(p, team_id, user_id)) for p in membership.permissions),
    )


def store_team(project_id: str, team: Team, creator: Membership | None = None) -> Flow[Team | TeamWrite]:
    """Store a new team and, when given, its creator's membership (no event of its own), announcing
    `team.created`; USER_NOT_FOUND (nothing written) when the creator's user does not exist."""
    guards: tuple[Guard, ...] = (IsAbsent(RecordKind.TEAM, team.id),)
    writes: tuple[Write, ...] = (PutTeam(team),)
    if creator is not None:
        guards += (RecordExists(RecordKind.USER, creator.user_id), MembershipIsAbsent(team.id, creator.user_id))
        writes += (PutMembership(creator),)
    refused = yield from refusal(project_id, guards, writes, (Announce("team.created", (RecordKind.TEAM, team.id)),))
    if refused == 1:
        return TeamWrite.USER_NOT_FOUND
    if refused is not None:  # a team of this id appeared (ids are random: never in practice)
        raise CommitConflict(guards[refused])
    return team


def add_member(project_id: str, membership: Membership) -> Flow[Membership | TeamWrite]:
    """Add a membership: USER_NOT_FOUND, TEAM_NOT_FOUND, MEMBERSHIP_EXISTS (checked in that order; nothing
    written), or the membership as stored. A membership therefore never points at a missing team or user."""
    team_id, user_id = membership.team_id, membership.user_id
    refused = yield from refusal(
        project_id,
        (
            RecordExists(RecordKind.USER, user_id),
            RecordExists(RecordKind.TEAM, team_id),
            MembershipIsAbsent(team_id, user_id),
        ),
        (PutMembership(membership),),
        membership_created(membership),
    )
    if refused is None:
        return membership
    return (TeamWrite.USER_NOT_FOUND, TeamWrite.TEAM_NOT_FOUND, TeamWrite.MEMBERSHIP_EXISTS)[refused]


def _deselected(user: User | None, team_id: str) -> tuple[tuple[Guard, ...], tuple[Write, ...]]:
    """The guard and write that leave `user` without `team_id` selected (a user that had another team selected
    keeps it; the guard holds the selection the decision was made on)."""
    if user is None:
        return (), ()
    guards: tuple[Guard, ...] = (FieldsAre(user, ("selected_team_id",)),)
    if user.selected_team_id != team_id:
        return guards, ()
    return guards, (PatchUser(user.id, UserChanges.of(selected_team_id=None)),)


def remove_member(project_id: str, team_id: str, user_id: str) -> Flow[bool]:
    """Remove a membership (with its profile and permissions), clearing the user's selection of that team, and
    announce `team_membership.deleted`. False when there was none."""
    membership, user = yield from perform(
        Together((LoadMembership(project_id, team_id, user_id), LoadUser(project_id, user_id)))
    )
    return (yield from remove_read_member(project_id, membership, user))


def remove_read_member(project_id: str, membership: Membership | None, user: User | None) -> Flow[bool]:
    """`remove_member` of a membership and its user the flow has read already (None: there is no membership)."""
    if membership is None:
        return False
    team_id, user_id = membership.team_id, membership.user_id
    guards, writes = _deselected(user, team_id)
    yield from commit(
        project_id,
        (MembershipFieldsAre(membership), *guards),
        (DropMembership(team_id, user_id), *writes),
        (Announce("team_membership.deleted", ids=(team_id, user_id)),),
    )
    return True


def drop_team(
    project_id: str, team_id: str, judge: Callable[[tuple[Membership, ...]], None] | None = None
) -> Flow[bool]:
    """Remove a team with all its memberships and API keys, deselecting it for every member who had it selected,
    and announce `team.deleted` (as the original: no membership events). False when there is no such team.
    `judge`, given the team's memberships as read (none for a missing team), may refuse first (a client's
    permission check, without a read of its own)."""
    team, members, api_keys = yield from perform(
        Together(
            (
                LoadTeam(project_id, team_id),
                ListMemberships(project_id, team_id=team_id),
                ListApiKeys(project_id, ApiKeyType.TEAM, team_id),
            )
        )
    )
    if judge is not None:
        judge(members if team is not None else ())
    if team is None:
        return False
    users: tuple[User | None, ...] = ()
    if members:
        users = yield from perform(Together(tuple(LoadUser(project_id, m.user_id) for m in members)))
    guards: list[Guard] = [
        FieldsAre(team),
        TeamMembersAre(team_id, tuple(m.user_id for m in members)),
        TeamApiKeysAre(team_id, tuple(key.id for key in api_keys)),
    ]
    writes: list[Write] = []
    for membership, user in zip(members, users, strict=True):
        deselect_guards, deselect = _deselected(user, team_id)
        guards += deselect_guards
        writes += [DropMembership(team_id, membership.user_id), *deselect]
    writes.append(DropTeam(team_id, tuple(api_keys)))
    yield from commit(project_id, tuple(guards), tuple(writes), (Announce("team.deleted", ids=(team_id,)),))
    return True


def patch_membership(
    project_id: str, team_id: str, user_id: str, changes: MembershipChanges
) -> Flow[Membership | None]:
    """Set the changed fields of a membership (profile fields, or `permissions` as a sorted tuple); the membership
    as changed, or None when there is none. Field-level: a concurrent change of other fields survives."""
    membership = yield from perform(LoadMembership(project_id, team_id, user_id))
    if membership is None:
        return None
    return (yield from patch_read_membership(project_id, membership, changes))


def patch_read_membership(project_id: str, membership: Membership, changes: MembershipChanges) -> Flow[Membership]:
    """`patch_membership` of a membership the flow has read already (one commit; a concurrent removal is a
    conflict)."""
    team_id, user_id = membership.team_id, membership.user_id
    yield from commit(project_id, (MembershipFieldsAre(membership),), (PatchMembership(team_id, user_id, changes),))
    return changes.apply(membership)


def change_permission(
    project_id: str, team_id: str, user_id: str, permission_id: str, granted: bool
) -> Flow[Membership | None]:
    """Grant (`granted`) or revoke one permission id of a membership (kept sorted); None when there is no such
    membership. A compare-and-set of the membership's permissions: of concurrent grants of different permissions,
    those that find them changed re-run, so all survive. Announces `team_permission.created` on every grant (held
    already or not, as the original's upsert) and `team_permission.deleted` on a revoke of one held."""
    membership = yield from perform(LoadMembership(project_id, team_id, user_id))
    if membership is None:
        return None
    return (yield from change_read_permission(project_id, membership, permission_id, granted))


def change_read_permission(
    project_id: str, membership: Membership, permission_id: str, granted: bool
) -> Flow[Membership]:
    """`change_permission` of a membership the flow has read already (one commit, or none for a revoke of one not
    held)."""
    team_id, user_id = membership.team_id, membership.user_id
    held = set(membership.permissions)
    event = "team_permission.created" if granted else None
    if granted:
        held.add(permission_id)
    elif permission_id in held:
        held.discard(permission_id)
        event = "team_permission.deleted"
    permissions = tuple(sorted(held))
    if event is None:  # a revoke of one not held: nothing to write
        return membership
    yield from commit(
        project_id,
        (MembershipFieldsAre(membership, ("permissions",)),),
        (PatchMembership(team_id, user_id, MembershipChanges.of(permissions=permissions)),),
        (Announce(event, ids=(permission_id, team_id, user_id)),),
    )
    return dataclasses.replace(membership, permissions=permissions)
