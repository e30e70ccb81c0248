"""The second factor (reference §2.5): a TOTP, presented with the attempt code the first factor returned."""

from __future__ import annotations

from typing import TYPE_CHECKING

from identity_proto.changes import UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import CodeIsUnused, Flow, LoadUser, UseCode, perform
from identity_proto.effects.commit import FieldsAre, PatchUser, PutSession, RecordKind, commit
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.codes import check_code
from identity_proto.flows.sessions import issue_access_token, new_session
from identity_proto.flows.signin import matching_totp_step
from identity_proto.http import Response
from identity_proto.ratelimits import FailureLimit
from identity_proto.records import CodePurpose
from identity_proto.render import json_response
from identity_proto.tokens import hash_secret

if TYPE_CHECKING:
    from identity_proto.schemas import MfaSignInBody

__all__ = ["mfa_sign_in"]


def mfa_sign_in(ctx: RequestContext[MfaSignInBody]) -> Flow[Response]:
    """POST /auth/mfa/sign-in {type: "totp", totp, code}: a wrong TOTP leaves the attempt code usable (its nonce
    still counts the attempt); a right one consumes it and signs the user in, once: a TOTP of a time step no later
    than the user's last accepted one (a replay, within its 30 seconds) is INVALID_TOTP_CODE, as a wrong one, and
    leaves the attempt code usable. Using the code, recording the step and storing the session are one commit,
    guarded on the code being unused and on the user's TOTP fields as read: a concurrent sign-in with the code or
    the step re-runs the flow, which then refuses it. The original accepts a TOTP again within its window."""
    project = ctx.require_auth().project
    body: MfaSignInBody = ctx.body
    attempt = yield from check_code(ctx, project.id, body.code, CodePurpose.MFA, consume=False)
    # A second factor is guessed per user, from any number of attempt codes: failures are limited per user.
    user_id = attempt.user_id or ""
    failures = FailureLimit.sign_in(
        ctx.options.rate_limits_enabled, project.config, f"{project.id}:user:{user_id}", now_ms=ctx.now_ms
    )
    user = yield from failures.guard(perform(LoadUser(project.id, user_id)))
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    step = (
        None if user.totp_secret_base64 is None else matching_totp_step(user.totp_secret_base64, body.totp, ctx.now_ms)
    )
    if step is None or (user.totp_last_step is not None and user.totp_last_step >= step):
        yield from failures.count()
        raise KnownError(ErrorCode.INVALID_TOTP_CODE)
    code_hash = hash_secret(body.code.lower())
    refresh_token, session = new_session(ctx, user.id)
    guards = (CodeIsUnused(code_hash), FieldsAre(user, ("totp_secret_base64", "totp_last_step")))
    writes = (UseCode(code_hash), PatchUser(user.id, UserChanges.of(totp_last_step=step)), PutSession(session))
    (stored,) = yield from commit(project.id, guards, writes, returns=((RecordKind.USER, user.id),))
    return json_response(
        200,
        {
            "refresh_token": refresh_token,
            "access_token": issue_access_token(ctx, project, stored, session.id),
            "is_new_user": attempt.is_new_user,
            "user_id": user.id,
        },
    )
