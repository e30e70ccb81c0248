"""Password sign-up and sign-in (reference §6 codes), hashing through compute effects (never on the event loop)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from identity_proto.context import RequestContext
from identity_proto.effects import (
    Flow,
    HashPassword,
    UpgradeRefusal,
    VerifyPassword,
    find_user_by_email,
    perform,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.anonymous import anonymous_caller, upgrade_anonymous_user
from identity_proto.flows.contact_channels import mail_verification_code
from identity_proto.flows.otp import callback_is_trusted
from identity_proto.flows.signin import finish_sign_in, store_new_user
from identity_proto.http import Response
from identity_proto.passwords import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, timing_decoy_hash, too_long
from identity_proto.ratelimits import FailureLimit
from identity_proto.records import Project, User
from identity_proto.tokens import new_uuid
from identity_proto.users import email_taken, normalize_email

logger = logging.getLogger("identity_proto")

if TYPE_CHECKING:
    from identity_proto.schemas import PasswordSignInBody, PasswordSignUpBody

__all__ = ["sign_in_with_password", "sign_up_with_password"]


def _require_password_auth(project: Project) -> None:
    if not project.config.credential_enabled:
        raise KnownError(ErrorCode.PASSWORD_AUTHENTICATION_NOT_ENABLED)


def check_new_password(password: str) -> None:
    """The auth/password endpoints' length rules: at least 8 characters, at most 70 (and 72 bytes)."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise KnownError(ErrorCode.PASSWORD_TOO_SHORT, details={"min_length": MIN_PASSWORD_LENGTH})
    if too_long(password):
        raise KnownError(ErrorCode.PASSWORD_TOO_LONG, details={"maxLength": MAX_PASSWORD_LENGTH})


def sign_up_with_password(ctx: RequestContext[PasswordSignUpBody]) -> Flow[Response]:
    """POST /auth/password/sign-up {email, password}: a new user whose (unverified) e-mail signs them in; or,
    when the caller is an anonymous user, that user, upgraded in place (`flows.anonymous`)."""
    project = ctx.require_auth().project
    body: PasswordSignUpBody = ctx.body
    _require_password_auth(project)
    if not project.config.sign_up_enabled:
        raise KnownError(ErrorCode.SIGN_UP_NOT_ENABLED)
    check_new_password(body.password)
    email = normalize_email(body.email)
    verify_at = body.verification_callback_url
    if verify_at is not None and not callback_is_trusted(verify_at, project.config):
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)  # before anything is created
    if (yield from perform(find_user_by_email(project.id, email))) is not None:
        raise email_taken(email)
    password_hash = yield from perform(HashPassword(body.password, ctx.options.password_rounds))
    # anonymous users: an anonymous caller becomes this user, keeping its id (reference part 2 §4)
    anonymous = yield from anonymous_caller(ctx, project)
    if anonymous is not None:
        upgraded = yield from upgrade_anonymous_user(
            ctx,
            project,
            anonymous,
            {
                "primary_email": email,
                "primary_email_verified": False,
                "primary_email_auth_enabled": True,
                "password_hash": password_hash,
            },
        )
        if upgraded is UpgradeRefusal.EMAIL_TAKEN:
            raise email_taken(email)
        if isinstance(upgraded, User):
            yield from _mail_verification(ctx, project, upgraded, verify_at)
            return (yield from finish_sign_in(ctx, project, upgraded, is_new_user=True, tell_new_user=_tell(ctx)))
        # upgraded or deleted meanwhile: its token is ignored, as a non-anonymous one is
    user = User(
        id=new_uuid(ctx.entropy),
        signed_up_at_millis=ctx.now_ms,
        last_active_at_millis=ctx.now_ms,
        primary_email=email,
        primary_email_auth_enabled=True,
        password_hash=password_hash,
    )
    created = yield from store_new_user(ctx, project, user)  # a concurrent sign-up of the address: re-run, 409
    yield from _mail_verification(ctx, project, created, verify_at)
    return (yield from finish_sign_in(ctx, project, created, is_new_user=True, tell_new_user=_tell(ctx)))


def _tell(ctx: RequestContext) -> bool:
    """Whether password sign-up and sign-in answer `is_new_user`: not in compat mode (the original does not)."""
    return not ctx.options.compat


def _mail_verification(ctx: RequestContext, project: Project, user: User, callback: str | None) -> Flow[None]:
    """reference part 2 §2: a sign-up with `verification_callback_url` mails the new address a verification code
    (the contact channels' mail). The account exists by now: a mail refused (the address's mail budget spent, the
    mail server down) leaves it unverified, to be verified later, rather than failing the sign-up it belongs to."""
    if callback is None or user.primary_email is None:
        return
    try:
        yield from mail_verification_code(ctx, project, user.id, user.primary_email, callback)
    except KnownError as refused:
        logger.warning("sign-up of user %s: no verification mail (%s)", user.id, refused.code.name)


def sign_in_with_password(ctx: RequestContext[PasswordSignInBody]) -> Flow[Response]:
    """POST /auth/password/sign-in {email, password}.

    Every failure looks the same, so the endpoint does not tell who has an account: an unknown address, a user
    without a password and a wrong password all answer EMAIL_PASSWORD_MISMATCH (the original answers
    USER_DOES_NOT_HAVE_PASSWORD to the second), and all cost one bcrypt verification at the configured cost (the
    first two against `timing_decoy_hash`, which real hashes made here match in cost)."""
    project = ctx.require_auth().project
    body: PasswordSignInBody = ctx.body
    _require_password_auth(project)
    email = normalize_email(body.email)
    # Guessing one account's password from many addresses is bounded per account (known or not, alike): the
    # failure count is read with the user, and one more is counted on each failure.
    failures = FailureLimit.sign_in(
        ctx.options.rate_limits_enabled, project.config, f"{project.id}:{email}", now_ms=ctx.now_ms
    )
    user = yield from failures.guard(perform(find_user_by_email(project.id, email)))
    real_hash = user.password_hash if user is not None else None
    stored_hash = real_hash or timing_decoy_hash(ctx.options.password_rounds)
    matches = yield from perform(VerifyPassword(body.password, stored_hash))
    if user is None or real_hash is None or not matches:
        yield from failures.count()
        raise KnownError(ErrorCode.EMAIL_PASSWORD_MISMATCH)
    checked = ("password_hash",)
    return (
        yield from finish_sign_in(ctx, project, user, is_new_user=False, decided_on=checked, tell_new_user=_tell(ctx))
    )
