"""Password flows (reference part 2 §1): a forgotten password reset by a code sent by mail, a password changed
(old -> new) or set (for a user who has none). Signing up and in with a password: `identity_proto.flows.password`.

Reset codes use the one-time code engine (`identity_proto.flows.codes`): 45 characters, stored only as hashes,
valid 7 days, 20 attempts, used once, looked up by code AND purpose (a sign-in code is no reset code). The whole
code is mailed in the link (`callback_url` with `code=<code>`); nothing is split off as a nonce, and the API never
returns it.

Whoever proves a mailbox by a reset must end up in an account nobody else can still enter: a code is mailed only to
an address that is verified or that is the only way into its account (`effects.passwords.may_reset_through`; any
other address gets the unknown address's answer, after the same work), a completed reset marks that address
verified and ends every session, and a code dies once its address can no longer reset, the password changed or the
primary e-mail moved (`reset_code_holds`; it then answers as an unknown code). The original mails a reset to any
auth address, verified or not, and its codes outlive address, primary and password changes (README: departures).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from identity_proto.changes import UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    RESET_FIELDS,
    ChannelsAre,
    CodeIsUnused,
    DropSession,
    FindAuthAddressHolder,
    Flow,
    HashPassword,
    ListContactChannels,
    ListSessions,
    LoadUser,
    PasswordWrite,
    PutCode,
    PutMail,
    SendEmail,
    Together,
    UseCode,
    UserChannels,
    VerifyPassword,
    password_fingerprint,
    perform,
    reset_code_holds,
    reset_primary,
)
from identity_proto.effects.commit import (
    Announce,
    CommitConflict,
    CommitGuard,
    CommitWrite,
    FieldsAre,
    IndexIs,
    IndexName,
    PatchUser,
    RecordKind,
    commit,
)
from identity_proto.effects.contact_channels import channel_commit, verified_channel
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.errors import ErrorCode, KnownError, StorageUnavailable
from identity_proto.flows.codes import check_code, new_code
from identity_proto.flows.emails import new_email
from identity_proto.flows.otp import callback_is_trusted, magic_link
from identity_proto.flows.password import check_new_password
from identity_proto.flows.signin import rerun_on_conflict
from identity_proto.http import Response
from identity_proto.ratelimits import FailureLimit, check_under_limit, count_event, rule_for
from identity_proto.records import CodePurpose, Email, Project, Session, User, VerificationCode, replaced
from identity_proto.render import json_response, text_response
from identity_proto.schemas import schema_error
from identity_proto.tokens import hash_secret
from identity_proto.urls import parse_web_url
from identity_proto.users import normalize_email

if TYPE_CHECKING:
    from identity_proto.schemas import (
        ResetCodeBody,
        ResetPasswordBody,
        SendResetCodeBody,
        SetPasswordBody,
        UpdatePasswordBody,
    )

__all__ = [
    "bound_reset_code",
    "change_password",
    "check_reset_code",
    "give_password",
    "reset_password",
    "reset_with_code",
    "send_reset_code",
    "set_password",
    "store_reset_code",
    "update_password",
]

logger = logging.getLogger("identity_proto")

#: reference part 2 §1: the answer to send-reset-code, whether or not the address has an account.
SEND_RESET_CODE_ANSWER = {"success": "maybe, only if user with e-mail exists"}
_SUCCESS = {"success": True}

_WRITE_ERRORS = {
    PasswordWrite.CODE_NOT_FOUND: ErrorCode.VERIFICATION_CODE_NOT_FOUND,
    PasswordWrite.CODE_EXPIRED: ErrorCode.VERIFICATION_CODE_EXPIRED,
    PasswordWrite.CODE_USED: ErrorCode.VERIFICATION_CODE_ALREADY_USED,
    PasswordWrite.USER_NOT_FOUND: ErrorCode.USER_NOT_FOUND,
    PasswordWrite.PASSWORD_CHANGED: ErrorCode.PASSWORD_CONFIRMATION_MISMATCH,
}


def _require_password_auth(project: Project) -> None:
    """reference part 2 §1: the project's credential sign-in switch (checked by all four password-writing routes)."""
    if not project.config.credential_enabled:
        raise KnownError(ErrorCode.PASSWORD_AUTHENTICATION_NOT_ENABLED)


def _signed_in_user_id(ctx: RequestContext) -> str:
    """The signed-in user's id; without one, the original's schema error (reference part 2 §0: `auth.user must be
    defined`). The body has been validated before, so a request with both problems names the body's first."""
    user_id = ctx.require_auth().user_id
    if user_id is None:
        raise schema_error(ctx.request.method, ctx.request.path, ["auth.user must be defined"])
    return user_id


def _check_write(outcome: PasswordWrite) -> None:
    if outcome is not PasswordWrite.DONE:
        raise KnownError(_WRITE_ERRORS.get(outcome, ErrorCode.USER_NOT_FOUND))


def _mail_text(project: Project, link: str) -> tuple[str, str]:
    """reference part 2 §0: the password_reset mail's subject, and its text."""
    subject = f"Reset your password at {project.display_name}"
    text = (
        f"Someone asked to reset the password of your account at {project.display_name}.\n\n"
        f"Choose a new password with this link:\n{link}\n\n"
        "The link works once, for 7 days. If you did not ask for it, ignore this e-mail: your password stays as "
        "it is.\n"
    )
    return subject, text


def send_reset_code(ctx: RequestContext[SendResetCodeBody]) -> Flow[Response]:
    """POST /auth/password/send-reset-code {email, callback_url}: mail a reset link to the user whose sign-in
    address `email` is, when a reset may go through it (verified, or the account's only way in); the same answer
    whether or not there is one.

    The same answer, and the same work, whatever the address. The original sleeps 2-3 s for an unknown address;
    nothing sleeps here (a sleeping request holds a worker and still differs in timing from a real send). Instead
    both branches run one path: a code is made and hashed, the mail built, the address counted against its rate
    limit, the address's holder read with their channels (`FindAuthAddressHolder`: one step), and ONE commit
    (`store_reset_code`): for a user a reset may go through that address for, guarded on what the decision read,
    the code and (with outbox mail) the mail; for anybody else nothing, guarded the same way. An unknown or
    refused address differs only in that nothing is written and no mail goes out; a mailer (SMTP) send for an
    address that gets one is the one step the other branch has no twin for.

    The callback URL is checked for every address, known or not, before anything else (the original checks it
    for known addresses only, §1 step 4): otherwise an untrusted callback would answer 400 for an address that has
    an account and 200 for one that has not, which tells anybody who has an account."""
    project = ctx.require_auth().project
    body: SendResetCodeBody = ctx.body
    _require_password_auth(project)
    email = normalize_email(body.email)
    if not callback_is_trusted(body.callback_url, project.config):
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    # Mail per address (shared with sign-in codes: one budget per inbox). Counted for unknown addresses too (unlike
    # sign-in codes, which count only mail that goes out): a 429 that only addresses with an account could get
    # would tell who has one.
    if ctx.options.rate_limits_enabled:
        rule = rule_for("send_code_email", project.config)
        yield from count_event(rule, f"{project.id}:{email}", now_ms=ctx.now_ms, enforce=True)
    code, record = new_code(ctx, CodePurpose.PASSWORD_RESET, ctx.options.code_lifetime_ms, email=email)
    link = magic_link(parse_web_url(body.callback_url), code.code)
    subject, text = _mail_text(project, link)
    mail = new_email(ctx, email, subject, text, magic_link=link)
    outbox = ctx.options.mail_delivery == "outbox"
    # The code is bound to the password it may replace: read first (for every address alike), then decided on and
    # committed, guarded on that read; a concurrent change re-reads and decides again (the mail counted once).
    first_read = yield from perform(FindAuthAddressHolder(project.id, email))

    def step(first: bool) -> Flow[str | None]:
        found = first_read if first else (yield from perform(FindAuthAddressHolder(project.id, email)))
        current = found.user.password_hash if found is not None else None
        bound = replaced(record, {"password_fingerprint": password_fingerprint(current)})
        return (yield from store_reset_code(project.id, bound, found, mail if outbox else None))

    user_id = yield from rerun_on_conflict(step)
    if user_id is not None and not outbox:
        try:
            yield from perform(SendEmail(mail))
        except StorageUnavailable:
            raise
        except Exception as exc:
            # Not an error to the caller: a 502 only for addresses with an account would tell who has one. The
            # mail carries a code: log only what failed.
            logger.warning("password reset e-mail not delivered (request %s): %s", ctx.request_id, type(exc).__name__)
    return json_response(200, SEND_RESET_CODE_ANSWER)


def bound_reset_code(code: VerificationCode, password_hash: str | None) -> VerificationCode:
    """`code`, checked to be a password-reset code that names its address and carries the fingerprint of the
    password `password_hash` it is sent for (ValueError otherwise: the caller made it wrong)."""
    if code.email is None or code.purpose != CodePurpose.PASSWORD_RESET:
        raise ValueError("a password-reset code names the address it is sent to, with its purpose")
    if code.password_fingerprint != password_fingerprint(password_hash):
        raise ValueError("a password-reset code carries the fingerprint of the password it is sent for")
    return code


def _reset_guards(found: UserChannels, address: str) -> tuple[CommitGuard, ...]:
    """What a reset's rules read of the user `found` (`reset_code_holds`, the address's index entry)."""
    user = found.user
    return (
        FieldsAre(user, RESET_FIELDS),
        ChannelsAre(user.id, found.stored),
        IndexIs(IndexName.EMAIL, address, found.holder(address)),
    )


def _may_reset(found: UserChannels, code: VerificationCode) -> bool:
    """Whether `code` may reset the password of `found.user`: it holds (`reset_code_holds`) and its address still
    signs them in (the index gives it to them)."""
    email = code.email or ""
    return found.holder(email) == found.user.id and reset_code_holds(found.user, found.stored, code)


def store_reset_code(
    project_id: str, code: VerificationCode, found: UserChannels | None, mail: Email | None = None, keep: int = 1000
) -> Flow[str | None]:
    """Decide on `found` (the holder of `code.email` as `FindAuthAddressHolder` read it) and commit: when a reset
    may go through the address (`_may_reset`), the code as theirs (its `user_id` set, and `primary_channel_id`:
    `reset_primary`) and `mail`, when given, to the outbox (keeping `keep`), answering their id; else nothing,
    answering None. One commit either way, guarded on what the decision read (raises `CommitConflict` when that
    changed). `code` must be bound to the password read (`bound_reset_code`)."""
    email = code.email or ""
    bound_reset_code(code, found.user.password_hash if found is not None else None)
    if found is None:
        yield from commit(project_id)  # the same step as for an address with an account: nothing to write
        return None
    guards = _reset_guards(found, email)
    # bound to the primary read (the commit guards it): a code stored before the primary moves dies with the move
    user_id = found.user.id
    stored = replaced(code, {"user_id": user_id, "primary_channel_id": reset_primary(found.user)})
    if not _may_reset(found, stored):
        yield from commit(project_id, guards)
        return None
    writes: tuple[CommitWrite, ...] = (PutCode(stored),)
    if mail is not None:
        writes += (PutMail(mail, keep),)
    yield from commit(project_id, guards, writes)
    return user_id


def _reset_read(project_id: str, code: VerificationCode) -> Flow[tuple[UserChannels | None, tuple[Session, ...]]]:
    """The code's user with their channels and the index entry of its address, and their sessions: one trip."""
    user_id = code.user_id or ""
    found, sessions = yield from perform(
        Together((ListContactChannels(project_id, user_id, (code.email or "",)), ListSessions(project_id, user_id)))
    )
    return found, sessions


def reset_with_code(
    project_id: str,
    code: VerificationCode,
    password_hash: str,
    read: tuple[UserChannels | None, tuple[Session, ...]] | None = None,
) -> Flow[PasswordWrite]:
    """Reset with the password-reset `code` (presented before, unused: `AttemptVerificationCode`), deciding on
    `read` (`_reset_read`; read here when None, and again after a conflict), in one commit guarded on what the
    decision read and on the code being unused: USER_NOT_FOUND when its user is gone (the code used all the same);
    CODE_NOT_FOUND when it no longer holds (`_may_reset`: its address and the password it was sent for), writing
    nothing; else the code used, the password set, the address verified and every session ended (`user.updated`):
    DONE. CODE_USED when another use came first: of concurrent resets with one code, exactly one is DONE."""
    use = CodeIsUnused(code.code_hash)

    def step(first: bool) -> Flow[PasswordWrite]:
        try:
            return (yield from decide(first))
        except CommitConflict as conflict:
            if conflict.guard is use:
                return PasswordWrite.CODE_USED
            raise

    def decide(first: bool) -> Flow[PasswordWrite]:
        found, sessions = read if first and read is not None else (yield from _reset_read(project_id, code))
        if found is None:
            yield from commit(project_id, (use,), (UseCode(code.code_hash),))
            return PasswordWrite.USER_NOT_FOUND
        if not _may_reset(found, code):
            yield from commit(project_id, (use,))  # a code used meanwhile answers as used (CODE_USED)
            return PasswordWrite.CODE_NOT_FOUND
        user, email = found.user, code.email or ""
        verified = verified_channel(found, email)
        if verified is None:  # `_may_reset` found the channel: this cannot be
            raise AssertionError("a reset's address is one of its user's channels")
        channel_guards, channel_writes, _after = channel_commit(found, verified[0], "", None, pin_primary=False)
        guards = (use, *_reset_guards(found, email), *channel_guards)
        guards += (_as_read(user.id, sessions),)
        writes: tuple[CommitWrite, ...] = (
            UseCode(code.code_hash),
            PatchUser(user.id, UserChanges.of([("password_hash", password_hash)])),
        )
        writes += channel_writes + tuple(DropSession(session) for session in sessions)
        event = Announce("user.updated", (RecordKind.USER, user.id), with_team=True)
        yield from commit(project_id, guards, writes, (event,))
        return PasswordWrite.DONE

    return (yield from rerun_on_conflict(step))


def _live_reset_code(
    ctx: RequestContext, project_id: str, code: str
) -> Flow[tuple[VerificationCode, tuple[UserChannels | None, tuple[Session, ...]]]]:
    """Present a reset code (`check_code`: counts an attempt, consumes nothing), then read its user
    (`_reset_read`) and check that it still holds (`_may_reset`: its address is still one a reset may go through,
    and the password is the one it was sent for); one that does not answers as an unknown code does (404
    VERIFICATION_CODE_NOT_FOUND). A code whose user is gone passes here (the reset then uses it up and answers
    USER_NOT_FOUND). The reset decides the same again on this read, and its commit is guarded on it; this check
    makes check-code answer as a reset would, and a reset answer before the password rules and the hashing."""
    record = yield from check_code(ctx, project_id, code, CodePurpose.PASSWORD_RESET, consume=False)
    read = yield from _reset_read(project_id, record)
    found = read[0]
    if found is not None and not _may_reset(found, record):
        # A concurrent reset with this code may have used it and changed the password between the two reads
        # above: that answers as used (409), as the reset's own commit would, not as unknown. Only this refusal
        # pays the extra guard-only commit.
        try:
            yield from commit(project_id, (CodeIsUnused(record.code_hash),))
        except CommitConflict:
            raise KnownError(ErrorCode.VERIFICATION_CODE_ALREADY_USED) from None
        raise KnownError(ErrorCode.VERIFICATION_CODE_NOT_FOUND)
    return record, read


def check_reset_code(ctx: RequestContext[ResetCodeBody]) -> Flow[Response]:
    """POST /auth/password/reset/check-code {code}: whether the code would reset a password (counts an attempt;
    consumes nothing)."""
    project = ctx.require_auth().project
    body: ResetCodeBody = ctx.body
    yield from _live_reset_code(ctx, project.id, body.code)
    return json_response(200, {"is_code_valid": True})


def reset_password(ctx: RequestContext[ResetPasswordBody]) -> Flow[Response]:
    """POST /auth/password/reset {code, password}: replace (or create) the password of the code's user, mark the
    address the code was mailed to verified (whoever reset through it has just proved the mailbox), and end every
    session of theirs.

    Checks in the original's order: the code (counting an attempt), the switch, the length. The original marks
    the code used before the password rules run, so a too-short password burns the link (reference part 2 §0,
    inferred, and "not determined" in §10). Here the code is used in the same commit as the password write
    (`reset_with_code`): a person who typed a too-short password retries with the same link instead of asking for
    another mail, and no failure can leave a code used with the password unchanged. Guessing gains nothing from
    it: every submit still counts one of the code's 20 attempts, and of concurrent resets with one code exactly
    one succeeds (the others get 409 ALREADY_USED)."""
    project = ctx.require_auth().project
    body: ResetPasswordBody = ctx.body
    code, read = yield from _live_reset_code(ctx, project.id, body.code)
    _require_password_auth(project)
    check_new_password(body.password)
    password_hash = yield from perform(HashPassword(body.password, ctx.options.password_rounds))
    _check_write((yield from reset_with_code(project.id, code, password_hash, read)))
    return json_response(200, _SUCCESS)


def _account_subject(project: Project, user: User) -> str:
    """What `sign_in_failures` counts this user's failures under: their sign-in address, as password sign-in
    counts it (one budget for guesses through either route), else their id."""
    email = user.auth_email
    return f"{project.id}:{email}" if email is not None else f"{project.id}:user:{user.id}"


def update_password(ctx: RequestContext[UpdatePasswordBody]) -> Flow[Response]:
    """POST /auth/password/update {old_password, new_password}: the signed-in user changes their password; every
    session of theirs ends but the one whose refresh token the request carries (all of them without one).

    A wrong old password counts toward the `sign_in_failures` rule of the user's account, as a failed password
    sign-in does: a stolen access token cannot be used to guess the password faster than signing in can."""
    auth = ctx.require_auth()
    project = auth.project
    body: UpdatePasswordBody = ctx.body
    user_id = _signed_in_user_id(ctx)
    _require_password_auth(project)
    check_new_password(body.new_password)
    read = yield from perform(Together((LoadUser(project.id, user_id), ListSessions(project.id, user_id))))
    user: User | None = read[0]
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    old_hash = user.password_hash
    if old_hash is None:
        raise KnownError(ErrorCode.USER_DOES_NOT_HAVE_PASSWORD)
    failures = FailureLimit.sign_in(
        ctx.options.rate_limits_enabled, project.config, _account_subject(project, user), now_ms=ctx.now_ms
    )
    yield from check_under_limit(failures.rule, failures.subject, now_ms=ctx.now_ms)
    if not (yield from perform(VerifyPassword(body.old_password, old_hash))):
        yield from failures.count()
        raise KnownError(ErrorCode.PASSWORD_CONFIRMATION_MISMATCH)
    new_hash = yield from perform(HashPassword(body.new_password, ctx.options.password_rounds))
    refresh_token = ctx.options.headers.get(ctx.request, "refresh-token")
    keep = hash_secret(refresh_token) if refresh_token else None
    _check_write((yield from change_password(project.id, user.id, old_hash, new_hash, keep, (user, read[1]))))
    return json_response(200, _SUCCESS)


def change_password(
    project_id: str,
    user_id: str,
    old_password_hash: str,
    new_password_hash: str,
    keep_refresh_token_hash: str | None,
    read: tuple[User | None, tuple[Session, ...]] | None = None,
) -> Flow[PasswordWrite]:
    """Replace a user's password, deciding on `read` (the user and their sessions; read here when None, and again
    after a conflict): USER_NOT_FOUND, or PASSWORD_CHANGED when their stored hash is not `old_password_hash` (the
    one the old password was checked against; nothing written); else one commit, guarded on that hash and on the
    sessions read, storing the new hash and ending every session of theirs but the one whose refresh token hashes
    to `keep_refresh_token_hash` (None: all of them): DONE. Of concurrent changes from one old password, one is
    DONE; a session started meanwhile is read again, and ended too."""

    def step(first: bool) -> Flow[PasswordWrite]:
        if first and read is not None:
            user, sessions = read
        else:
            user, sessions = yield from perform(
                Together((LoadUser(project_id, user_id), ListSessions(project_id, user_id)))
            )
        if user is None:
            return PasswordWrite.USER_NOT_FOUND
        if user.password_hash != old_password_hash:
            return PasswordWrite.PASSWORD_CHANGED
        ended = tuple(s for s in sessions if s.refresh_token_hash != keep_refresh_token_hash)
        guards = (
            FieldsAre(user, ("password_hash",)),
            _as_read(user.id, sessions),
        )
        changes = UserChanges.of([("password_hash", new_password_hash)])
        yield from commit(project_id, guards, (PatchUser(user.id, changes), *(DropSession(s) for s in ended)))
        return PasswordWrite.DONE

    return (yield from rerun_on_conflict(step))


#: reference part 2 §1: set, when the user has a password already (a plain error, not a known one).
ALREADY_HAS_PASSWORD = "User already has a password set."  # noqa: S105 (a message)


def set_password(ctx: RequestContext[SetPasswordBody]) -> Flow[Response]:
    """POST /auth/password/set {password}: the signed-in user, who has no password, gets one (a user who signed up
    by code can then sign in by password). Sessions are left as they are."""
    auth = ctx.require_auth()
    project = auth.project
    body: SetPasswordBody = ctx.body
    user_id = _signed_in_user_id(ctx)
    _require_password_auth(project)
    check_new_password(body.password)
    user = yield from perform(LoadUser(project.id, user_id))  # no hashing for a user who has a password
    if user is None:
        raise KnownError(ErrorCode.USER_NOT_FOUND)
    if user.password_hash is not None:
        return text_response(400, ALREADY_HAS_PASSWORD)
    password_hash = yield from perform(HashPassword(body.password, ctx.options.password_rounds))
    outcome = yield from give_password(project.id, user.id, password_hash, user)
    if outcome is PasswordWrite.HAS_PASSWORD:  # set by a concurrent request since the read
        return text_response(400, ALREADY_HAS_PASSWORD)
    _check_write(outcome)
    return json_response(200, _SUCCESS)


def give_password(project_id: str, user_id: str, password_hash: str, user: User | None = None) -> Flow[PasswordWrite]:
    """Give a user without a password the password `password_hash`, deciding on `user` (as read; read here when
    None, and again after a conflict): USER_NOT_FOUND, HAS_PASSWORD (nothing written), or one commit guarded on
    the user still having none: DONE. Sessions are left as they are."""

    def step(first: bool) -> Flow[PasswordWrite]:
        current = user if first and user is not None else (yield from perform(LoadUser(project_id, user_id)))
        if current is None:
            return PasswordWrite.USER_NOT_FOUND
        if current.password_hash is not None:
            return PasswordWrite.HAS_PASSWORD
        changes = UserChanges.of([("password_hash", password_hash)])
        yield from commit(project_id, (FieldsAre(current, ("password_hash",)),), (PatchUser(current.id, changes),))
        return PasswordWrite.DONE

    return (yield from rerun_on_conflict(step))


def _as_read(user_id: str, sessions: Iterable[Session]) -> UserSessionsAre:
    """The guard that the user's sessions are still exactly `sessions`, as read."""
    return UserSessionsAre(user_id, tuple(sorted({session.id for session in sessions})))
