"""Team member profiles (the spec's third operation; reference §5.3): a member's own name and image in a team."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.auth import AccessType
from identity_proto.changes import MembershipChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    Flow,
    ListMemberships,
    LoadMembership,
    LoadTeam,
    LoadUser,
    Together,
    perform,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.teams import patch_read_membership, require_permission
from identity_proto.http import Response
from identity_proto.records import Membership, Project, Team, User
from identity_proto.render import json_response, render_member_profile
from identity_proto.users import checked_profile_image

if TYPE_CHECKING:
    from identity_proto.schemas import ListMembershipsQuery, MemberProfileUpdateBody, MembershipParams

__all__ = ["get_member_profile", "list_member_profiles", "update_member_profile"]


def _rendered(
    ctx: RequestContext,
    project: Project,
    membership: Membership,
    caller_team_ids: frozenset[str] = frozenset(),
    user: User | None = None,
) -> Flow[dict[str, object]]:
    """The profile of `membership`, with its user (read here unless the flow read it already: `user`)."""
    if user is None:
        user = yield from perform(LoadUser(project.id, membership.user_id))
    if user is None:  # a membership never outlives its user (a user's deletion drops both in one commit)
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    team: Team | None = None
    if user.selected_team_id is not None:
        team = yield from perform(LoadTeam(project.id, user.selected_team_id))
    auth = ctx.require_auth()
    return render_member_profile(
        membership,
        user,
        auth.access_type,
        project.config,
        team,
        caller_id=auth.user_id,
        caller_team_ids=caller_team_ids,
        compat=ctx.options.compat,
    )


def _client_team_ids(ctx: RequestContext) -> Flow[frozenset[str]]:
    """The teams a client caller is a member of: the only ones it may see as another member's selected team."""
    auth = ctx.require_auth()
    if auth.access_type is not AccessType.CLIENT or auth.user_id is None:
        return frozenset()
    memberships = yield from perform(ListMemberships(auth.project.id, user_id=auth.user_id))
    return frozenset(m.team_id for m in memberships)


def _membership_not_found(team_id: str, user_id: str) -> KnownError:
    return KnownError(ErrorCode.TEAM_MEMBERSHIP_NOT_FOUND, details={"team_id": team_id, "user_id": user_id})


def update_member_profile(ctx: RequestContext[MemberProfileUpdateBody, None, MembershipParams]) -> Flow[Response]:
    """PATCH /team-member-profiles/{team_id}/{user_id}: a client only its own profile (403); the target must be a
    member (404 USER_NOT_FOUND, then 404 TEAM_MEMBERSHIP_NOT_FOUND, also for an unknown team)."""
    auth = ctx.require_auth()
    project = auth.project
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    body: MemberProfileUpdateBody = ctx.body
    if auth.access_type is AccessType.CLIENT and user_id != auth.user_id:
        raise KnownError(ErrorCode.CANNOT_UPDATE_OTHER_USERS_PROFILE)
    user, membership = yield from perform(
        Together((LoadUser(project.id, user_id), LoadMembership(project.id, team_id, user_id)))
    )
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    changes: list[tuple[str, object]] = []
    if "display_name" in body.model_fields_set:
        changes.append(("display_name", body.display_name))
    if "profile_image_url" in body.model_fields_set:
        # The user's own image rule, by access type: a client may set only a base64 data image, never a remote URL
        # that every member's client would fetch (the original applies the server rule to everyone here).
        changes.append(("profile_image_url", checked_profile_image(body.profile_image_url, auth.access_type)))
    if membership is None:
        raise _membership_not_found(team_id, user_id)
    updated = yield from patch_read_membership(project.id, membership, MembershipChanges.of(changes))
    return json_response(200, (yield from _rendered(ctx, project, updated, user=user)))


def get_member_profile(ctx: RequestContext[None, None, MembershipParams]) -> Flow[Response]:
    """GET /team-member-profiles/{team_id}/{user_id}: a client reading another member needs `$read_members`."""
    auth = ctx.require_auth()
    team_id: str = ctx.params.team_id
    user_id = ctx.resolve_user_id(ctx.params.user_id)
    if auth.access_type is AccessType.CLIENT and user_id != auth.user_id:
        yield from _require_member_with(ctx, team_id, "$read_members")
    membership = yield from perform(LoadMembership(auth.project.id, team_id, user_id))
    if membership is None:
        raise _membership_not_found(team_id, user_id)
    caller_team_ids = (yield from _client_team_ids(ctx)) if user_id != auth.user_id else frozenset()
    return json_response(200, (yield from _rendered(ctx, auth.project, membership, caller_team_ids)))


def list_member_profiles(ctx: RequestContext[None, ListMembershipsQuery]) -> Flow[Response]:
    """GET /team-member-profiles?team_id=&user_id=: in membership order. Clients must name a team they are in,
    and need `$read_members` unless they list only themselves."""
    auth = ctx.require_auth()
    project = auth.project
    query: ListMembershipsQuery = ctx.query
    user_id = ctx.resolve_user_id(query.user_id) if query.user_id else None
    if auth.access_type is AccessType.CLIENT:
        if query.team_id is None:
            raise KnownError(ErrorCode.TEAM_ID_REQUIRED_FOR_CLIENT)
        if user_id is None or user_id != auth.user_id:
            yield from _require_member_with(ctx, query.team_id, "$read_members")
        elif (yield from perform(LoadMembership(project.id, query.team_id, user_id))) is None:
            raise _membership_not_found(query.team_id, user_id)
    else:
        if query.team_id is not None and (yield from perform(LoadTeam(project.id, query.team_id))) is None:
            raise KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": query.team_id})
        if user_id is not None and (yield from perform(LoadUser(project.id, user_id))) is None:
            raise KnownError(ErrorCode.USER_NOT_FOUND)
    memberships = yield from perform(ListMemberships(project.id, team_id=query.team_id, user_id=user_id))
    others = any(m.user_id != auth.user_id for m in memberships)
    caller_team_ids = (yield from _client_team_ids(ctx)) if others else frozenset()
    items = []
    for membership in memberships:
        items.append((yield from _rendered(ctx, project, membership, caller_team_ids)))
    return json_response(200, {"items": items, "is_paginated": False})


def _require_member_with(ctx: RequestContext, team_id: str, permission_id: str) -> Flow[Membership]:
    """The caller must be a member (404 TEAM_MEMBERSHIP_NOT_FOUND) holding `permission_id` (401)."""
    auth = ctx.require_auth()
    me = auth.user_id
    if me is None:
        raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
    if (yield from perform(LoadMembership(auth.project.id, team_id, me))) is None:
        raise _membership_not_found(team_id, me)
    return (yield from require_permission(ctx, team_id, permission_id))
