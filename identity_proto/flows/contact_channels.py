"""Contact channels (reference part 2 §2): list, create, read, update and delete a user's e-mail channels, mail a
verification code (per channel, or the legacy form for the primary e-mail), and verify with it.

Each write reads the user's channels (with the index entries of their addresses), decides with the rules of
`identity_proto.effects.contact_channels` (which also holds the design: the primary channel *is* the user's
`primary_email*` fields), and commits guarded on what it read (`channel_commit`); a concurrent change re-runs it.
Who may act on whose channels: a client only on its own user's (no user: 400 CANNOT_GET_OWN_USER_WITHOUT_USER;
another user: 403 plain), a server or admin on anyone's.

Choices where the reference infers or leaves it open (each said where it is made):
- a server creating a channel for a missing user: 400 USER_ID_DOES_NOT_EXIST (the original fails with 500);
- a server listing the channels of a missing user: an empty list (as a list filtered to nobody);
- an update giving a value another channel of the user has: 400 plain "Contact channel already exists" (as on
  create; the original fails on its unique index);
- (security; the original differs) an unverified auth channel a client writes holds no sign-in address until it is
  verified (`identity_proto.effects.contact_channels`, "Unverified claims"), a user has at most
  `MAX_CHANNELS_PER_USER` channels when a client adds one (400 plain beyond), and a client's creations are limited
  per user (`contact_channel_user`) and per address named (`contact_channel_address`), every attempt counted;
- the verification mail's code is the 45-character code in the link (`callback_url` with `code=`); sending it is
  limited per client address (`send_code_ip`) and per address mailed (`send_code_email`, shared with sign-in
  codes: one inbox has one budget), counted only when a mail goes out; verifying and checking are limited per
  client address (`sign_in_ip`), and every attempt counts on the code (20 at most).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType
from identity_proto.context import RequestContext
from identity_proto.effects import (
    AttemptVerificationCode,
    ChannelVerification,
    ChannelWrite,
    CodeIsUnused,
    CodeOutcome,
    Flow,
    ListContactChannels,
    ListProjectContactChannels,
    UseCode,
    UserChannels,
    channel_commit,
    created_channels,
    deleted_channels,
    perform,
    updated_channels,
    verified_channel,
)
from identity_proto.effects.commit import commit
from identity_proto.errors import ErrorCode, KnownError, PlainError
from identity_proto.flows.codes import MAX_ATTEMPTS_PER_NONCE, OTP_LENGTH, check_code, create_code, refused_code
from identity_proto.flows.emails import deliver, new_email
from identity_proto.flows.otp import callback_is_trusted, magic_link
from identity_proto.http import Response
from identity_proto.preconditions import check_preconditions
from identity_proto.ratelimits import check_under_limit, count_event, rate_limit_precondition, rule_for
from identity_proto.records import CodePurpose, ContactChannel, Project
from identity_proto.render import json_response, render_contact_channel
from identity_proto.schemas import schema_error
from identity_proto.tokens import hash_secret, new_uuid
from identity_proto.urls import parse_web_url

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ClientContactChannelCreateBody,
        ClientContactChannelUpdateBody,
        ContactChannelParams,
        ListContactChannelsQuery,
        SendChannelVerificationBody,
        SendPrimaryVerificationBody,
        VerificationCodeBody,
    )

__all__ = [
    "check_contact_channel_code",
    "create_channel",
    "create_contact_channel",
    "delete_channel",
    "delete_contact_channel",
    "get_contact_channel",
    "list_contact_channels",
    "send_channel_verification_code",
    "send_primary_verification_code",
    "update_channel",
    "update_contact_channel",
    "verify_channel",
    "verify_contact_channel",
    "verify_with_code",
    "write_channels",
]

_SUCCESS = {"success": True}

#: The most channels (the primary included) a user may have when a client adds one; the original has no cap.
MAX_CHANNELS_PER_USER = 20


def _owner(ctx: RequestContext, user_id: str | None, verb: str) -> str:
    """The id of the user whose channels the caller acts on (`verb`: create, read, update, delete, list)."""
    auth = ctx.require_auth()
    if auth.access_type is AccessType.CLIENT:
        if auth.user_id is None:
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        if user_id not in ("me", auth.user_id):  # None too: a client lists its own channels only (e2e)
            raise PlainError(403, f"Client can only {verb} contact channels for their own user.")
        return auth.user_id
    if user_id is None:
        raise AssertionError("server requests name their user (the schema requires it)")
    return ctx.resolve_user_id(user_id)


def _refused(outcome: ChannelWrite, *, value: str | None, user_id: str, by_client: bool) -> Exception:
    """The error answering a refused write (`value`: the address the 409 names; None on update, as the original)."""
    if outcome is ChannelWrite.ALREADY_EXISTS:
        return PlainError(400, "Contact channel already exists")
    if outcome is ChannelWrite.TOO_MANY:
        return PlainError(400, f"A user can have at most {MAX_CHANNELS_PER_USER} contact channels")
    if outcome is ChannelWrite.USED_FOR_AUTH:
        details = {"type": "email", "contact_channel_value": value, "would_work_if_email_was_verified": False}
        message = None if value is not None else "This email  is already used for authentication by another account."
        return KnownError(
            ErrorCode.CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE, details=details, message=message
        )
    if outcome is ChannelWrite.USER_NOT_FOUND and value is not None:  # creating
        if by_client:  # deleted since the token was issued: there is no "me" any more
            return KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        # (inferred: the original answers 500) the error send-verification-code gives for a missing user
        return KnownError(ErrorCode.USER_ID_DOES_NOT_EXIST, details={"user_id": user_id})
    return PlainError(400, "Contact channel not found")  # updating or deleting (no period: e2e)


def write_channels(
    project_id: str,
    before: UserChannels,
    decided: tuple[list[ContactChannel], str | None] | list[ContactChannel] | ChannelWrite,
    next_primary_id: str,
) -> Flow[UserChannels | ChannelWrite]:
    """Commit a decision on `before` (the channels and the claimed address, or the channels alone, or a refusal,
    which writes nothing); the user's channels afterwards."""
    if isinstance(decided, ChannelWrite):
        return decided
    channels, claim = decided if isinstance(decided, tuple) else (decided, None)
    guards, writes, after = channel_commit(before, channels, next_primary_id, claim)
    yield from commit(project_id, guards, writes)
    return after


def _written(result: UserChannels | ChannelWrite, channel_id: str, **refusal: Any) -> ContactChannel:
    if isinstance(result, ChannelWrite):
        raise _refused(result, **refusal)
    found = result.find(channel_id)
    if found is None:
        raise AssertionError("a contact-channel write answered without its channel")
    return found


def create_channel(
    project_id: str,
    new: ContactChannel,
    *,
    make_primary: bool,
    next_primary_id: str,
    trusted: bool = True,
    max_channels: int = 0,
) -> Flow[UserChannels | ChannelWrite]:
    """Add `new` to its user (`created_channels`; USER_NOT_FOUND without the user): a read, then one commit."""
    before = yield from perform(ListContactChannels(project_id, new.user_id, (new.value,)))
    if before is None:
        return ChannelWrite.USER_NOT_FOUND
    decided = created_channels(before, new, make_primary=make_primary, trusted=trusted, max_channels=max_channels)
    return (yield from write_channels(project_id, before, decided, next_primary_id))


def update_channel(
    project_id: str, user_id: str, channel_id: str, next_primary_id: str, *, trusted: bool = True, **changes: Any
) -> Flow[UserChannels | ChannelWrite]:
    """Change one channel of a user (`updated_channels`; USER_NOT_FOUND without the user): a read, one commit."""
    value = changes.get("value")
    before = yield from perform(ListContactChannels(project_id, user_id, () if value is None else (value,)))
    if before is None:
        return ChannelWrite.USER_NOT_FOUND
    decided = updated_channels(before, channel_id, trusted=trusted, **changes)
    return (yield from write_channels(project_id, before, decided, next_primary_id))


def delete_channel(
    project_id: str, user_id: str, channel_id: str, next_primary_id: str
) -> Flow[UserChannels | ChannelWrite]:
    """Remove one channel of a user and its index entry (`deleted_channels`). Deleting the primary leaves the user
    without a primary e-mail (their sign-in methods stay: reference §2, e2e)."""
    before = yield from perform(ListContactChannels(project_id, user_id))
    if before is None:
        return ChannelWrite.USER_NOT_FOUND
    return (yield from write_channels(project_id, before, deleted_channels(before, channel_id), next_primary_id))


def verify_channel(project_id: str, code_hash: str, user_id: str, address: str) -> Flow[bool]:
    """Use the (checked, unused) CONTACT_CHANNEL_VERIFICATION code `code_hash` and mark the channel it names
    verified (`verified_channel`), in one commit; False (the code used all the same: reference §2, "consumed →
    channel missing → 400") when the user or the channel is gone. Of concurrent verifications with one code, one
    commits; the others conflict and, re-run, find the code used."""
    use = (CodeIsUnused(code_hash),), (UseCode(code_hash),)
    before = yield from perform(ListContactChannels(project_id, user_id))
    decided = None if before is None else verified_channel(before, address)
    if before is None or decided is None:
        yield from commit(project_id, *use)
        return False
    guards, writes, _after = channel_commit(before, decided[0], "", decided[1], pin_primary=False)
    yield from commit(project_id, use[0] + guards, use[1] + writes)
    return True


def verify_with_code(project_id: str, attempt: AttemptVerificationCode) -> Flow[ChannelVerification]:
    """Present a CONTACT_CHANNEL_VERIFICATION code (`attempt`, which counts and checks without consuming) and, when
    it is OK, use it and verify the channel it names (`verify_channel`)."""
    if attempt.consume:
        raise ValueError("the code is used by the commit that verifies its channel")
    result = yield from perform(attempt)
    code = result.code
    if result.outcome is not CodeOutcome.OK or code is None:
        return ChannelVerification(result)
    found = yield from verify_channel(project_id, code.code_hash, code.user_id or "", code.email or "")
    return ChannelVerification(result, channel_found=found)


# --------------------------------------------------------------------------------------------------------------
# CRUD


def list_contact_channels(ctx: RequestContext[None, ListContactChannelsQuery]) -> Flow[Response]:
    """GET /contact-channels?user_id=&contact_channel_id=: channels in creation order; a server without
    `user_id` gets every channel of the project (inferred)."""
    auth = ctx.require_auth()
    query: ListContactChannelsQuery = ctx.query
    channels: tuple[ContactChannel, ...]
    if query.user_id is None and auth.access_type is not AccessType.CLIENT:
        channels = yield from perform(ListProjectContactChannels(auth.project.id))
    else:
        found = yield from perform(ListContactChannels(auth.project.id, _owner(ctx, query.user_id, "list")))
        channels = found.channels if found is not None else ()
    if query.contact_channel_id is not None:
        channels = tuple(c for c in channels if c.id == query.contact_channel_id)
    items = [render_contact_channel(c) for c in channels]
    return json_response(200, {"items": items, "is_paginated": False})


def create_contact_channel(ctx: RequestContext[ClientContactChannelCreateBody]) -> Flow[Response]:
    """POST /contact-channels -> 201: a new channel (verified only when a server says so); `is_primary` makes it
    the user's primary e-mail, the old primary staying as another channel."""
    auth = ctx.require_auth()
    body: ClientContactChannelCreateBody = ctx.body
    user_id = _owner(ctx, body.user_id, "create")
    verified = bool(getattr(body, "is_verified", None))  # a client body has no such field (SCHEMA_ERROR)
    by_client = auth.access_type is AccessType.CLIENT
    if by_client and ctx.options.rate_limits_enabled:
        yield from _count_creation(ctx, auth.project, user_id, body.value)
    new = ContactChannel(new_uuid(ctx.entropy), user_id, body.value, verified, body.used_for_auth, ctx.now_ms)
    result = yield from create_channel(
        auth.project.id,
        new,
        make_primary=bool(body.is_primary),
        next_primary_id=new_uuid(ctx.entropy),
        trusted=not by_client,
        max_channels=MAX_CHANNELS_PER_USER if by_client else 0,
    )
    channel = _written(result, new.id, value=new.value, user_id=user_id, by_client=by_client)
    return json_response(201, render_contact_channel(channel))


def _count_creation(ctx: RequestContext, project: Project, user_id: str, value: str) -> Flow[None]:
    """Count a client's attempt to create a channel per user and per address named, in one trip (429 beyond)."""
    config = project.config
    checks = [
        (rule_for("contact_channel_user", config), f"{project.id}:{user_id}"),
        (rule_for("contact_channel_address", config), f"{project.id}:{value}"),
    ]
    precondition = rate_limit_precondition(checks, now_ms=ctx.now_ms)
    if precondition is not None:
        yield from check_preconditions([precondition])


def get_contact_channel(ctx: RequestContext[None, None, ContactChannelParams]) -> Flow[Response]:
    """GET /contact-channels/{user_id}/{contact_channel_id}."""
    auth = ctx.require_auth()
    params: ContactChannelParams = ctx.params
    found = yield from perform(ListContactChannels(auth.project.id, _owner(ctx, params.user_id, "read")))
    channel = None if found is None else found.find(params.contact_channel_id)
    if channel is None:
        raise PlainError(404, "Contact channel not found.")
    return json_response(200, render_contact_channel(channel))


def update_contact_channel(
    ctx: RequestContext[ClientContactChannelUpdateBody, None, ContactChannelParams],
) -> Flow[Response]:
    """PATCH /contact-channels/{user_id}/{contact_channel_id}: every field optional; a new value is unverified
    unless `is_verified` (server) is sent too; `is_primary` moves the primary either way."""
    auth = ctx.require_auth()
    params: ContactChannelParams = ctx.params
    body: ClientContactChannelUpdateBody = ctx.body
    user_id = _owner(ctx, params.user_id, "update")
    by_client = auth.access_type is AccessType.CLIENT
    result = yield from update_channel(
        auth.project.id,
        user_id,
        params.contact_channel_id,
        new_uuid(ctx.entropy),
        trusted=not by_client,
        value=body.value,
        used_for_auth=body.used_for_auth,
        is_verified=getattr(body, "is_verified", None),
        is_primary=body.is_primary,
    )
    channel = _written(result, params.contact_channel_id, value=None, user_id=user_id, by_client=by_client)
    return json_response(200, render_contact_channel(channel))


def delete_contact_channel(ctx: RequestContext[None, None, ContactChannelParams]) -> Flow[Response]:
    """DELETE /contact-channels/{user_id}/{contact_channel_id}: the channel only (sign-in methods stay)."""
    auth = ctx.require_auth()
    params: ContactChannelParams = ctx.params
    user_id = _owner(ctx, params.user_id, "delete")
    result = yield from delete_channel(auth.project.id, user_id, params.contact_channel_id, new_uuid(ctx.entropy))
    if isinstance(result, ChannelWrite):
        raise _refused(result, value=None, user_id=user_id, by_client=auth.access_type is AccessType.CLIENT)
    return json_response(200, _SUCCESS)


# --------------------------------------------------------------------------------------------------------------
# Verification


def send_channel_verification_code(
    ctx: RequestContext[SendChannelVerificationBody, None, ContactChannelParams],
) -> Flow[Response]:
    """POST /contact-channels/{user_id}/{contact_channel_id}/send-verification-code: mail a code that verifies
    the channel."""
    auth = ctx.require_auth()
    params: ContactChannelParams = ctx.params
    body: SendChannelVerificationBody = ctx.body
    by_client = auth.access_type is AccessType.CLIENT
    if by_client:
        if auth.user_id is None:  # even with a UUID in the path (e2e)
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        if params.user_id not in ("me", auth.user_id):
            raise PlainError(400, "Can only send verification code for your own user")
    user_id = ctx.resolve_user_id(params.user_id)
    found = yield from perform(ListContactChannels(auth.project.id, user_id))
    if found is None:
        if by_client:
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        raise KnownError(ErrorCode.USER_ID_DOES_NOT_EXIST, details={"user_id": user_id})
    channel = found.find(params.contact_channel_id)
    if channel is None:
        raise PlainError(404, "Contact channel not found")
    if channel.is_verified:
        raise KnownError(ErrorCode.EMAIL_ALREADY_VERIFIED)
    yield from mail_verification_code(ctx, auth.project, user_id, channel.value, body.callback_url)
    return json_response(200, _SUCCESS)


def send_primary_verification_code(ctx: RequestContext[SendPrimaryVerificationBody]) -> Flow[Response]:
    """POST /contact-channels/send-verification-code (legacy, `user.sendVerificationEmail`): mail a code that
    verifies the signed-in user's primary e-mail, which `email` must be."""
    auth = ctx.require_auth()
    body: SendPrimaryVerificationBody = ctx.body
    if auth.user_id is None:
        raise schema_error(ctx.request.method, ctx.request.path, ["auth.user must be defined"])
    found = yield from perform(ListContactChannels(auth.project.id, auth.user_id))
    if found is None:
        raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
    user = found.user
    if body.email != user.primary_email:
        details = {"email": body.email, "primary_email": user.primary_email}
        raise KnownError(ErrorCode.EMAIL_IS_NOT_PRIMARY_EMAIL, details=details)
    if user.primary_email_verified:
        raise KnownError(ErrorCode.EMAIL_ALREADY_VERIFIED)
    yield from mail_verification_code(ctx, auth.project, user.id, body.email, body.callback_url)
    return json_response(200, _SUCCESS)


def mail_verification_code(
    ctx: RequestContext, project: Project, user_id: str, email: str, callback: str
) -> Flow[None]:
    """Check the callback, make the code (naming the user and the address), mail the link: reference part 2 §0."""
    if not callback_is_trusted(callback, project.config):
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    limited = ctx.options.rate_limits_enabled
    rule, subject = rule_for("send_code_email", project.config), f"{project.id}:{email}"
    if limited:
        yield from check_under_limit(rule, subject, now_ms=ctx.now_ms)
    code = yield from create_code(
        ctx,
        project.id,
        CodePurpose.CONTACT_CHANNEL_VERIFICATION,
        ctx.options.code_lifetime_ms,
        email=email,
        user_id=user_id,
    )
    if limited:  # the code is stored but nobody knows it: a request refused here leaves it to expire unused
        yield from count_event(rule, subject, now_ms=ctx.now_ms, enforce=True)
    link = magic_link(parse_web_url(callback), code.code)
    text = (
        f"Verify your e-mail address for {project.display_name} by opening this link:\n{link}\n\n"
        "The link works once, for 7 days. If you did not ask for it, ignore this e-mail.\n"
    )
    subject_line = f"Verify your email at {project.display_name}"
    yield from deliver(ctx, project.id, new_email(ctx, email, subject_line, text, magic_link=link))


def verify_contact_channel(ctx: RequestContext[VerificationCodeBody]) -> Flow[Response]:
    """POST /contact-channels/verify: use the code and mark its channel verified, in one commit (`verify_channel`).
    No token is needed: the code names the user and the address."""
    project = ctx.require_auth().project
    body: VerificationCodeBody = ctx.body
    code = body.code.lower()
    attempt = AttemptVerificationCode(
        project.id,
        code_hash=hash_secret(code),
        nonce_hash=hash_secret(code[OTP_LENGTH:]),
        purpose=CodePurpose.CONTACT_CHANNEL_VERIFICATION,
        now_ms=ctx.now_ms,
        consume=False,  # used by the commit that verifies: of concurrent attempts, one commits
        max_attempts=MAX_ATTEMPTS_PER_NONCE,
    )
    result = yield from verify_with_code(project.id, attempt)
    if result.attempt.outcome is not CodeOutcome.OK:
        raise refused_code(result.attempt.outcome)
    if not result.channel_found:
        raise PlainError(400, "Contact channel not found. Was your contact channel deleted?")
    return json_response(200, _SUCCESS)


def check_contact_channel_code(ctx: RequestContext[VerificationCodeBody]) -> Flow[Response]:
    """POST /contact-channels/verify/check-code: whether the code would verify (counts an attempt; consumes
    nothing)."""
    project = ctx.require_auth().project
    body: VerificationCodeBody = ctx.body
    yield from check_code(ctx, project.id, body.code, CodePurpose.CONTACT_CHANNEL_VERIFICATION, consume=False)
    return json_response(200, {"is_code_valid": True})
