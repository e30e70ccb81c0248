"""The in-memory store: dicts behind one lock. For tests, embedding, and single-process deployments.

Contract (identity_proto.effects): every effect is atomic. Here that is one `threading.RLock` held for the whole
of each effect, so a WSGI host calling from many threads (or an ASGI host from its event loop) never sees a half
done write. No effect does I/O or waits while holding the lock, so the async twin simply calls the sync store.

Records are immutable dataclasses: readers get the stored object itself, never a copy that could drift.
Expiry is decided by the core against the request's clock; this store keeps what it is told to keep.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from identity_proto.effects import (
    AcceptTotp,
    AddMembership,
    AppendOutbox,
    AttemptVerificationCode,
    ChangePermission,
    CodeAttempt,
    CodeOutcome,
    ConsumeVerificationCode,
    CreateProject,
    CreateSession,
    CreateSignInCode,
    CreateTeam,
    CreateUser,
    CreateVerificationCode,
    DeleteProject,
    DeleteSession,
    DeleteTeam,
    DeleteUser,
    EmailRefusal,
    EmailSignIn,
    EmailSignInOutcome,
    EnsureProject,
    FindUserByAuthEmail,
    HitRateLimits,
    ListMemberships,
    ListOutbox,
    ListProjects,
    ListSessions,
    ListTeams,
    ListUsers,
    LoadClockOverride,
    LoadMembership,
    LoadProject,
    LoadSession,
    LoadTeam,
    LoadUser,
    LoadUserWithTeam,
    RemoveMembership,
    ResetProjectData,
    RevokeUserSessions,
    SetClockOverride,
    SignInByEmail,
    StorageEffect,
    TeamWrite,
    Together,
    TotpAcceptance,
    UpdateMembership,
    UpdateProject,
    UpdateTeam,
    UpdateUser,
    UseRefreshToken,
    UserWrite,
)
from identity_proto.records import ClockOverride, Email, Membership, Project, Session, Team, User, VerificationCode

__all__ = ["AsyncMemoryStore", "MemoryStore"]

T = TypeVar("T")
E = TypeVar("E", bound=StorageEffect[Any])

_Handler = Callable[["MemoryStore", Any], Any]
_HANDLERS: dict[type[StorageEffect[Any]], _Handler] = {}


def _performs(effect_type: type[E]) -> Callable[[Callable[[MemoryStore, E], Any]], Callable[[MemoryStore, E], Any]]:
    """Register the function below as this store's implementation of `effect_type`."""

    def register(handler: Callable[[MemoryStore, E], Any]) -> Callable[[MemoryStore, E], Any]:
        _HANDLERS[effect_type] = handler
        return handler

    return register


@dataclass
class Tenant:
    """Everything one project holds besides its record."""

    users: dict[str, User] = field(default_factory=dict)
    #: (signed_up_at_millis, id) of every user, sorted: the order of ListUsers.
    user_order: list[tuple[int, str]] = field(default_factory=list)
    #: auth e-mail -> user id, for users whose primary e-mail signs them in.
    email_index: dict[str, str] = field(default_factory=dict)
    #: code hash -> code; nonce hash -> attempts so far.
    codes: dict[str, VerificationCode] = field(default_factory=dict)
    nonce_attempts: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, Session] = field(default_factory=dict)
    #: refresh token hash -> session id; user id -> session ids.
    session_by_token: dict[str, str] = field(default_factory=dict)
    user_sessions: dict[str, set[str]] = field(default_factory=dict)
    outbox: deque[Email] = field(default_factory=deque)
    teams: dict[str, Team] = field(default_factory=dict)
    #: (team id, user id) -> membership, in creation order (dicts keep insertion order).
    memberships: dict[tuple[str, str], Membership] = field(default_factory=dict)
    codes_created: int = 0


class MemoryStore:
    """A thread-safe, in-process store."""

    #: The effect types this store performs (the contract tests check that it is all of them).
    performs = _HANDLERS

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.projects: dict[str, Project] = {}
        self.tenants: dict[str, Tenant] = {}
        self.clock_override: ClockOverride | None = None
        #: rate-limit counter key -> (count, expires at), swept as they expire.
        self.rate_counters: dict[str, tuple[int, int]] = {}

    def tenant(self, project_id: str) -> Tenant:
        """The data of one project (created empty on first use)."""
        found = self.tenants.get(project_id)
        if found is None:
            found = self.tenants[project_id] = Tenant()
        return found

    def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect atomically."""
        handler = _HANDLERS.get(type(effect))
        if handler is None:
            raise TypeError(f"MemoryStore cannot perform {type(effect).__name__}")
        with self._lock:
            return cast(T, handler(self, effect))

    def close(self) -> None:
        """Nothing to release."""


class AsyncMemoryStore:
    """The asyncio face of a `MemoryStore` (the same data; effects never block, so no thread is needed)."""

    def __init__(self, store: MemoryStore | None = None) -> None:
        self.sync = store if store is not None else MemoryStore()

    async def apply(self, effect: StorageEffect[T]) -> T:
        """Perform one effect atomically."""
        return self.sync.apply(effect)

    async def aclose(self) -> None:
        """Nothing to release."""


# --------------------------------------------------------------------------------------------------------------
# Projects


@_performs(LoadProject)
def _load_project(store: MemoryStore, effect: LoadProject) -> Project | None:
    return store.projects.get(effect.project_id)


@_performs(CreateProject)
def _create_project(store: MemoryStore, effect: CreateProject) -> bool:
    if effect.project.id in store.projects:
        return False
    store.projects[effect.project.id] = effect.project
    return True


@_performs(EnsureProject)
def _ensure_project(store: MemoryStore, effect: EnsureProject) -> Project:
    stored = store.projects.get(effect.project.id)
    result = effect.project if stored is None else dataclasses.replace(stored, keys=effect.project.keys)
    store.projects[result.id] = result
    return result


@_performs(UpdateProject)
def _update_project(store: MemoryStore, effect: UpdateProject) -> Project | None:
    stored = store.projects.get(effect.project_id)
    if stored is None:
        return None
    changes: dict[str, Any] = {}
    if effect.display_name is not None:
        changes["display_name"] = effect.display_name
    if effect.config:
        changes["config"] = dataclasses.replace(stored.config, **dict(effect.config))
    updated = dataclasses.replace(stored, **changes)
    store.projects[updated.id] = updated
    return updated


@_performs(ListProjects)
def _list_projects(store: MemoryStore, effect: ListProjects) -> tuple[Project, ...]:
    return tuple(sorted(store.projects.values(), key=lambda p: (p.created_at_millis, p.id)))


@_performs(DeleteProject)
def _delete_project(store: MemoryStore, effect: DeleteProject) -> bool:
    store.tenants.pop(effect.project_id, None)
    return store.projects.pop(effect.project_id, None) is not None


# --------------------------------------------------------------------------------------------------------------
# One-time codes

#: Expired codes are swept every this many new codes (the core judges expiry; this only frees memory).
_SWEEP_EVERY = 1024


@_performs(CreateVerificationCode)
def _create_code(store: MemoryStore, effect: CreateVerificationCode) -> None:
    tenant = store.tenant(effect.project_id)
    tenant.codes[effect.code.code_hash] = effect.code
    tenant.codes_created += 1
    if tenant.codes_created % _SWEEP_EVERY == 0:
        now = effect.code.created_at_millis
        expired = [h for h, code in tenant.codes.items() if code.expires_at_millis <= now]
        for code_hash in expired:
            nonce_hash = tenant.codes.pop(code_hash).nonce_hash
            if not any(code.nonce_hash == nonce_hash for code in tenant.codes.values()):
                tenant.nonce_attempts.pop(nonce_hash, None)


@_performs(AttemptVerificationCode)
def _attempt_code(store: MemoryStore, effect: AttemptVerificationCode) -> CodeAttempt:
    tenant = store.tenant(effect.project_id)
    before = tenant.nonce_attempts.get(effect.nonce_hash, 0)
    tenant.nonce_attempts[effect.nonce_hash] = before + 1
    code = tenant.codes.get(effect.code_hash)
    if code is None or code.purpose != effect.purpose:
        return CodeAttempt(CodeOutcome.NOT_FOUND)
    if effect.now_ms >= code.expires_at_millis:
        return CodeAttempt(CodeOutcome.EXPIRED, code)
    if code.used:
        return CodeAttempt(CodeOutcome.ALREADY_USED, code)
    if before >= effect.max_attempts:
        return CodeAttempt(CodeOutcome.MAX_ATTEMPTS_REACHED, code)
    if effect.consume:
        tenant.codes[code.code_hash] = dataclasses.replace(code, used=True)
    return CodeAttempt(CodeOutcome.OK, code)


@_performs(ConsumeVerificationCode)
def _consume_code(store: MemoryStore, effect: ConsumeVerificationCode) -> bool:
    tenant = store.tenant(effect.project_id)
    code = tenant.codes.get(effect.code_hash)
    if code is None or code.used:
        return False
    tenant.codes[code.code_hash] = dataclasses.replace(code, used=True)
    return True


@_performs(AcceptTotp)
def _accept_totp(store: MemoryStore, effect: AcceptTotp) -> TotpAcceptance:
    tenant = store.tenant(effect.project_id)
    code = tenant.codes.get(effect.code_hash)
    if code is None or code.used:
        return TotpAcceptance.CODE_USED
    user = tenant.users.get(effect.user_id)
    if user is None:
        return TotpAcceptance.USER_NOT_FOUND
    if user.totp_last_step is not None and user.totp_last_step >= effect.step:
        return TotpAcceptance.STEP_USED
    tenant.codes[code.code_hash] = dataclasses.replace(code, used=True)
    tenant.users[user.id] = dataclasses.replace(user, totp_last_step=effect.step)
    return TotpAcceptance.ACCEPTED


# --------------------------------------------------------------------------------------------------------------
# Users


@_performs(LoadUser)
def _load_user(store: MemoryStore, effect: LoadUser) -> User | None:
    return store.tenant(effect.project_id).users.get(effect.user_id)


@_performs(LoadUserWithTeam)
def _load_user_with_team(store: MemoryStore, effect: LoadUserWithTeam) -> tuple[User, Team | None] | None:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.get(effect.user_id)
    if user is None:
        return None
    team = tenant.teams.get(user.selected_team_id) if user.selected_team_id is not None else None
    return user, team


@_performs(FindUserByAuthEmail)
def _find_user_by_auth_email(store: MemoryStore, effect: FindUserByAuthEmail) -> User | None:
    tenant = store.tenant(effect.project_id)
    user_id = tenant.email_index.get(effect.email)
    return None if user_id is None else tenant.users.get(user_id)


@_performs(CreateUser)
def _create_user(store: MemoryStore, effect: CreateUser) -> User | UserWrite:
    tenant = store.tenant(effect.project_id)
    user = effect.user
    if user.id in tenant.users:
        return UserWrite.ID_TAKEN
    if user.auth_email is not None and user.auth_email in tenant.email_index:
        return UserWrite.EMAIL_TAKEN
    tenant.users[user.id] = user
    bisect.insort(tenant.user_order, (user.signed_up_at_millis, user.id))
    if user.auth_email is not None:
        tenant.email_index[user.auth_email] = user.id
    return user


@_performs(UpdateUser)
def _update_user(store: MemoryStore, effect: UpdateUser) -> User | UserWrite:
    tenant = store.tenant(effect.project_id)
    stored = tenant.users.get(effect.user_id)
    if stored is None:
        return UserWrite.NOT_FOUND
    updated = dataclasses.replace(stored, **dict(effect.changes))
    old_email, new_email = stored.auth_email, updated.auth_email
    if new_email != old_email:
        if new_email is not None and tenant.email_index.get(new_email, updated.id) != updated.id:
            return UserWrite.EMAIL_TAKEN
        if old_email is not None:
            tenant.email_index.pop(old_email, None)
        if new_email is not None:
            tenant.email_index[new_email] = updated.id
    if updated.signed_up_at_millis != stored.signed_up_at_millis:
        tenant.user_order.remove((stored.signed_up_at_millis, stored.id))
        bisect.insort(tenant.user_order, (updated.signed_up_at_millis, updated.id))
    tenant.users[updated.id] = updated
    if effect.revoke_sessions:
        for session_id in list(tenant.user_sessions.pop(updated.id, ())):
            _drop_session(tenant, session_id)
    return updated


@_performs(DeleteUser)
def _delete_user(store: MemoryStore, effect: DeleteUser) -> bool:
    tenant = store.tenant(effect.project_id)
    user = tenant.users.pop(effect.user_id, None)
    if user is None:
        return False
    tenant.user_order.remove((user.signed_up_at_millis, user.id))
    if user.auth_email is not None and tenant.email_index.get(user.auth_email) == user.id:
        del tenant.email_index[user.auth_email]
    for session_id in list(tenant.user_sessions.pop(user.id, ())):
        _drop_session(tenant, session_id)
    for key in [key for key in tenant.memberships if key[1] == user.id]:
        del tenant.memberships[key]
    return True


@_performs(ListUsers)
def _list_users(store: MemoryStore, effect: ListUsers) -> tuple[User, ...]:
    tenant = store.tenant(effect.project_id)
    order = tenant.user_order
    if effect.cursor is not None:
        cursor_user = tenant.users.get(effect.cursor)
        if cursor_user is None:
            return ()
        at = bisect.bisect_left(order, (cursor_user.signed_up_at_millis, cursor_user.id))
    else:
        at = len(order) - 1 if effect.descending else 0
    step = -1 if effect.descending else 1
    out: list[User] = []
    while 0 <= at < len(order) and (effect.limit is None or len(out) < effect.limit):
        out.append(tenant.users[order[at][1]])
        at += step
    return tuple(out)


# --------------------------------------------------------------------------------------------------------------
# Sessions


@_performs(CreateSession)
def _create_session(store: MemoryStore, effect: CreateSession) -> None:
    tenant = store.tenant(effect.project_id)
    session = effect.session
    tenant.sessions[session.id] = session
    tenant.session_by_token[session.refresh_token_hash] = session.id
    tenant.user_sessions.setdefault(session.user_id, set()).add(session.id)


@_performs(UseRefreshToken)
def _use_refresh_token(store: MemoryStore, effect: UseRefreshToken) -> tuple[Session, User] | None:
    tenant = store.tenant(effect.project_id)
    session_id = tenant.session_by_token.get(effect.refresh_token_hash)
    session = None if session_id is None else tenant.sessions.get(session_id)
    user = None if session is None else tenant.users.get(session.user_id)
    if session is None or user is None:
        return None
    session = dataclasses.replace(session, last_used_at_millis=effect.now_ms)
    tenant.sessions[session.id] = session
    user = dataclasses.replace(user, last_active_at_millis=max(user.last_active_at_millis, effect.now_ms))
    tenant.users[user.id] = user
    return session, user


@_performs(LoadSession)
def _load_session(store: MemoryStore, effect: LoadSession) -> Session | None:
    return store.tenant(effect.project_id).sessions.get(effect.session_id)


@_performs(ListSessions)
def _list_sessions(store: MemoryStore, effect: ListSessions) -> tuple[Session, ...]:
    tenant = store.tenant(effect.project_id)
    sessions = (tenant.sessions[sid] for sid in tenant.user_sessions.get(effect.user_id, ()))
    return tuple(sorted(sessions, key=lambda s: (-s.created_at_millis, s.id)))


def _drop_session(tenant: Tenant, session_id: str) -> bool:
    session = tenant.sessions.pop(session_id, None)
    if session is None:
        return False
    tenant.session_by_token.pop(session.refresh_token_hash, None)
    tenant.user_sessions.get(session.user_id, set()).discard(session_id)
    return True


@_performs(DeleteSession)
def _delete_session(store: MemoryStore, effect: DeleteSession) -> bool:
    return _drop_session(store.tenant(effect.project_id), effect.session_id)


@_performs(RevokeUserSessions)
def _revoke_user_sessions(store: MemoryStore, effect: RevokeUserSessions) -> int:
    tenant = store.tenant(effect.project_id)
    session_ids = list(tenant.user_sessions.pop(effect.user_id, ()))
    return sum(_drop_session(tenant, session_id) for session_id in session_ids)


# --------------------------------------------------------------------------------------------------------------
# E-mail


@_performs(AppendOutbox)
def _append_outbox(store: MemoryStore, effect: AppendOutbox) -> None:
    outbox = store.tenant(effect.project_id).outbox
    outbox.appendleft(effect.email)
    while len(outbox) > effect.keep:
        outbox.pop()


@_performs(ListOutbox)
def _list_outbox(store: MemoryStore, effect: ListOutbox) -> tuple[Email, ...]:
    found = (e for e in store.tenant(effect.project_id).outbox if effect.to is None or e.to == effect.to)
    out: list[Email] = []
    for email in found:
        if len(out) >= effect.limit:
            break
        out.append(email)
    return tuple(out)


# --------------------------------------------------------------------------------------------------------------
# Signing in by e-mail (each one step under the lock, made of the steps above)


@_performs(CreateSignInCode)
def _create_sign_in_code(store: MemoryStore, effect: CreateSignInCode) -> EmailRefusal | None:
    email = effect.code.email or ""
    user = _find_user_by_auth_email(store, FindUserByAuthEmail(effect.project_id, email))
    if user is not None and not user.primary_email_verified:
        return EmailRefusal.UNVERIFIED
    if user is None and not effect.sign_up_enabled:
        return EmailRefusal.SIGN_UP_DISABLED
    _create_code(store, CreateVerificationCode(effect.project_id, effect.code))
    return None


@_performs(SignInByEmail)
def _sign_in_by_email(store: MemoryStore, effect: SignInByEmail) -> EmailSignIn:
    tenant, project_id = store.tenant(effect.project_id), effect.project_id
    user = _find_user_by_auth_email(store, FindUserByAuthEmail(project_id, effect.email))
    if user is not None:
        if not user.primary_email_verified:
            return EmailSignIn(EmailSignInOutcome.UNVERIFIED, user)
        changes: dict[str, Any] = {}
        if not user.otp_auth_enabled:
            changes["otp_auth_enabled"] = True
        if user.totp_secret_base64 is None and user.last_active_at_millis < effect.now_ms:
            changes["last_active_at_millis"] = effect.now_ms
        if changes:  # neither field is indexed: the record alone changes
            user = tenant.users[user.id] = dataclasses.replace(user, **changes)
        if user.totp_secret_base64 is not None:
            return EmailSignIn(EmailSignInOutcome.MFA_REQUIRED, user)
        _create_session(store, CreateSession(project_id, dataclasses.replace(effect.session, user_id=user.id)))
        return EmailSignIn(EmailSignInOutcome.SIGNED_IN, user)
    if not effect.sign_up_enabled:
        return EmailSignIn(EmailSignInOutcome.SIGN_UP_DISABLED)
    new_user = effect.new_user
    if new_user.id in tenant.users:
        return EmailSignIn(EmailSignInOutcome.ID_TAKEN)
    tenant.email_index.pop(effect.email, None)  # an entry pointing at nobody (the index holds none such)
    _create_user(store, CreateUser(project_id, new_user))
    if effect.personal_team is not None:
        _create_team(store, CreateTeam(project_id, *effect.personal_team))
    _create_session(store, CreateSession(project_id, dataclasses.replace(effect.session, user_id=new_user.id)))
    return EmailSignIn(EmailSignInOutcome.SIGNED_UP, new_user)


# --------------------------------------------------------------------------------------------------------------
# Teams and memberships


@_performs(CreateTeam)
def _create_team(store: MemoryStore, effect: CreateTeam) -> Team | TeamWrite:
    tenant = store.tenant(effect.project_id)
    if effect.creator is not None and effect.creator.user_id not in tenant.users:
        return TeamWrite.USER_NOT_FOUND
    tenant.teams[effect.team.id] = effect.team
    if effect.creator is not None:
        tenant.memberships[(effect.team.id, effect.creator.user_id)] = effect.creator
    return effect.team


@_performs(LoadTeam)
def _load_team(store: MemoryStore, effect: LoadTeam) -> Team | None:
    return store.tenant(effect.project_id).teams.get(effect.team_id)


@_performs(ListTeams)
def _list_teams(store: MemoryStore, effect: ListTeams) -> tuple[Team, ...]:
    tenant = store.tenant(effect.project_id)
    teams = [t for t in tenant.teams.values() if effect.user_id is None or (t.id, effect.user_id) in tenant.memberships]
    return tuple(sorted(teams, key=lambda t: (t.created_at_millis, t.id)))


@_performs(UpdateTeam)
def _update_team(store: MemoryStore, effect: UpdateTeam) -> Team | None:
    tenant = store.tenant(effect.project_id)
    team = tenant.teams.get(effect.team_id)
    if team is None:
        return None
    team = dataclasses.replace(team, **dict(effect.changes))
    tenant.teams[team.id] = team
    return team


@_performs(DeleteTeam)
def _delete_team(store: MemoryStore, effect: DeleteTeam) -> bool:
    tenant = store.tenant(effect.project_id)
    if tenant.teams.pop(effect.team_id, None) is None:
        return False
    for key in [key for key in tenant.memberships if key[0] == effect.team_id]:
        _drop_membership(tenant, *key)
    return True


def _drop_membership(tenant: Tenant, team_id: str, user_id: str) -> bool:
    if tenant.memberships.pop((team_id, user_id), None) is None:
        return False
    user = tenant.users.get(user_id)
    if user is not None and user.selected_team_id == team_id:
        tenant.users[user_id] = dataclasses.replace(user, selected_team_id=None)
    return True


@_performs(AddMembership)
def _add_membership(store: MemoryStore, effect: AddMembership) -> Membership | TeamWrite:
    tenant = store.tenant(effect.project_id)
    membership = effect.membership
    if membership.user_id not in tenant.users:
        return TeamWrite.USER_NOT_FOUND
    if membership.team_id not in tenant.teams:
        return TeamWrite.TEAM_NOT_FOUND
    key = (membership.team_id, membership.user_id)
    if key in tenant.memberships:
        return TeamWrite.MEMBERSHIP_EXISTS
    tenant.memberships[key] = membership
    return membership


@_performs(LoadMembership)
def _load_membership(store: MemoryStore, effect: LoadMembership) -> Membership | None:
    return store.tenant(effect.project_id).memberships.get((effect.team_id, effect.user_id))


@_performs(ListMemberships)
def _list_memberships(store: MemoryStore, effect: ListMemberships) -> tuple[Membership, ...]:
    found = [
        m
        for m in store.tenant(effect.project_id).memberships.values()
        if (effect.team_id is None or m.team_id == effect.team_id)
        and (effect.user_id is None or m.user_id == effect.user_id)
    ]
    return tuple(found)  # the dict keeps insertion order, which is creation order


@_performs(RemoveMembership)
def _remove_membership(store: MemoryStore, effect: RemoveMembership) -> bool:
    return _drop_membership(store.tenant(effect.project_id), effect.team_id, effect.user_id)


@_performs(UpdateMembership)
def _update_membership(store: MemoryStore, effect: UpdateMembership) -> Membership | None:
    tenant = store.tenant(effect.project_id)
    key = (effect.team_id, effect.user_id)
    membership = tenant.memberships.get(key)
    if membership is None:
        return None
    membership = dataclasses.replace(membership, **dict(effect.changes))
    tenant.memberships[key] = membership
    return membership


@_performs(ChangePermission)
def _change_permission(store: MemoryStore, effect: ChangePermission) -> Membership | None:
    tenant = store.tenant(effect.project_id)
    key = (effect.team_id, effect.user_id)
    membership = tenant.memberships.get(key)
    if membership is None:
        return None
    held = set(membership.permissions)
    if effect.granted:
        held.add(effect.permission_id)
    else:
        held.discard(effect.permission_id)
    membership = dataclasses.replace(membership, permissions=tuple(sorted(held)))
    tenant.memberships[key] = membership
    return membership


# --------------------------------------------------------------------------------------------------------------
# Dev/test mode


@_performs(LoadClockOverride)
def _load_clock_override(store: MemoryStore, effect: LoadClockOverride) -> ClockOverride | None:
    return store.clock_override


@_performs(SetClockOverride)
def _set_clock_override(store: MemoryStore, effect: SetClockOverride) -> None:
    store.clock_override = effect.override


@_performs(ResetProjectData)
def _reset_project_data(store: MemoryStore, effect: ResetProjectData) -> bool:
    if effect.project_id not in store.projects:
        return False
    store.tenants.pop(effect.project_id, None)
    return True


# --------------------------------------------------------------------------------------------------------------
# Rate limits

#: Expired counters are swept when this many exist (they are tiny; the sweep keeps memory bounded).
_RATE_SWEEP_AT = 10_000


@_performs(HitRateLimits)
def _hit_rate_limits(store: MemoryStore, effect: HitRateLimits) -> tuple[int, ...]:
    counters = store.rate_counters
    counts: list[int] = []
    for hit in effect.hits:
        count = counters.get(hit.key, (0, 0))[0] + hit.amount
        counters[hit.key] = (count, hit.expires_at_millis)
        counts.append(count)
    if len(counters) > _RATE_SWEEP_AT:
        for key in [k for k, (_, expires) in counters.items() if expires <= effect.now_ms]:
            del counters[key]
    return tuple(counts)


@_performs(Together)
def _together(store: MemoryStore, effect: Together) -> tuple[Any, ...]:
    # Under the store's (re-entrant) lock, one after the other: each effect atomic, as its own contract says.
    return tuple(store.apply(inner) for inner in effect.effects)
