"""Team invitations (reference part 2 §3): an invitation is a one-time code (§0: 45 characters, 7 days, 20 attempts,
single use, stored only as hashes) of purpose TEAM_INVITATION that names a team and the address it was mailed to.
The mail's link is the callback URL with `code=<the code>`; the API shows only the invitation's id.

Who may do what (client access; server and admin skip these checks and need only the team to exist):
- send: `$invite_members`; list a team's: `$read_members`, then `$invite_members`; revoke: `$remove_members`.
  Membership is checked first (404 TEAM_MEMBERSHIP_NOT_FOUND), then each permission in that order (401
  TEAM_PERMISSION_REQUIRED naming the first one missing), recursively through `team_admin` / `team_member`.
- accept by code, details: any signed-in user who is not restricted (403 TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED);
  check-code: anyone with the code.
- list a user's invitations, accept one by id: the user themselves (a server: any user); what counts is that the
  invitation's address is one of the user's verified addresses, over all their contact channels
  (`identity_proto.users.verified_emails`).

Choices where the reference infers or leaves open (said in the README too):
- A failed accept does not burn the invitation: the code is checked (an attempt counted), then the user, then one
  atomic write marks it used and adds the membership. The original marks it used first, so a restricted user lost
  the invitation that completing their onboarding would have let them accept.
- Revoking checks that the invitation is the named team's (the original deletes any code with that id, so a member
  allowed to revoke in one team could revoke another team's invitations); an unknown id, or another team's, is 404
  VERIFICATION_CODE_NOT_FOUND (the original: 500).
- Sending to an unknown team by server access is 404 TEAM_NOT_FOUND before anything is stored (the original stores
  the code, then fails while mailing).
- Addresses follow the service's one e-mail rule (`checked_email`): stored normalised, compared exactly.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType
from identity_proto.context import RequestContext
from identity_proto.effects import (
    DropInvitation,
    Flow,
    InvitationAcceptance,
    InvitationIsStored,
    InvitationIsUnused,
    ListContactChannels,
    ListTeamInvitations,
    LoadMembership,
    LoadTeam,
    LoadTeamInvitation,
    LoadUser,
    MembershipFieldsAre,
    MembershipIsAbsent,
    PutInvitation,
    RecordExists,
    StorageEffect,
    Together,
    UseInvitation,
    perform,
)
from identity_proto.effects.commit import Announce, CommitConflict, Guard, PutMembership, RecordKind, Write, commit
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.codes import check_code, new_code
from identity_proto.flows.emails import deliver, new_email
from identity_proto.flows.otp import callback_is_trusted, magic_link  # the link is made as a sign-in mail's
from identity_proto.flows.teams import effective_permissions, membership_created, refusal
from identity_proto.http import Response
from identity_proto.ratelimits import check_under_limit, count_event, rule_for
from identity_proto.records import CodePurpose, Membership, Project, Team, User, VerificationCode
from identity_proto.render import json_response, text_response
from identity_proto.tokens import new_uuid
from identity_proto.urls import parse_web_url
from identity_proto.users import restricted_reason, verified_emails

if TYPE_CHECKING:
    from identity_proto.schemas import (
        AcceptTeamInvitationQuery,
        ListTeamInvitationsQuery,
        RevokeTeamInvitationQuery,
        SendTeamInvitationBody,
        TeamInvitationCodeBody,
        TeamInvitationIdParams,
    )

__all__ = [
    "accept_code",
    "accept_invitation",
    "accept_invitation_by_id",
    "check_invitation_code",
    "drop_invitation",
    "invitation_details",
    "list_invitations",
    "revoke_invitation",
    "send_invitation",
    "store_invitation",
]

#: reference §0: the e-mail's subject.
_SUBJECT = "You have been invited to join {team}"


def render_invitation(code: VerificationCode, team: Team) -> dict[str, Any]:
    """The invitation object of reference §3 (`id` is the invitation's, never the code)."""
    return {
        "id": code.id,
        "team_id": team.id,
        "team_display_name": team.display_name,
        "expires_at_millis": code.expires_at_millis,
        "recipient_email": code.email,
    }


def _is_open(code: VerificationCode, now_ms: int) -> bool:
    return not code.used and now_ms < code.expires_at_millis


def _team_not_found(team_id: str) -> KnownError:
    return KnownError(ErrorCode.TEAM_NOT_FOUND, details={"team_id": team_id})


def _require_team_permissions(
    ctx: RequestContext, team_id: str, user_id: str, permissions: tuple[str, ...], membership: Membership | None
) -> None:
    """reference §3: the caller must be a member of the team (404 TEAM_MEMBERSHIP_NOT_FOUND, also for an unknown
    team), then hold each permission, in order (401 TEAM_PERMISSION_REQUIRED naming the first one missing)."""
    if membership is None:
        raise KnownError(ErrorCode.TEAM_MEMBERSHIP_NOT_FOUND, details={"team_id": team_id, "user_id": user_id})
    held = effective_permissions(ctx.require_auth().project.config, membership)
    for permission_id in permissions:
        if permission_id not in held:
            raise KnownError(
                ErrorCode.TEAM_PERMISSION_REQUIRED,
                details={"team_id": team_id, "user_id": user_id, "permission_id": permission_id},
            )


def _team_for(
    ctx: RequestContext,
    team_id: str,
    permissions: tuple[str, ...],
    *,
    no_user: ErrorCode,
    invitation_id: str | None = None,
) -> Flow[tuple[Team, VerificationCode | None]]:
    """The team an operation on its invitations names: a client must hold `permissions` in it (without a user:
    `no_user`); server and admin only need it to exist (404 TEAM_NOT_FOUND). With `invitation_id`, that invitation
    too (None when there is none). One trip: the caller's membership, the team and the invitation are read
    together, and judged in that order."""
    auth = ctx.require_auth()
    project_id = auth.project.id
    user_id: str | None = None
    if auth.access_type is AccessType.CLIENT:
        if auth.user_id is None:
            raise KnownError(no_user)
        user_id = auth.user_id
    reads: tuple[StorageEffect[Any], ...] = (LoadTeam(project_id, team_id),)
    if invitation_id is not None:
        reads += (LoadTeamInvitation(project_id, invitation_id),)
    if user_id is not None:
        reads += (LoadMembership(project_id, team_id, user_id),)
    found = yield from perform(Together(reads))
    if user_id is not None:
        _require_team_permissions(ctx, team_id, user_id, permissions, found[-1])
    team: Team | None = found[0]
    if team is None:
        raise _team_not_found(team_id)
    return team, (found[1] if invitation_id is not None else None)


def _invitation_mail_text(project: Project, team: Team, link: str) -> str:
    return (
        f"You have been invited to join {team.display_name} on {project.display_name}.\n\n"
        f"Join with this link:\n{link}\n\n"
        "The link works once, for 7 days. If you did not expect this invitation, ignore this e-mail.\n"
    )


def send_invitation(ctx: RequestContext[SendTeamInvitationBody]) -> Flow[Response]:
    """POST /team-invitations/send-code: mail an invitation to join the team; answer its id."""
    auth = ctx.require_auth()
    project = auth.project
    body: SendTeamInvitationBody = ctx.body
    team, _ = yield from _team_for(
        ctx, body.team_id, ("$invite_members",), no_user=ErrorCode.USER_AUTHENTICATION_REQUIRED
    )
    if not callback_is_trusted(body.callback_url, project.config):
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    # Per address, counted only when a mail goes out (as sign-in codes are): one inbox cannot be flooded with
    # invitations, and a request refused by a check above spends nothing. Counted before the invitation is stored
    # (unlike a sign-in code, an invitation refused here would otherwise be listed by its team, never mailed).
    if ctx.options.rate_limits_enabled:
        rule, subject = rule_for("send_invitation_email", project.config), f"{project.id}:{body.email}"
        yield from check_under_limit(rule, subject, now_ms=ctx.now_ms)
        yield from count_event(rule, subject, now_ms=ctx.now_ms, enforce=True)
    code, record = new_code(ctx, CodePurpose.TEAM_INVITATION, ctx.options.code_lifetime_ms, email=body.email)
    record = dataclasses.replace(record, id=new_uuid(ctx.entropy), team_id=team.id)
    if not (yield from store_invitation(project.id, record)):
        raise _team_not_found(team.id)  # deleted since it was read
    link = magic_link(parse_web_url(body.callback_url), code.code)
    mail = new_email(
        ctx,
        body.email,
        _SUBJECT.format(team=team.display_name),
        _invitation_mail_text(project, team, link),
        magic_link=link,
    )
    yield from deliver(ctx, project.id, mail)
    return json_response(200, {"success": True, "id": record.id})


def list_invitations(ctx: RequestContext[None, ListTeamInvitationsQuery]) -> Flow[Response]:
    """GET /team-invitations?team_id= | ?user_id=: a team's open invitations, or those sent to a user's verified
    addresses (teams deleted since skipped); oldest first."""
    auth = ctx.require_auth()
    query: ListTeamInvitationsQuery = ctx.query
    # reference §3: plain 400s (no known-error code).
    if query.team_id is not None and query.user_id is not None:
        return text_response(400, "Cannot specify both team_id and user_id")
    if query.team_id is None and query.user_id is None:
        return text_response(400, "Must specify either team_id or user_id")
    project_id = auth.project.id
    if query.team_id is not None:
        team, _ = yield from _team_for(
            ctx, query.team_id, ("$read_members", "$invite_members"), no_user=ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER
        )
        of_team = yield from perform(ListTeamInvitations(project_id, team_id=team.id))
        items = [render_invitation(code, team) for code in of_team if _is_open(code, ctx.now_ms)]
        return json_response(200, {"items": items, "is_paginated": False})
    user_id = _own_user_id(ctx, query.user_id or "")
    emails = tuple(sorted((yield from _verified_emails(project_id, user_id))))
    codes: tuple[VerificationCode, ...] = ()
    if emails:
        found = yield from perform(ListTeamInvitations(project_id, emails=emails))
        codes = tuple(code for code in found if _is_open(code, ctx.now_ms))
    team_ids = tuple(dict.fromkeys(code.team_id or "" for code in codes))
    teams: tuple[Team | None, ...] = (
        (yield from perform(Together(tuple(LoadTeam(project_id, team_id) for team_id in team_ids)))) if team_ids else ()
    )
    by_id = {team.id: team for team in teams if team is not None}
    items = [render_invitation(code, by_id[code.team_id]) for code in codes if code.team_id in by_id]
    return json_response(200, {"items": items, "is_paginated": False})


def _own_user_id(ctx: RequestContext, user_id: str) -> str:
    """A `user_id` input naming whose invitations: a client may name only itself (`me` or its id; anything else,
    or no user, is 400 CANNOT_GET_OWN_USER_WITHOUT_USER, as the original answers)."""
    auth = ctx.require_auth()
    if auth.access_type is AccessType.CLIENT:
        if auth.user_id is None or user_id not in ("me", auth.user_id):
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        return auth.user_id
    return ctx.resolve_user_id(user_id)


def revoke_invitation(ctx: RequestContext[None, RevokeTeamInvitationQuery, TeamInvitationIdParams]) -> Flow[Response]:
    """DELETE /team-invitations/{id}?team_id=: delete one of the team's invitations."""
    auth = ctx.require_auth()
    query: RevokeTeamInvitationQuery = ctx.query
    if query.team_id is None:
        return text_response(400, "team_id is required for deleting a team invitation")  # reference §3: plain
    team, code = yield from _team_for(
        ctx,
        query.team_id,
        ("$remove_members",),
        no_user=ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER,
        invitation_id=ctx.params.invitation_id,
    )
    if not (yield from drop_invitation(auth.project.id, team.id, code)):
        raise KnownError(ErrorCode.VERIFICATION_CODE_NOT_FOUND)
    return json_response(200, {"success": True})


def _verified_emails(project_id: str, user_id: str) -> Flow[frozenset[str]]:
    """The user's verified addresses, over all their contact channels (none for a missing user)."""
    found = yield from perform(ListContactChannels(project_id, user_id))
    return frozenset() if found is None else verified_emails(found.channels)


def _accepting_user(ctx: RequestContext, member_of: str | None = None) -> Flow[tuple[User, Membership | None]]:
    """The signed-in user (401 USER_AUTHENTICATION_REQUIRED), who must not be restricted (403); with `member_of`,
    their membership of that team too (None when there is none), read in the same trip."""
    auth = ctx.require_auth()
    if auth.user_id is None:
        raise KnownError(ErrorCode.USER_AUTHENTICATION_REQUIRED)
    project_id, user_id = auth.project.id, auth.user_id
    membership: Membership | None = None
    if member_of is None:
        user = yield from perform(LoadUser(project_id, user_id))
    else:
        user, membership = yield from perform(
            Together((LoadUser(project_id, user_id), LoadMembership(project_id, member_of, user_id)))
        )
    if user is None:
        raise KnownError(ErrorCode.USER_AUTHENTICATION_REQUIRED)
    _refuse_restricted(user, auth.project)
    return user, membership


def _refuse_restricted(user: User, project: Project) -> None:
    reason = restricted_reason(user, project.config)
    if reason is not None:
        raise KnownError(
            ErrorCode.TEAM_INVITATION_RESTRICTED_USER_NOT_ALLOWED,
            details={"restricted_reason": {"type": reason}},
            context={"reason": reason},
        )


def _accept(
    ctx: RequestContext,
    code: VerificationCode,
    user_id: str,
    member: Membership | None,
    failures: dict[InvitationAcceptance, ErrorCode],
) -> Flow[None]:
    """Accept the invitation `code` (as read) for the user, whose membership of its team was read as `member`, with
    the project's default member permissions (`accept_code`); when nothing was written, raise what `failures`
    says (a concurrent accept or revoke may come between the flow's checks and the write)."""
    project = ctx.require_auth().project
    team_id = code.team_id or ""
    permissions = tuple(sorted(project.config.team_member_default_permissions))
    membership = Membership(team_id, user_id, ctx.now_ms, permissions=permissions)
    accepted = yield from accept_code(project.id, code, ctx.now_ms, membership, member)
    failure = failures.get(accepted)
    if failure is ErrorCode.TEAM_NOT_FOUND:
        raise _team_not_found(team_id)
    if failure is not None:
        raise KnownError(failure)


#: What an accept by code answers when nothing was written.
_BY_CODE_FAILURES: dict[InvitationAcceptance, ErrorCode] = {
    InvitationAcceptance.NOT_FOUND: ErrorCode.VERIFICATION_CODE_NOT_FOUND,
    InvitationAcceptance.EXPIRED: ErrorCode.VERIFICATION_CODE_EXPIRED,
    InvitationAcceptance.ALREADY_USED: ErrorCode.VERIFICATION_CODE_ALREADY_USED,
    InvitationAcceptance.USER_NOT_FOUND: ErrorCode.USER_NOT_FOUND,
    InvitationAcceptance.TEAM_NOT_FOUND: ErrorCode.TEAM_NOT_FOUND,
}
#: By id (reference §3): an invitation missing, used or expired is 404 VERIFICATION_CODE_NOT_FOUND alike.
_BY_ID_FAILURES: dict[InvitationAcceptance, ErrorCode] = {
    **_BY_CODE_FAILURES,
    InvitationAcceptance.EXPIRED: ErrorCode.VERIFICATION_CODE_NOT_FOUND,
    InvitationAcceptance.ALREADY_USED: ErrorCode.VERIFICATION_CODE_NOT_FOUND,
}


def accept_invitation(ctx: RequestContext[TeamInvitationCodeBody]) -> Flow[Response]:
    """POST /team-invitations/accept {code}: the signed-in user joins the invitation's team -> {}. The user's
    address is not compared with the invited one (whoever holds the link may join, as in the original)."""
    body: TeamInvitationCodeBody = ctx.body
    project = ctx.require_auth().project
    code = yield from check_code(ctx, project.id, body.code, CodePurpose.TEAM_INVITATION, consume=False)
    user, member = yield from _accepting_user(ctx, member_of=code.team_id or "")
    yield from _accept(ctx, code, user.id, member, _BY_CODE_FAILURES)
    return json_response(200, {})


def check_invitation_code(ctx: RequestContext[TeamInvitationCodeBody]) -> Flow[Response]:
    """POST /team-invitations/accept/check-code {code}: whether the code would be accepted (counts an attempt)."""
    body: TeamInvitationCodeBody = ctx.body
    project = ctx.require_auth().project
    yield from check_code(ctx, project.id, body.code, CodePurpose.TEAM_INVITATION, consume=False)
    return json_response(200, {"is_code_valid": True})


def invitation_details(ctx: RequestContext[TeamInvitationCodeBody]) -> Flow[Response]:
    """POST /team-invitations/accept/details {code}: the team an invitation is to (counts an attempt, uses
    nothing); for a signed-in user who is not restricted."""
    body: TeamInvitationCodeBody = ctx.body
    project = ctx.require_auth().project
    code = yield from check_code(ctx, project.id, body.code, CodePurpose.TEAM_INVITATION, consume=False)
    yield from _accepting_user(ctx)
    team_id = code.team_id or ""
    team = yield from perform(LoadTeam(project.id, team_id))
    if team is None:
        raise _team_not_found(team_id)
    return json_response(200, {"team_id": team.id, "team_display_name": team.display_name})


def accept_invitation_by_id(
    ctx: RequestContext[None, AcceptTeamInvitationQuery, TeamInvitationIdParams],
) -> Flow[Response]:
    """POST /team-invitations/{id}/accept?user_id=: a user joins through an open invitation sent to one of their
    verified addresses -> {}. Anything else about the invitation is 404 VERIFICATION_CODE_NOT_FOUND."""
    auth = ctx.require_auth()
    project = auth.project
    query: AcceptTeamInvitationQuery = ctx.query
    client = auth.access_type is AccessType.CLIENT
    user_id = _own_user_id(ctx, query.user_id) if client else ctx.resolve_user_id(query.user_id)
    if client and auth.user_id is None:
        raise KnownError(ErrorCode.USER_AUTHENTICATION_REQUIRED)
    user, code, channels = yield from perform(
        Together(
            (
                LoadUser(project.id, user_id),
                LoadTeamInvitation(project.id, ctx.params.invitation_id),
                ListContactChannels(project.id, user_id),
            )
        )
    )
    if client:  # the signed-in user, who must not be restricted (as `_accepting_user`)
        if user is None:
            raise KnownError(ErrorCode.USER_AUTHENTICATION_REQUIRED)
        _refuse_restricted(user, project)
    if code is None or not _is_open(code, ctx.now_ms) or user is None:
        raise KnownError(ErrorCode.VERIFICATION_CODE_NOT_FOUND)
    if code.email not in (frozenset() if channels is None else verified_emails(channels.channels)):
        raise KnownError(ErrorCode.VERIFICATION_CODE_NOT_FOUND)
    member = yield from perform(LoadMembership(project.id, code.team_id or "", user.id))
    yield from _accept(ctx, code, user.id, member, _BY_ID_FAILURES)
    return json_response(200, {})


# --------------------------------------------------------------------------------------------------------------
# The decisions behind the writes of invitations: each commits once (`effects.commit`), guarded on what it decided
# on; a refusal the guards alone decide is answered from the first guard that did not hold, in the same trip.


def store_invitation(project_id: str, code: VerificationCode) -> Flow[bool]:
    """Store the invitation `code` (purpose TEAM_INVITATION, with `id`, `team_id` and `email` set) as a one-time
    code, findable by its id and listed under its team and its address; only if the team exists (False: nothing
    written)."""
    refused = yield from refusal(
        project_id, (RecordExists(RecordKind.TEAM, code.team_id or ""),), (PutInvitation(code),), ()
    )
    return refused is None


def drop_invitation(project_id: str, team_id: str, code: VerificationCode | None) -> Flow[bool]:
    """Delete the invitation `code` (as read by its id; None: there is none) if it is one of `team_id`'s, with its
    index entries. False when it is not (nothing written). A concurrent revoke is a conflict: the re-run reads
    none."""
    if code is None or code.team_id != team_id:
        return False
    yield from commit(project_id, (InvitationIsStored(code.code_hash),), (DropInvitation(code),))
    return True


def accept_code(
    project_id: str, code: VerificationCode | None, now_ms: int, membership: Membership, member: Membership | None
) -> Flow[InvitationAcceptance]:
    """Accept the invitation `code` (as read; None: no such code) for `membership.user_id`: the checks of
    `InvitationAcceptance` in order (a code of another purpose, or of another team than `membership.team_id`,
    counts as not found); then, in one commit, mark it used and, unless the user is a member already (`member`:
    their membership of the team as read), add `membership` with its events (as `add_member` does). Of concurrent
    accepts of one invitation exactly one succeeds: the others find it used. The guards also answer for a revoke,
    or a deletion of the user or team, that came since the read; a membership that came or went since is a
    conflict (`CommitConflict`: the request re-runs)."""
    team_id, user_id = membership.team_id, membership.user_id
    if code is None or code.purpose != CodePurpose.TEAM_INVITATION or code.team_id != team_id:
        return InvitationAcceptance.NOT_FOUND
    if now_ms >= code.expires_at_millis:
        return InvitationAcceptance.EXPIRED
    if code.used:
        return InvitationAcceptance.ALREADY_USED
    guards: tuple[Guard, ...] = (
        InvitationIsStored(code.code_hash),
        InvitationIsUnused(code.code_hash),
        RecordExists(RecordKind.USER, user_id),
        RecordExists(RecordKind.TEAM, team_id),
    )
    writes: tuple[Write, ...] = (UseInvitation(code.code_hash),)
    events: tuple[Announce, ...] = ()
    if member is None:
        guards += (MembershipIsAbsent(team_id, user_id),)
        writes += (PutMembership(membership),)
        events = membership_created(membership)
    else:
        guards += (MembershipFieldsAre(member),)
    refused = yield from refusal(project_id, guards, writes, events)
    if refused is None:
        return InvitationAcceptance.ACCEPTED if member is None else InvitationAcceptance.ALREADY_MEMBER
    if refused == len(guards) - 1:
        raise CommitConflict(guards[refused])
    refusals = (
        InvitationAcceptance.NOT_FOUND,
        InvitationAcceptance.ALREADY_USED,
        InvitationAcceptance.USER_NOT_FOUND,
        InvitationAcceptance.TEAM_NOT_FOUND,
    )
    return refusals[refused]
