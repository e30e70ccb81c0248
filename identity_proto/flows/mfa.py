"""The second factor (reference §2.5): a TOTP, presented with the attempt code the first factor returned."""

from __future__ import annotations

from identity_proto.context import RequestContext
from identity_proto.effects import ConsumeVerificationCode, Flow, LoadUser, perform
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.codes import check_code
from identity_proto.flows.sessions import start_session
from identity_proto.flows.signin import totp_matches
from identity_proto.http import Response
from identity_proto.records import CodePurpose
from identity_proto.render import json_response
from identity_proto.schemas import MfaSignInBody
from identity_proto.tokens import hash_secret

__all__ = ["mfa_sign_in"]


def mfa_sign_in(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/mfa/sign-in {type: "totp", totp, code}: a wrong TOTP leaves the attempt code usable (its nonce
    still counts the attempt); a right one consumes it, atomically, and signs the user in."""
    project = ctx.require_auth().project
    body: MfaSignInBody = ctx.body
    attempt = yield from check_code(ctx, project.id, body.code, CodePurpose.MFA, consume=False)
    user = yield from perform(LoadUser(project.id, attempt.user_id or ""))
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    if user.totp_secret_base64 is None or not totp_matches(user.totp_secret_base64, body.totp, ctx.now_ms):
        raise KnownError(ErrorCode.INVALID_TOTP_CODE)
    if not (yield from perform(ConsumeVerificationCode(project.id, hash_secret(body.code.lower())))):
        raise KnownError(ErrorCode.VERIFICATION_CODE_ALREADY_USED)
    tokens = yield from start_session(ctx, project, user)
    return json_response(
        200,
        {
            "refresh_token": tokens.refresh_token,
            "access_token": tokens.access_token,
            "is_new_user": attempt.is_new_user,
            "user_id": user.id,
        },
    )
