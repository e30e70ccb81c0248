"""Sign-in with a one-time code (reference §2.2-2.4): send a code, sign in with it, or only check it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from identity_proto.changes import UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    AddressHolder,
    EmailRefusal,
    EmailSignIn,
    EmailSignInOutcome,
    FindAuthAddressHolder,
    Flow,
    ListContactChannels,
    PutCode,
    Together,
    UserChannels,
    auth_address_verified,
    find_user_by_email,
    perform,
)
from identity_proto.effects.commit import (
    Commit,
    CommitConflict,
    Committed,
    FieldsAre,
    IndexIs,
    IndexName,
    IsAbsent,
    PatchUser,
    PutSession,
    RecordKind,
    Write,
    commit,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.flows.anonymous import anonymous_caller, upgrade_anonymous_user
from identity_proto.flows.codes import check_code, new_code, present_code
from identity_proto.flows.emails import deliver, new_email
from identity_proto.flows.sessions import IssuedTokens, issue_access_token, new_session
from identity_proto.flows.signin import (
    NewUser,
    commit_new_user,
    finish_sign_in,
    require_second_factor,
    rerun_on_conflict,
    sign_up_parts,
    signed_in,
)
from identity_proto.http import Response
from identity_proto.preconditions import guarded
from identity_proto.ratelimits import count_event, limit_not_reached, rule_for
from identity_proto.records import CodePurpose, Project, ProjectConfig, Session, User, VerificationCode, replaced
from identity_proto.render import json_response
from identity_proto.tokens import new_uuid
from identity_proto.urls import UnsafeURL, WebURL, parse_origin_pattern, parse_web_url
from identity_proto.users import normalize_email

if TYPE_CHECKING:
    from identity_proto.schemas import CodeBody, SendSignInCodeBody

__all__ = ["callback_is_trusted", "check_sign_in_code", "magic_link", "send_sign_in_code", "sign_in_with_code"]
__all__ += ["code_refusal", "sign_in_by_email", "sign_in_code_refusal", "store_sign_in_code"]

#: reference §2.2 step 4: the hosts that "localhost" covers (plus every `*.localhost` name), as a WHATWG parser
#: serialises them.
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})


def callback_is_trusted(url: str, config: ProjectConfig) -> bool:
    """reference §2.2 step 4: localhost when the project allows it, or a trusted domain (scheme, host, port;
    a `*.` host matches any subdomain), compared on the origin a browser would open (`identity_proto.urls`): a
    URL that a browser might read differently from us is never trusted, nor is a trusted domain we cannot parse."""
    try:
        origin = parse_web_url(url).origin
    except UnsafeURL:
        return False
    if config.allow_localhost and (origin.host in _LOCAL_HOSTS or origin.host.endswith(".localhost")):
        return True
    for trusted in config.domains:
        try:
            pattern = parse_origin_pattern(trusted.domain)
        except UnsafeURL:
            continue  # stored before the rule was this strict: it trusts nothing
        if pattern.matches(origin):
            return True
    return False


def magic_link(callback: WebURL, code: str) -> str:
    """The callback with its `code` query parameter set to the full code (an existing one is replaced). The
    callback is normalised and unambiguous, so splitting it here cannot move its origin."""
    parts = urlsplit(callback.href)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "code"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("code", code)])))


def code_refusal(found: UserChannels | None, email: str, *, sign_up_enabled: bool) -> EmailRefusal | None:
    """reference §2.2 step 2, decided on `found`, the address's holder read with their channels
    (`FindAuthAddressHolder`): an auth e-mail whose matched channel is unverified (`auth_address_verified`) cannot
    sign in with a code, and an address nobody holds (or a user who is gone) only when sign-up is enabled."""
    if found is None:
        return None if sign_up_enabled else EmailRefusal.SIGN_UP_DISABLED
    return None if auth_address_verified(found.user, found.stored, email) else EmailRefusal.UNVERIFIED


def sign_in_code_refusal(project_id: str, email: str, *, sign_up_enabled: bool) -> Flow[EmailRefusal | None]:
    """`code_refusal` for `email`, its holder read here (one read, nothing written)."""
    found = yield from perform(FindAuthAddressHolder(project_id, email))
    return code_refusal(found, email, sign_up_enabled=sign_up_enabled)


def store_sign_in_code(project_id: str, code: VerificationCode, *, sign_up_enabled: bool) -> Flow[EmailRefusal | None]:
    """Store the sign-in `code` for its address unless that address cannot sign in with it (`code_refusal`: the
    refusal, and no usable code left). One trip: the code's commit and the e-mail index's lookup of the address's
    holder go together (`Together`: on Redis one pipeline, the commit first), and the decision is made on the
    holder as read right after the code was stored. An address that is its holder's primary (the usual case)
    decides on the user alone; another auth channel of theirs needs their channels, read then (a second trip).

    Why not a read, then a commit guarded on what it read (the usual shape, and this one's before): that costs a
    second round trip on every code sent, and the guards bought nothing a sign-in relies on. A sign-in code names
    only its address, and signing in with it decides again, on the holder as they are then, whether that address
    may sign in (`sign_in_by_email`); here the decision only says whether the code is mailed. Nor does a rule
    move into the store: the commit is a plain `PutCode`, the rule stays in `code_refusal`. What it costs is
    confined to a refusal (an error answer): the code was stored before the decision, so a second commit spends
    it (stored again as used and expired; nobody was told it, and no attempt can succeed with it)."""
    email = code.email
    if email is None or code.purpose != _SIGN_IN:
        raise ValueError(f"a sign-in code names its address and has the sign-in purpose: {code!r}")
    stored, holder = yield Together(
        (Commit(project_id, writes=(PutCode(code),)), find_user_by_email(project_id, email))
    )
    if not isinstance(stored, Committed):  # pragma: no cover - an unguarded commit cannot conflict
        raise RuntimeError(f"storing a sign-in code answered {stored!r}")
    if holder is None:  # nobody holds it (or a user who is gone)
        refusal = None if sign_up_enabled else EmailRefusal.SIGN_UP_DISABLED
    elif holder.primary_email == email and holder.primary_email_auth_enabled:  # their primary: no channel read
        refusal = None if holder.primary_email_verified else EmailRefusal.UNVERIFIED
    else:
        found = yield from perform(ListContactChannels(project_id, holder.id))
        refusal = code_refusal(found, email, sign_up_enabled=sign_up_enabled)
    if refusal is not None:
        spent = replaced(code, {"used": True, "expires_at_millis": code.created_at_millis})
        yield from commit(project_id, writes=(PutCode(spent),))
    return refusal


def _refused(refusal: EmailRefusal, email: str) -> KnownError:
    if refusal is EmailRefusal.SIGN_UP_DISABLED:
        return KnownError(ErrorCode.SIGN_UP_NOT_ENABLED)
    return KnownError(
        ErrorCode.USER_EMAIL_ALREADY_EXISTS,
        message=f'A user with email "{email}" already exists but the email is not verified. Please login to '
        "your existing account with the method you used to sign up, and then verify your email to sign in "
        "with this login method.",
        details={"email": email, "would_work_if_email_was_verified": True},
    )


def send_sign_in_code(ctx: RequestContext[SendSignInCodeBody]) -> Flow[Response]:
    """POST /auth/otp/send-sign-in-code: mail a code and a magic link; answer the nonce.

    One trip (`store_sign_in_code`: the code stored and the address's holder read together); with rate limits on,
    the per-address limit is looked at before it (with the request's own counters: it counts nothing, so it rides
    with them as a read), so a request over the limit writes nothing, and counted once the code is stored."""
    project = ctx.require_auth().project
    body: SendSignInCodeBody = ctx.body
    if not project.config.magic_link_enabled:
        raise KnownError(ErrorCode.OTP_SIGN_IN_NOT_ENABLED)
    email, sign_up_enabled = normalize_email(body.email), project.config.sign_up_enabled
    if not callback_is_trusted(body.callback_url, project.config):
        # The address is checked first (reference §2.2 steps 2 and 4): a refused address is the error to show.
        refusal = yield from sign_in_code_refusal(project.id, email, sign_up_enabled=sign_up_enabled)
        if refusal is not None:
            raise _refused(refusal, email)
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    # Per address too, so one inbox cannot be flooded from many places. Only mail that goes out is counted: a
    # refused request must not spend the owner's budget (anyone could lock them out of code sign-in otherwise).
    limited = ctx.options.rate_limits_enabled
    rule, subject = rule_for("send_code_email", project.config), f"{project.id}:{email}"
    under_limit = limit_not_reached(rule, subject, now_ms=ctx.now_ms) if limited else None
    code, record = new_code(ctx, _SIGN_IN, ctx.options.code_lifetime_ms, email=email)
    storing = store_sign_in_code(project.id, record, sign_up_enabled=sign_up_enabled)
    refusal = yield from guarded(storing, [under_limit] if under_limit is not None else [])
    if refusal is not None:
        raise _refused(refusal, email)
    if limited:  # the code is stored but nobody knows it: a request refused here leaves it to expire unused
        yield from count_event(rule, subject, now_ms=ctx.now_ms, enforce=True)
    link = magic_link(parse_web_url(body.callback_url), code.code)
    text = (
        f"Your sign-in code for {project.display_name} is {code.otp}.\n\n"
        f"Or sign in with this link:\n{link}\n\n"
        "The code and the link work once, for 7 days. If you did not ask for them, ignore this e-mail.\n"
    )
    subject = f"Sign in to {project.display_name}: Your code is {code.otp}"
    yield from deliver(ctx, project.id, new_email(ctx, email, subject, text, code=code.otp, magic_link=link))
    return json_response(200, {"nonce": code.nonce})


def sign_in_with_code(ctx: RequestContext[CodeBody]) -> Flow[Response]:
    """POST /auth/otp/sign-in: consume the code, then sign in the user whose auth e-mail it was sent to, or
    create them (is_new_user) when there is none and sign-up is enabled; an anonymous caller is upgraded in place
    instead of a new user being made (`flows.anonymous`).

    Two storage steps: consuming the code, which reads who holds its address in the same step, then one commit
    deciding on that (`sign_in_by_email`). The code is consumed once: a commit that meets a concurrent change (a
    sign-up of the same address) runs the rest again, which then reads and signs in the winner."""
    project = ctx.require_auth().project
    body: CodeBody = ctx.body
    attempt = yield from present_code(ctx, project.id, body.code, _SIGN_IN, consume=True, with_holder=True)
    email = (attempt.code.email if attempt.code is not None else None) or ""
    return (
        yield from rerun_on_conflict(
            lambda first: _sign_in_with_address(ctx, project, email, attempt.holder if first else None)
        )
    )


def _sign_in_with_address(
    ctx: RequestContext, project: Project, email: str, holder: AddressHolder | None
) -> Flow[Response]:
    """The rest of a code sign-in once its code for `email` is consumed, deciding on `holder` (None: read it)."""
    # anonymous users: an anonymous caller becomes the user of an address nobody holds, keeping its id (reference
    # part 2 §4); when someone holds it, they sign in below and the anonymous user is left alone.
    anonymous = (yield from anonymous_caller(ctx, project)) if project.config.sign_up_enabled else None
    if anonymous is not None:
        upgraded = yield from upgrade_anonymous_user(
            ctx,
            project,
            anonymous,
            {
                "primary_email": email,
                "primary_email_verified": True,
                "primary_email_auth_enabled": True,
                "otp_auth_enabled": True,
            },
        )
        if isinstance(upgraded, User):
            return (yield from finish_sign_in(ctx, project, upgraded, is_new_user=True))
        holder = None  # it met the address's holder: read them
    newcomer_id = new_uuid(ctx.entropy)  # drawn first, as always; the newcomer is made only for a sign-up

    def newcomer() -> NewUser:
        user = User(
            id=newcomer_id,
            signed_up_at_millis=ctx.now_ms,
            last_active_at_millis=ctx.now_ms,
            primary_email=email,
            primary_email_verified=True,
            primary_email_auth_enabled=True,
            otp_auth_enabled=True,
        )
        return sign_up_parts(ctx, project, user)

    # The session is the holder's when the code's step read one (made the signed-in user's below otherwise).
    held = holder.user_id if holder is not None and holder.user is not None else None
    refresh_token, session = new_session(ctx, user_id=held or "")
    result = yield from sign_in_by_email(
        project.id,
        email,
        ctx.now_ms,
        sign_up_enabled=project.config.sign_up_enabled,
        newcomer=newcomer,
        session=session,
        holder=holder,
    )
    outcome, user = result.outcome, result.user
    if outcome is not _SIGNED_IN and outcome is not _SIGNED_UP:
        if outcome is EmailSignInOutcome.UNVERIFIED:
            raise _refused(EmailRefusal.UNVERIFIED, email)
        if outcome is EmailSignInOutcome.SIGN_UP_DISABLED:
            raise _refused(EmailRefusal.SIGN_UP_DISABLED, email)
        if user is not None and outcome is EmailSignInOutcome.MFA_REQUIRED:
            yield from require_second_factor(ctx, project, user, is_new_user=False)  # raises: the second factor
        raise RuntimeError(f"signing in by e-mail: {outcome.value}")  # a random id collided: a 500, logged
    if user is None:  # pragma: no cover - a sign-in or sign-up answers its user
        raise RuntimeError(f"signing in by e-mail: {outcome.value} without a user")
    if session.user_id != user.id:
        session = replaced(session, {"user_id": user.id})
    tokens = IssuedTokens(refresh_token, issue_access_token(ctx, project, user, session.id), session)
    return signed_in(user, tokens, is_new_user=outcome is _SIGNED_UP)


#: Bound once: reading a member off an enum class costs several times a global's read (EnumType's attribute hook).
_SIGNED_IN, _SIGNED_UP, _MFA_REQUIRED = (
    EmailSignInOutcome.SIGNED_IN,
    EmailSignInOutcome.SIGNED_UP,
    EmailSignInOutcome.MFA_REQUIRED,
)
_SIGN_IN, _EMAIL = CodePurpose.SIGN_IN, IndexName.EMAIL


#: What signing in a holder decides on: whether their address is verified, whether they have a second factor, and
#: the two fields it may change.
_HOLDER_FIELDS = (
    "primary_email",
    "primary_email_verified",
    "primary_email_auth_enabled",
    "totp_secret_base64",
    "otp_auth_enabled",
    "last_active_at_millis",
)


def sign_in_by_email(
    project_id: str,
    email: str,
    now_ms: int,
    *,
    sign_up_enabled: bool,
    newcomer: NewUser | Callable[[], NewUser],
    session: Session,
    holder: AddressHolder | None = None,
) -> Flow[EmailSignIn]:
    """Sign in whoever holds the auth e-mail `email`, or sign them up (the end of a code sign-in, whose code the
    caller has consumed), deciding on `holder` (read with the code; read here when None), in one commit:

    - a user holds the address: UNVERIFIED (nothing written) unless that address of theirs is verified
      (`auth_address_verified`); else mark `otp_auth_enabled` (signing in by code adds the method); then
      MFA_REQUIRED when they have a TOTP secret (no session); else raise `last_active_at_millis` to `now_ms` if it
      is earlier and store `session` as theirs (its `user_id` replaced): SIGNED_IN. Guarded on the index entry
      still naming them and on the fields the decision read.
    - nobody does: SIGN_UP_DISABLED (nothing written) unless `sign_up_enabled`; else `newcomer` (whose auth e-mail
      is `email`; or a callable making it, called only here: a returning user's sign-in makes no user, team or
      permission list it would not store) with `session` (`commit_new_user`): SIGNED_UP; ID_TAKEN (nothing
      written) when a user with its id exists (random ids: practically never).

    A concurrent change of what it decided on raises `CommitConflict` (nothing written)."""
    if isinstance(newcomer, NewUser):
        _check_newcomer(newcomer, email)
    if holder is None:
        found = yield from perform(find_user_by_email(project_id, email))
        holder = AddressHolder(None if found is None else found.id, found)
    user = holder.user
    if user is not None:
        if user.primary_email == email and user.primary_email_auth_enabled:  # their primary (no read: most)
            verified = user.primary_email_verified
        else:
            verified = yield from _address_verified(project_id, user, email)
        if not verified:
            return EmailSignIn(EmailSignInOutcome.UNVERIFIED, user)
        mfa = user.totp_secret_base64 is not None
        changes: dict[str, Any] = {}
        if not user.otp_auth_enabled:
            changes["otp_auth_enabled"] = True
        if not mfa and user.last_active_at_millis < now_ms:
            changes["last_active_at_millis"] = now_ms
        writes: list[Write] = [PatchUser(user.id, UserChanges(tuple(changes.items())))] if changes else []
        if not mfa:
            theirs = session if session.user_id == user.id else replaced(session, {"user_id": user.id})
            writes.append(PutSession(theirs))
        if writes:
            guards = (IndexIs(_EMAIL, email, user.id), FieldsAre(user, _HOLDER_FIELDS))
            yield from commit(project_id, guards, tuple(writes))
        # The user as the commit left them, made here: asking the commit to return them (`returns`) would save this
        # copy on the memory store, but costs a Redis store far more (the record's fields in the reply, decoded).
        user = replaced(user, changes) if changes else user
        return EmailSignIn(_MFA_REQUIRED if mfa else _SIGNED_IN, user)
    if not sign_up_enabled:
        return EmailSignIn(EmailSignInOutcome.SIGN_UP_DISABLED)
    parts = newcomer if isinstance(newcomer, NewUser) else _check_newcomer(newcomer(), email)
    mine = session if session.user_id == parts.user.id else replaced(session, {"user_id": parts.user.id})
    try:
        created = yield from commit_new_user(project_id, parts, mine, replaces=holder.user_id)
    except CommitConflict as conflict:
        if conflict.guard == IsAbsent(RecordKind.USER, parts.user.id):
            return EmailSignIn(EmailSignInOutcome.ID_TAKEN)
        raise
    return EmailSignIn(EmailSignInOutcome.SIGNED_UP, created)


def _check_newcomer(newcomer: NewUser, email: str) -> NewUser:
    if newcomer.user.auth_email != email:
        raise ValueError("the user signing up holds the address as their auth e-mail")
    return newcomer


def _address_verified(project_id: str, user: User, email: str) -> Flow[bool]:
    """Whether `user`'s auth address `email` is verified: their primary's flag when it is that address, else that
    of their other auth channel with it (read only then)."""
    if user.primary_email == email and user.primary_email_auth_enabled:
        return user.primary_email_verified
    channels = yield from perform(ListContactChannels(project_id, user.id))
    if channels is None:  # deleted since it was read: decide again on what is there now
        raise CommitConflict(IndexIs(IndexName.EMAIL, email, user.id))
    return auth_address_verified(channels.user, channels.stored, email)


def check_sign_in_code(ctx: RequestContext[CodeBody]) -> Flow[Response]:
    """POST /auth/otp/sign-in/check-code: whether the code would sign in (counts an attempt; consumes nothing)."""
    project = ctx.require_auth().project
    body: CodeBody = ctx.body
    yield from check_code(ctx, project.id, body.code, CodePurpose.SIGN_IN, consume=False)
    return json_response(200, {"is_code_valid": True})
