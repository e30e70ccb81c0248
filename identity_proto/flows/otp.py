"""Sign-in with a one-time code (reference §2.2-2.4): send a code, sign in with it, or only check it."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from identity_proto.context import RequestContext
from identity_proto.effects import CreateUser, FindUserByAuthEmail, Flow, UpdateUser, UserWrite, perform
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.codes import check_code, create_code
from identity_proto.flows.emails import deliver, new_email
from identity_proto.flows.signin import after_sign_up, finish_sign_in
from identity_proto.http import Response
from identity_proto.ratelimits import check_rate_limits, rule_for
from identity_proto.records import CodePurpose, Project, ProjectConfig, User
from identity_proto.render import json_response
from identity_proto.schemas import CodeBody, SendSignInCodeBody
from identity_proto.tokens import new_uuid
from identity_proto.users import normalize_email

__all__ = ["callback_is_trusted", "check_sign_in_code", "send_sign_in_code", "sign_in_with_code"]

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def callback_is_trusted(url: str, config: ProjectConfig) -> bool:
    """reference §2.2 step 4: localhost when the project allows it, or a trusted domain (scheme, host, port;
    a `*.` host matches any subdomain)."""
    parts = urlsplit(url)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return False
    host = parts.hostname
    if config.allow_localhost and (host in _LOCAL_HOSTS or host.endswith(".localhost")):
        return True
    port = parts.port or _DEFAULT_PORTS[parts.scheme]
    for trusted in config.domains:
        allowed = urlsplit(trusted.domain)
        if allowed.scheme != parts.scheme or (allowed.port or _DEFAULT_PORTS.get(allowed.scheme)) != port:
            continue
        pattern = (allowed.hostname or "").lower()
        if pattern == host or (pattern.startswith("*.") and host.endswith(pattern[1:])):
            return True
    return False


def _magic_link(callback_url: str, code: str) -> str:
    """`callback_url` with its `code` query parameter set to the full code (an existing one is replaced)."""
    parts = urlsplit(callback_url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "code"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("code", code)])))


def _check_sign_in_email(project: Project, email: str, user: User | None) -> None:
    """reference §2.2 step 2, re-run at sign-in: an unverified auth e-mail cannot sign in with a code, and an
    unknown one only when sign-up is enabled."""
    if user is not None and not user.primary_email_verified:
        raise KnownError(
            ErrorCode.USER_EMAIL_ALREADY_EXISTS,
            message=f'A user with email "{email}" already exists but the email is not verified. Please login to '
            "your existing account with the method you used to sign up, and then verify your email to sign in "
            "with this login method.",
            details={"email": email, "would_work_if_email_was_verified": True},
        )
    if user is None and not project.config.sign_up_enabled:
        raise KnownError(ErrorCode.SIGN_UP_NOT_ENABLED)


def send_sign_in_code(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/otp/send-sign-in-code: mail a code and a magic link; answer the nonce."""
    project = ctx.require_auth().project
    body: SendSignInCodeBody = ctx.body
    if not project.config.magic_link_enabled:
        raise KnownError(ErrorCode.OTP_SIGN_IN_NOT_ENABLED)
    email = normalize_email(body.email)
    if ctx.options.rate_limits_enabled:  # per address too, so one inbox cannot be flooded from many places
        rule = rule_for("send_code_email", project.config)
        yield from check_rate_limits([(rule, f"{project.id}:{email}")], now_ms=ctx.now_ms)
    user = yield from perform(FindUserByAuthEmail(project.id, email))
    _check_sign_in_email(project, email, user)
    if not callback_is_trusted(body.callback_url, project.config):
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    code = yield from create_code(ctx, project.id, CodePurpose.SIGN_IN, ctx.options.code_lifetime_ms, email=email)
    link = _magic_link(body.callback_url, code.code)
    text = (
        f"Your sign-in code for {project.display_name} is {code.otp}.\n\n"
        f"Or sign in with this link:\n{link}\n\n"
        "The code and the link work once, for 7 days. If you did not ask for them, ignore this e-mail.\n"
    )
    subject = f"Sign in to {project.display_name}: Your code is {code.otp}"
    yield from deliver(ctx, project.id, new_email(ctx, email, subject, text))
    return json_response(200, {"nonce": code.nonce})


def sign_in_with_code(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/otp/sign-in: consume the code, then sign in the user whose auth e-mail it was sent to, or
    create them (is_new_user) when there is none and sign-up is enabled."""
    project = ctx.require_auth().project
    body: CodeBody = ctx.body
    code = yield from check_code(ctx, project.id, body.code, CodePurpose.SIGN_IN, consume=True)
    email = code.email or ""
    user = yield from perform(FindUserByAuthEmail(project.id, email))
    _check_sign_in_email(project, email, user)
    if user is not None:
        if not user.otp_auth_enabled:  # reference §2.2: signing in by code adds the OTP method silently
            updated = yield from perform(UpdateUser(project.id, user.id, (("otp_auth_enabled", True),)))
            user = updated if isinstance(updated, User) else user
        return (yield from finish_sign_in(ctx, project, user, is_new_user=False))
    new_user = User(
        id=new_uuid(ctx.entropy),
        signed_up_at_millis=ctx.now_ms,
        last_active_at_millis=ctx.now_ms,
        primary_email=email,
        primary_email_verified=True,
        primary_email_auth_enabled=True,
        otp_auth_enabled=True,
    )
    created = yield from perform(CreateUser(project.id, new_user))
    if created is UserWrite.EMAIL_TAKEN:
        # Someone signed up with this address between our look-up and the write: sign in as them.
        raced = yield from perform(FindUserByAuthEmail(project.id, email))
        if raced is None:
            raise KnownError(ErrorCode.VERIFICATION_CODE_ALREADY_USED)
        _check_sign_in_email(project, email, raced)
        return (yield from finish_sign_in(ctx, project, raced, is_new_user=False))
    assert isinstance(created, User)
    created = yield from after_sign_up(ctx, project, created)
    return (yield from finish_sign_in(ctx, project, created, is_new_user=True))


def check_sign_in_code(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/otp/sign-in/check-code: whether the code would sign in (counts an attempt; consumes nothing)."""
    project = ctx.require_auth().project
    body: CodeBody = ctx.body
    yield from check_code(ctx, project.id, body.code, CodePurpose.SIGN_IN, consume=False)
    return json_response(200, {"is_code_valid": True})
