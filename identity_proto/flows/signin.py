"""The end of every sign-in: the second factor if the user has one, else a new session."""

from __future__ import annotations

import base64
import binascii

import pyotp

from identity_proto.changes import UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import CreateTeam, Flow, UpdateUser, perform
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.codes import create_code
from identity_proto.flows.permissions import grant_sign_up_permissions
from identity_proto.flows.sessions import IssuedTokens, start_session
from identity_proto.http import Response
from identity_proto.records import CodePurpose, Membership, Project, Team, User
from identity_proto.render import json_response
from identity_proto.tokens import new_uuid

__all__ = [
    "after_sign_up",
    "finish_sign_in",
    "matching_totp_step",
    "personal_team",
    "personal_team_name",
    "require_second_factor",
    "signed_in",
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


def after_sign_up(ctx: RequestContext, project: Project, user: User) -> Flow[User]:
    """What a new user gets: their default project permissions, and with `create_team_on_sign_up`, a personal
    team they created and have selected."""
    yield from grant_sign_up_permissions(project, user.id)  # permissions
    team = personal_team(ctx, project, user)
    if team is None:
        return user
    yield from perform(CreateTeam(project.id, *team))
    selected = yield from perform(UpdateUser(project.id, user.id, UserChanges.of(selected_team_id=team[0].id)))
    return selected if isinstance(selected, User) else user


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


def signed_in(user: User, tokens: IssuedTokens, *, is_new_user: bool) -> Response:
    """The answer to a sign-in: 200 with the session's tokens."""
    return json_response(
        200,
        {
            "refresh_token": tokens.refresh_token,
            "access_token": tokens.access_token,
            "is_new_user": is_new_user,
            "user_id": user.id,
        },
    )


def finish_sign_in(ctx: RequestContext, project: Project, user: User, *, is_new_user: bool) -> Flow[Response]:
    """Sign `user` in: the second factor when they have a TOTP secret (`require_second_factor`), else 200 with the
    tokens of a new session."""
    if user.totp_secret_base64 is not None:
        yield from require_second_factor(ctx, project, user, is_new_user=is_new_user)
    if user.last_active_at_millis < ctx.now_ms:  # signing in is activity
        touched = yield from perform(UpdateUser(project.id, user.id, UserChanges.of(last_active_at_millis=ctx.now_ms)))
        user = touched if isinstance(touched, User) else user
    tokens = yield from start_session(ctx, project, user)
    return signed_in(user, tokens, is_new_user=is_new_user)


def matching_totp_step(secret_base64: str, totp: str, now_ms: int) -> int | None:
    """The time step of `totp` if it is right for the current window at the request's time (RFC 6238: 30-second
    step, 6 digits, HMAC-SHA1), else None. Its step is what makes it single-use (`AcceptTotp`)."""
    try:
        secret = base64.b64decode(secret_base64, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not secret:
        return None
    generator, now_s = pyotp.TOTP(base64.b32encode(secret).decode()), now_ms // 1000
    return generator.timecode(now_s) if generator.verify(totp, for_time=now_s) else None
