"""Records and helpers shared by the contract tests of codes, users, sessions and the outbox.

Times: the Redis stores give codes and sessions a TTL at their `expires_at_millis` plus a grace period
(`backends.redis.GRACE_MS`; garbage collection against Redis's own clock), so records stored by these tests expire in
the far future (`T0` is 2100-01-01) and stay put whatever the wall clock says. Only the TTL and grace tests use
wall-clock times.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from backends.memory import MemoryStore
from backends.redis import RedisStore
from identity_proto.drivers import Store, run
from identity_proto.effects import CodeIsUnused, Commit, Conflict, PutCode, UseCode, WebhookEndpoint
from identity_proto.flows.webhooks import add_webhook_endpoint
from identity_proto.records import CodePurpose, Email, Membership, RiskScores, Session, Team, User, VerificationCode

#: 2100-01-01T00:00:00Z in ms: every record expires after it, so no TTL fires during a test.
T0 = 4_102_444_800_000
#: The lifetime of a code made by `make_code`.
CODE_LIFETIME_MS = 600_000
#: The lifetime of a session made by `make_session`.
SESSION_LIFETIME_MS = 30 * 24 * 3_600_000

PROJECT = "proj-a"
OTHER_PROJECT = "proj-b"


def make_code(
    name: str,
    *,
    nonce: str | None = None,
    purpose: str = CodePurpose.SIGN_IN,
    created_at: int = T0,
    lifetime_ms: int = CODE_LIFETIME_MS,
    **fields: Any,
) -> VerificationCode:
    """A code whose hashes are derived from `name` (its nonce hash from `nonce`, default `name`)."""
    return VerificationCode(
        code_hash=f"code-{name}",
        nonce_hash=f"nonce-{nonce or name}",
        purpose=purpose,
        created_at_millis=created_at,
        expires_at_millis=created_at + lifetime_ms,
        **fields,
    )


def put_code(project_id: str, code: VerificationCode) -> Commit:
    """The commit that stores a one-time code, as the flows store one."""
    return Commit(project_id, writes=(PutCode(code),))


def use_code(project_id: str, code_hash: str) -> Commit:
    """The commit that uses a one-time code: `Committed()` for the one caller that found it unused, else
    `Conflict(0)` (nothing written)."""
    return Commit(project_id, (CodeIsUnused(code_hash),), (UseCode(code_hash),))


def make_user(user_id: str, email: str | None = None, *, auth: bool = True, **fields: Any) -> User:
    """A user; with `email`, its primary e-mail, auth-enabled unless `auth` is False."""
    return User(
        id=user_id,
        signed_up_at_millis=T0,
        last_active_at_millis=T0,
        primary_email=email,
        primary_email_auth_enabled=email is not None and auth,
        **fields,
    )


def rich_user() -> User:
    """A user whose every field differs from the defaults; metadata is nested JSON with unicode and nulls."""
    return User(
        id="user-rich",
        signed_up_at_millis=T0 - 86_400_000,
        last_active_at_millis=T0 - 1,
        display_name="Zoë Ünïcode ✓ «rich» 🎉",
        primary_email="zoë@exämple.com",
        primary_email_verified=True,
        primary_email_auth_enabled=True,
        password_hash="$2b$10$abcdefghijklmnopqrstuuJ6E7Z3H2h1wQ0Yy8o2qfQe3m2nH5B1W",
        totp_secret_base64="SGVsbG8gVE9UUCBzZWNyZXQ=",
        otp_auth_enabled=True,
        is_anonymous=True,
        restricted_by_admin=True,
        restricted_by_admin_reason="Ünpaid «bills»",
        restricted_by_admin_private_details='line one\nline "two"\ttab \\ backslash',
        profile_image_url="https://img.example.com/ü.png",
        client_metadata={"theme": "dark", "nested": {"list": [1, 2.5, None, True, "ß"], "empty": {}}, "n": None},
        client_read_only_metadata=["a", None, ["nested", {"deep": "✓"}], 0, -7, False],
        server_metadata={"plan": "pro", "quota": 12_345_678_901, "tags": [], "emoji": "🎉"},
        selected_team_id="team-1",
        country_code="DE",
        risk_scores=RiskScores(bot=42, free_trial_abuse=99),
    )


def make_session(
    session_id: str, user_id: str, *, created_at: int = T0, lifetime_ms: int = SESSION_LIFETIME_MS, **fields: Any
) -> Session:
    """A session whose refresh token hash is derived from its id."""
    values: dict[str, Any] = {
        "id": session_id,
        "user_id": user_id,
        "refresh_token_hash": f"token-{session_id}",
        "created_at_millis": created_at,
        "last_used_at_millis": created_at,
        "expires_at_millis": created_at + lifetime_ms,
    }
    return Session(**(values | fields))


def make_email(n: int, to: str, *, created_at: int | None = None) -> Email:
    return Email(
        id=f"mail-{n}",
        to=to,
        subject=f"Subject {n} ✓",
        text=f"Hello «{to}»,\nyour code is {n:06d}.",
        created_at_millis=T0 + n if created_at is None else created_at,
    )


def make_team(team_id: str, *, created_at: int = T0, **fields: Any) -> Team:
    """A team named after its id."""
    return Team(id=team_id, display_name=f"Team {team_id}", created_at_millis=created_at, **fields)


def rich_team() -> Team:
    """A team whose every field differs from the defaults; metadata is nested JSON with unicode and nulls."""
    return Team(
        id="team-rich",
        display_name="Ünïcode ✓ «team» 🎉",
        created_at_millis=T0 - 86_400_000,
        profile_image_url="https://img.example.com/t/ü.png",
        client_metadata={"theme": "dark", "nested": {"list": [1, 2.5, None, True, "ß"], "empty": {}}, "n": None},
        client_read_only_metadata=["a", None, 0, -7, False, []],
        server_metadata={"plan": "pro", "quota": 12_345_678_901, "tags": [], "emoji": "🎉"},
    )


def make_membership(
    team_id: str, user_id: str, *, created_at: int = T0, permissions: tuple[str, ...] = (), **fields: Any
) -> Membership:
    """A membership of `user_id` in `team_id`."""
    return Membership(team_id, user_id, created_at, permissions=permissions, **fields)


def remove_user_behind_the_stores_back(store: Store, project_id: str, user_id: str) -> None:
    """Delete a user record without any effect (deleting it would take its sessions too), leaving everything that
    points at it in place."""
    if isinstance(store, MemoryStore):
        del store.tenant(project_id).users[user_id]
    elif isinstance(store, RedisStore):
        assert store.client.delete(store.keys.user(project_id, user_id)) == 1
    else:  # pragma: no cover - every store fixture is one of the two
        raise TypeError(type(store).__name__)


def webhook_endpoint(endpoint_id: str = "ep-1") -> WebhookEndpoint:
    return WebhookEndpoint(
        id=endpoint_id,
        url=f"https://hooks.example.com/{endpoint_id}",
        secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        created_at_millis=T0,
    )


def subscribe(store: Store, project_id: str, endpoint_id: str = "ep-1") -> None:
    """Give the project a webhook endpoint: the stores record a project's events only while it has one."""
    run(add_webhook_endpoint(project_id, webhook_endpoint(endpoint_id)), store)


def in_threads(*workers: Callable[[], Any], timeout_s: float = 30.0) -> list[Any]:
    """Run each worker in its own thread, all released at once; return their results (re-raising any error)."""
    start = threading.Barrier(len(workers))
    results: list[Any] = [None] * len(workers)
    errors: list[BaseException] = []

    def run(index: int, worker: Callable[[], Any]) -> None:
        try:
            start.wait(timeout=5)
            results[index] = worker()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout_s)
    assert not any(thread.is_alive() for thread in threads), "a worker thread hung"
    if errors:
        raise errors[0]
    return results


def update_team(store: Store, project_id: str, team_id: str, changes: Any = ()) -> Team | None:
    """What an update of a team does to a store: the core's `patch_team` (a read, then one `Commit`)."""
    from identity_proto.changes import TeamChanges
    from identity_proto.drivers import run
    from identity_proto.flows.teams import patch_team

    return run(patch_team(project_id, team_id, TeamChanges.of(changes)), store)


def add_user(project_id: str, user: User) -> Commit:
    """The `Commit` a sign-up makes for `user` alone (`flows.signin.commit_new_user`: guarded on its id, then its
    auth e-mail, being free; `user.created`), answering `Committed((user as stored,))`, or `ID_TAKEN` /
    `EMAIL_TAKEN` with nothing written. An effect: `store.apply` it, or `perform` it in a flow."""
    from identity_proto.effects.commit import RecordKind
    from identity_proto.flows.signin import NewUser, commit_new_user

    effect = next(commit_new_user(project_id, NewUser(user)))
    return dataclasses.replace(effect, returns=((RecordKind.USER, user.id),))


#: What `add_user`'s commit answers when the id is taken, or the auth e-mail is another user's.
ID_TAKEN, EMAIL_TAKEN = Conflict(0), Conflict(1)


def set_user_fields(project_id: str, user_id: str, changes: Any) -> Commit:
    """The `Commit` of an internal write of a user's fields (a selected team, last activity: what `flows.sessions`
    and `flows.teams` commit): `PatchUser` guarded on the user existing, announcing nothing; answers
    `Committed((user as stored,))`, or `Conflict(0)` when there is no such user. The e-mail fields move the
    index: a PATCH changes them (`patched_user`)."""
    from identity_proto.changes import UserChanges
    from identity_proto.effects.commit import PatchUser, RecordKind
    from identity_proto.effects.users import Exists

    fields = UserChanges.of(changes)
    if fields.as_dict().keys() & {"primary_email", "primary_email_auth_enabled"}:
        raise ValueError("the e-mail fields change with the index: patched_user")
    user = (RecordKind.USER, user_id)
    return Commit(project_id, (Exists(*user),), (PatchUser(user_id, fields),), returns=(user,))


def patched_user(
    store: Store, project_id: str, user_id: str, changes: Any = (), *, revoke_sessions: bool = False, live: Any = None
) -> Any:
    """What a PATCH of a user does to a store: the core's `patch_user` (what the e-mail index rules read, then one
    `Commit` recording `user.updated`), re-run while its commit meets a concurrent change (as the service does),
    answering (user, selected team) as stored, or the refusal (None: no such user; `ErrorCode`
    USER_EMAIL_ALREADY_EXISTS; nothing written), or "conflict" when a guard (`live`, a `SessionIsLive`) kept
    failing."""
    from identity_proto.changes import UserChanges
    from identity_proto.drivers import run
    from identity_proto.effects.commit import CommitConflict
    from identity_proto.errors import ErrorCode, KnownError
    from identity_proto.flows.users import patch_user

    for _attempt in range(5):
        try:
            return run(
                patch_user(project_id, user_id, UserChanges.of(changes), revoke_sessions=revoke_sessions, live=live),
                store,
            )
        except KnownError as error:
            if error.code != ErrorCode.USER_EMAIL_ALREADY_EXISTS:
                raise
            return error.code
        except CommitConflict:
            continue
    return "conflict"


def committed(flow: Callable[[], Any], store: Store, attempts: int = 50) -> Any:
    """Run the flow `flow()` makes against `store`, again while its commit conflicts (as the service does)."""
    from identity_proto.drivers import run
    from identity_proto.effects.commit import CommitConflict

    for _attempt in range(attempts):
        try:
            return run(flow(), store)
        except CommitConflict:
            continue
    raise AssertionError(f"still conflicting after {attempts} attempts")


def run_flow(store: Store, flow: Callable[[], Any], attempts: int = 5) -> Any:
    """Run the core flow `flow()` makes on `store`, re-running it when its commit meets a concurrent change, as the
    service does (`identity_proto.service`: at most 5 times)."""
    return committed(flow, store, attempts)


def create_team(store: Store, project_id: str, team: Team, creator: Membership | None = None) -> Any:
    """What creating a team does to a store: the core's `store_team` (one `Commit`)."""
    from identity_proto.flows.teams import store_team

    return committed(lambda: store_team(project_id, team, creator), store)


def delete_team(store: Store, project_id: str, team_id: str) -> bool:
    """What deleting a team does to a store: the core's `drop_team` (reads, then one `Commit`)."""
    from identity_proto.flows.teams import drop_team

    return bool(committed(lambda: drop_team(project_id, team_id), store))


def delete_user(store: Store, project_id: str, user_id: str) -> bool:
    """What deleting a user does to a store: the core's `drop_user` (reads, then one `Commit`), re-run while its
    commit meets a concurrent change. False when there was no such user."""
    from identity_proto.flows.users import drop_user

    return bool(committed(lambda: drop_user(project_id, user_id), store))


def add_membership(store: Store, project_id: str, membership: Membership) -> Any:
    """What adding a membership does to a store: the core's `add_member` (one `Commit`)."""
    from identity_proto.flows.teams import add_member

    return committed(lambda: add_member(project_id, membership), store)


def remove_membership(store: Store, project_id: str, team_id: str, user_id: str) -> bool:
    """What removing a membership does to a store: the core's `remove_member` (a read, then one `Commit`)."""
    from identity_proto.flows.teams import remove_member

    return bool(committed(lambda: remove_member(project_id, team_id, user_id), store))


def update_membership(store: Store, project_id: str, team_id: str, user_id: str, changes: Any = ()) -> Any:
    """What updating a membership does to a store: the core's `patch_membership` (a read, then one `Commit`)."""
    from identity_proto.changes import MembershipChanges
    from identity_proto.flows.teams import patch_membership

    return committed(lambda: patch_membership(project_id, team_id, user_id, MembershipChanges.of(changes)), store)


def change_permission(
    store: Store, project_id: str, team_id: str, user_id: str, permission_id: str, granted: bool
) -> Membership | None:
    """What granting or revoking a team permission does to a store: the core's `change_permission`."""
    from identity_proto.flows.teams import change_permission as change

    return committed(lambda: change(project_id, team_id, user_id, permission_id, granted), store)  # type: ignore[no-any-return]


def sign_in_by_email(
    project_id: str,
    email: str,
    now_ms: int,
    sign_up_enabled: bool,
    new_user: User,
    session: Session,
    personal_team: tuple[Team, Membership] | None = None,
) -> Any:
    """What the end of a code sign-in does to a store, with these records (the flow makes them from entropy): a
    code for `email` (named after the session) presented and consumed, which reads the address's holder in the
    same step, then the core's `sign_in_by_email` deciding on that holder, run again (reading afresh) while its
    commit meets a concurrent change. A flow answering an `EmailSignIn`."""
    from identity_proto.effects import AttemptVerificationCode, CodeOutcome, perform
    from identity_proto.flows.otp import sign_in_by_email as decide
    from identity_proto.flows.signin import NewUser, rerun_on_conflict

    newcomer = NewUser(new_user, personal_team)
    code = make_code(f"sign-in-{session.id}", email=email, created_at=now_ms)
    yield from perform(put_code(project_id, code))
    attempt = yield from perform(
        AttemptVerificationCode(
            project_id, code.code_hash, code.nonce_hash, code.purpose, now_ms, consume=True, with_holder=True
        )
    )
    if attempt.outcome is not CodeOutcome.OK or attempt.holder is None:
        raise AssertionError(f"the sign-in code was refused: {attempt}")
    return (
        yield from rerun_on_conflict(
            lambda first: decide(
                project_id,
                email,
                now_ms,
                sign_up_enabled=sign_up_enabled,
                newcomer=newcomer,
                session=session,
                holder=attempt.holder if first else None,
            )
        )
    )


def sign_up_anonymously(
    project_id: str, user: User, session: Session, personal_team: tuple[Team, Membership] | None = None
) -> Any:
    """What an anonymous sign-up does to a store, with these records (the flow makes them from entropy): the core's
    `store_anonymous_user`, one `Commit`. A flow answering the user, or None (nothing written) when its id is
    taken (the flow would run again with a new one)."""
    from identity_proto.effects.commit import CommitConflict
    from identity_proto.flows.anonymous import store_anonymous_user
    from identity_proto.flows.signin import NewUser

    parts = NewUser(user, personal_team)
    try:
        return (yield from store_anonymous_user(project_id, parts, session))
    except CommitConflict:
        return None


def create_invitation(store: Store, project_id: str, code: VerificationCode) -> bool:
    """What sending a team invitation does to a store: the core's `store_invitation` (one `Commit`)."""
    from identity_proto.flows.team_invitations import store_invitation

    return bool(committed(lambda: store_invitation(project_id, code), store))


def revoke_invitation(store: Store, project_id: str, invitation_id: str, team_id: str) -> bool:
    """What revoking a team invitation does to a store: the core's `drop_invitation` (a read, then one `Commit`)."""
    from identity_proto.effects import LoadTeamInvitation, perform
    from identity_proto.flows.team_invitations import drop_invitation

    def flow() -> Any:
        code = yield from perform(LoadTeamInvitation(project_id, invitation_id))
        return (yield from drop_invitation(project_id, team_id, code))

    return bool(committed(flow, store))


def accept_invitation(
    store: Store, project_id: str, code: VerificationCode | None, now_ms: int, membership: Membership
) -> Any:
    """What accepting a team invitation does to a store, given the code as the flow read it: the core's
    `accept_code` (the user's membership read, then one `Commit`)."""
    from identity_proto.effects import LoadMembership, perform
    from identity_proto.flows.team_invitations import accept_code

    def flow() -> Any:
        member = yield from perform(LoadMembership(project_id, membership.team_id, membership.user_id))
        return (yield from accept_code(project_id, code, now_ms, membership, member))

    return committed(flow, store)


def grant_project_permissions(
    store: Store, project_id: str, user_id: str, permission_ids: tuple[str, ...], *, records_events: bool = False
) -> bool:
    """What granting project permissions does to a store: the core's `grant_project_permissions` (one `Commit`;
    `records_events`: an explicit grant, announced)."""
    from identity_proto.flows.permissions import grant_project_permissions as grant

    return bool(committed(lambda: grant(project_id, user_id, permission_ids, announce=records_events), store))


def revoke_project_permission(store: Store, project_id: str, user_id: str, permission_id: str) -> bool:
    """What revoking a project permission does to a store: the user's grants read, then the core's
    `revoke_project_permission_of` (one `Commit`)."""
    from identity_proto.effects import ListProjectPermissions, perform
    from identity_proto.flows.permissions import revoke_project_permission_of

    def flow() -> Any:
        grants = yield from perform(ListProjectPermissions(project_id, user_id))
        held = grants[0][1] if grants else ()
        return (yield from revoke_project_permission_of(project_id, user_id, permission_id, held))

    return bool(committed(flow, store))


def store_reset_code(
    store: Store, project_id: str, code: VerificationCode, mail: Email | None = None, *, keep: int = 1000, **read: Any
) -> str | None:
    """What sending a reset code does to a store: the holder of `code.email` read (`FindAuthAddressHolder`), then
    the core's `store_reset_code` deciding on it, one `Commit`: the holder's id (code and mail stored), or None
    (nothing written). `password_hash=` (when given) is the holder's password as the caller read it before (a
    stale read, when it changed since): the commit then conflicts and writes nothing (None)."""
    from identity_proto.drivers import run
    from identity_proto.effects import FindAuthAddressHolder, perform
    from identity_proto.effects.commit import CommitConflict
    from identity_proto.flows.passwords import store_reset_code as decide
    from identity_proto.records import replaced

    def flow() -> Any:
        found = yield from perform(FindAuthAddressHolder(project_id, code.email or ""))
        if found is not None and "password_hash" in read:
            stale = replaced(found.user, {"password_hash": read["password_hash"]})
            found = dataclasses.replace(found, user=stale)
        return (yield from decide(project_id, code, found, mail, keep))

    try:
        return run(flow(), store)  # type: ignore[no-any-return]
    except CommitConflict:
        return None


def reset_password(
    store: Store, project_id: str, code: VerificationCode, password_hash: str, now_ms: int = T0, read: Any = None
) -> Any:
    """What a password reset does to a store: the code presented (`AttemptVerificationCode`, counting an attempt,
    consuming nothing; its refusals answered as `PasswordWrite`), then the core's `reset_with_code` (the code's
    user, channels and sessions read in one trip, or `read` as read before; one `Commit`). A `PasswordWrite`."""
    from identity_proto.drivers import run
    from identity_proto.effects import AttemptVerificationCode, CodeOutcome, PasswordWrite
    from identity_proto.flows.passwords import reset_with_code

    presented = AttemptVerificationCode(project_id, code.code_hash, code.nonce_hash, code.purpose, now_ms, False)
    refused = {CodeOutcome.EXPIRED: PasswordWrite.CODE_EXPIRED, CodeOutcome.ALREADY_USED: PasswordWrite.CODE_USED}
    if code.purpose != CodePurpose.PASSWORD_RESET:  # presented as a reset code: another purpose is not found
        presented = AttemptVerificationCode(
            project_id, code.code_hash, code.nonce_hash, CodePurpose.PASSWORD_RESET, now_ms, False
        )
    attempt = store.apply(presented)
    if attempt.outcome is not CodeOutcome.OK or attempt.code is None:
        return refused.get(attempt.outcome, PasswordWrite.CODE_NOT_FOUND)
    return run(reset_with_code(project_id, attempt.code, password_hash, read), store)


def change_password(
    store: Store, project_id: str, user_id: str, old_hash: str, new_hash: str, keep: str | None = None
) -> Any:
    """What changing a password does to a store: the core's `change_password` (the user and their sessions read
    in one trip, one `Commit`). A `PasswordWrite`."""
    from identity_proto.drivers import run
    from identity_proto.flows.passwords import change_password as change

    return run(change(project_id, user_id, old_hash, new_hash, keep), store)


def set_password(store: Store, project_id: str, user_id: str, password_hash: str) -> Any:
    """What setting a password does to a store: the core's `give_password` (a read, one `Commit`)."""
    from identity_proto.drivers import run
    from identity_proto.flows.passwords import give_password

    return run(give_password(project_id, user_id, password_hash), store)


def put_session(store: Store, project_id: str, session: Session) -> None:
    """Store a session as the core does (a sign-in's commit): `PutSession` in one `Commit`."""
    from identity_proto.drivers import run

    run(putting_session(project_id, session), store)


def putting_session(project_id: str, session: Session) -> Any:
    """`put_session` as a flow (for `arun`)."""
    from identity_proto.effects.commit import PutSession, commit

    yield from commit(project_id, writes=(PutSession(session),))


def end_session(store: Store, project_id: str, session_id: str) -> bool:
    """What signing out does to a store: the core's `end_session` (one `Commit` guarded on the session existing);
    False when it was gone already."""
    from identity_proto.drivers import run
    from identity_proto.flows.sessions import end_session as end

    return bool(run(end(project_id, session_id), store))


def revoke_sessions(store: Store, project_id: str, user_id: str) -> int:
    """What ending every session of a user does to a store (a password change's commit, `flows.users.save_user`):
    its sessions as read, each dropped (`DropSession`) in one `Commit` guarded on each still existing, re-run while
    a concurrent change meets them. Returns how many it ended."""
    return int(committed(lambda: revoking_sessions(project_id, user_id), store))


def revoking_sessions(project_id: str, user_id: str) -> Any:
    """`revoke_sessions` as a flow (for `arun`; raises `CommitConflict` on a concurrent change)."""
    from identity_proto.effects import DropSession, ListSessions, SessionExists, perform
    from identity_proto.effects.commit import commit

    sessions = yield from perform(ListSessions(project_id, user_id))
    guards = tuple(SessionExists(session.id) for session in sessions)
    yield from commit(project_id, guards, tuple(DropSession(session) for session in sessions))
    return len(sessions)


def ending_session(project_id: str, session_id: str) -> Any:
    """`end_session` as a flow (for `arun`)."""
    from identity_proto.flows.sessions import end_session as end

    return (yield from end(project_id, session_id))


def upgrading_anonymous(
    project_id: str, user_id: str, changes: Any, personal_team_name: str, oauth_account: Any = None
) -> Any:
    """What an upgrade of an anonymous user does to a store, with these changes (the flow makes them from the
    request and the clock): the core's `read_anonymous` (one read), then `commit_upgrade` (one `Commit`). A flow
    answering the upgraded user or the refusal (`UpgradeRefusal`; nothing written)."""
    from identity_proto.effects import UpgradeRefusal
    from identity_proto.flows.anonymous import commit_upgrade, read_anonymous

    read = yield from read_anonymous(project_id, user_id)
    if read is None:
        return UpgradeRefusal.NOT_FOUND
    return (yield from commit_upgrade(project_id, read, changes, personal_team_name, oauth_account))


def upgrade_anonymous(
    store: Store, project_id: str, user_id: str, changes: Any, personal_team_name: str, oauth_account: Any = None
) -> Any:
    """`upgrading_anonymous` run on `store`, again while its commit meets a concurrent change (as the service does)."""
    return run_flow(store, lambda: upgrading_anonymous(project_id, user_id, changes, personal_team_name, oauth_account))
