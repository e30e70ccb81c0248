"""The end of every sign-in: the second factor if the user has one, else a new session."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import pyotp

from identity_proto.context import RequestContext
from identity_proto.effects import Flow
from identity_proto.effects.commit import (
    Announce,
    CommitConflict,
    GrantPermissions,
    Guard,
    IndexIs,
    IndexName,
    IsAbsent,
    PutMembership,
    PutSession,
    PutTeam,
    PutUser,
    RecordKind,
    SetIndex,
    Write,
    commit,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.codes import create_code
from identity_proto.flows.sessions import IssuedTokens, start_session
from identity_proto.http import Response
from identity_proto.permissions import definitions_by_id
from identity_proto.records import CodePurpose, Membership, Project, Session, Team, User, replaced
from identity_proto.render import json_response
from identity_proto.tokens import new_uuid

T = TypeVar("T")

__all__ = [
    "RERUN_ATTEMPTS",
    "NewUser",
    "commit_new_user",
    "finish_sign_in",
    "matching_totp_step",
    "personal_team",
    "personal_team_name",
    "require_second_factor",
    "rerun_on_conflict",
    "sign_up_parts",
    "signed_in",
    "store_new_user",
]


def personal_team_name(user: User) -> str:
    """reference §4: "<display name>'s Team", else "<e-mail>'s Team", else "Personal Team"."""
    if user.display_name:
        return f"{user.display_name}'s Team"
    if user.primary_email:
        return f"{user.primary_email}'s Team"
    return "Personal Team"


def personal_team(ctx: RequestContext, project: Project, user: User) -> tuple[Team, Membership] | None:
    """With `create_team_on_sign_up`, the personal team a new user gets and their membership as its creator."""
    if not project.config.create_team_on_sign_up:
        return None
    team = Team(id=new_uuid(ctx.entropy), display_name=personal_team_name(user), created_at_millis=ctx.now_ms)
    creator = Membership(
        team_id=team.id,
        user_id=user.id,
        created_at_millis=ctx.now_ms,
        permissions=tuple(sorted(project.config.team_creator_default_permissions)),
    )
    return team, creator


@dataclass(frozen=True, slots=True)
class NewUser:
    """What a sign-up stores: the user (with its personal team selected when it gets one), its personal team and
    creator membership, and the project permissions it is granted."""

    user: User
    team: tuple[Team, Membership] | None = None
    permissions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.team is not None:
            team, creator = self.team
            if self.user.selected_team_id != team.id or (creator.team_id, creator.user_id) != (team.id, self.user.id):
                raise ValueError("a new user has their personal team selected and is its creator")


def sign_up_parts(ctx: RequestContext, project: Project, user: User) -> NewUser:
    """`user` as the project signs it up: its default project permissions (`user_default_permissions` that are
    project definitions; others are skipped rather than failing the sign-up), and with `create_team_on_sign_up` a
    personal team it created and has selected."""
    known = definitions_by_id(project.config, "project")
    granted = tuple(p for p in project.config.user_default_permissions if p in known)
    team = personal_team(ctx, project, user)
    if team is not None:
        user = replaced(user, {"selected_team_id": team[0].id})
    return NewUser(user, team, granted)


def store_new_user(ctx: RequestContext, project: Project, user: User, session: Session | None = None) -> Flow[User]:
    """The one way a new user is stored, for every sign-up path: `sign_up_parts`'s parts, committed by
    `commit_new_user`. Returns the user as stored."""
    return (yield from commit_new_user(project.id, sign_up_parts(ctx, project, user), session))


def commit_new_user(
    project_id: str,
    parts: NewUser,
    session: Session | None = None,
    *,
    guards: tuple[Guard, ...] = (),
    writes: tuple[Write, ...] = (),
    replaces: str | None = None,
) -> Flow[User]:
    """Store a new user: the user, its sign-in address in the e-mail index, its permissions, its personal team and
    membership, and with `session`, its first session. All in one `Commit`, guarded on the id and the address being
    free (or, with `replaces`, naming that id: a dangling entry left by a user who is gone), plus `guards`, with
    `writes` after its own (a sign-up through a provider adds its account): they appear together or not at all,
    and of concurrent sign-ups of one address one commits, the others re-run (`CommitConflict`) and meet the
    winner. Records `user.created` (the user before it selected its team), then its team's `team.created`.
    Returns the user as stored."""
    user, team = parts.user, parts.team
    if session is not None and session.user_id != user.id:
        raise ValueError("the session is the new user's")
    all_guards: list[Guard] = [IsAbsent(RecordKind.USER, user.id)]
    all_writes: list[Write] = [PutUser(user)]
    if user.auth_email is not None:
        if replaces is not None:
            all_guards.append(IsAbsent(RecordKind.USER, replaces))
        all_guards.append(IndexIs(IndexName.EMAIL, user.auth_email, replaces))
        all_writes.append(SetIndex(IndexName.EMAIL, user.auth_email, user.id))
    if parts.permissions:
        all_writes.append(GrantPermissions(user.id, parts.permissions))
    events = [Announce("user.created", (RecordKind.USER, user.id), unselected=True)]
    if team is not None:
        all_writes += [PutTeam(team[0]), PutMembership(team[1])]
        events.append(Announce("team.created", (RecordKind.TEAM, team[0].id)))
    if session is not None:
        all_writes.append(PutSession(session))
    yield from commit(project_id, (*all_guards, *guards), (*all_writes, *writes), tuple(events))
    return user


#: How often the part of a flow after an effect that cannot be repeated (a consumed code) runs while its commit meets
#: concurrent changes, as the service re-runs a whole flow (`identity_proto.service`); then 503 WRITE_CONFLICT.
RERUN_ATTEMPTS = 5


def rerun_on_conflict(step: Callable[[bool], Flow[T]]) -> Flow[T]:
    """`step(first)`, run again while its commit finds a guard broken by a concurrent write (`CommitConflict`):
    for the rest of a flow that has consumed a code, which re-running the whole flow would find used. `first` is
    True on the first run only (what was read together with the code is current then; a re-run reads afresh)."""
    for attempt in range(RERUN_ATTEMPTS):
        try:
            return (yield from step(attempt == 0))
        except CommitConflict:
            continue
    raise KnownError(ErrorCode.WRITE_CONFLICT)


def require_second_factor(ctx: RequestContext, project: Project, user: User, *, is_new_user: bool) -> Flow[None]:
    """400 MULTI_FACTOR_AUTHENTICATION_REQUIRED with a 5-minute attempt code (reference §2.5): `user` has a TOTP
    secret, so signing in continues at the MFA endpoint."""
    attempt = yield from create_code(
        ctx,
        project.id,
        CodePurpose.MFA,
        ctx.options.mfa_attempt_lifetime_ms,
        user_id=user.id,
        is_new_user=is_new_user,
    )
    raise KnownError(ErrorCode.MULTI_FACTOR_AUTHENTICATION_REQUIRED, details={"attempt_code": attempt.code})


def signed_in(user: User, tokens: IssuedTokens, *, is_new_user: bool | None) -> Response:
    """The answer to a sign-in: 200 with the session's tokens (and `is_new_user` unless None)."""
    told = {} if is_new_user is None else {"is_new_user": is_new_user}
    return json_response(
        200, {"refresh_token": tokens.refresh_token, "access_token": tokens.access_token, **told, "user_id": user.id}
    )


def finish_sign_in(
    ctx: RequestContext,
    project: Project,
    user: User,
    *,
    is_new_user: bool,
    decided_on: tuple[str, ...] = (),
    tell_new_user: bool = True,
) -> Flow[Response]:
    """Sign `user` in: the second factor when they have a TOTP secret (`require_second_factor`), else 200 with the
    tokens of a new session, stored in one commit with the user's last activity (signing in is activity), guarded
    on the user still holding what the sign-in decided on: `decided_on` (the password it checked, say) and their
    TOTP secret (a concurrent change re-runs the flow, `CommitConflict`). `tell_new_user` False: no `is_new_user`
    in the answer."""
    if user.totp_secret_base64 is not None:
        yield from require_second_factor(ctx, project, user, is_new_user=is_new_user)
    fields = (*decided_on, "totp_secret_base64")
    tokens = yield from start_session(ctx, project, user, decided_on=fields, touch=True)
    return signed_in(user, tokens, is_new_user=is_new_user if tell_new_user else None)


def matching_totp_step(secret_base64: str, totp: str, now_ms: int) -> int | None:
    """The time step of `totp` if it is right for the current window at the request's time (RFC 6238: 30-second
    step, 6 digits, HMAC-SHA1), else None. Its step is what makes it single-use (`flows.mfa`)."""
    try:
        secret = base64.b64decode(secret_base64, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not secret:
        return None
    generator, now_s = pyotp.TOTP(base64.b32encode(secret).decode()), now_ms // 1000
    return generator.timecode(now_s) if generator.verify(totp, for_time=now_s) else None
