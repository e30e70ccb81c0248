"""The memory store: sessions."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    CreateSession,
    DeleteSession,
    DropSession,
    ListSessions,
    LoadSession,
    RevokeUserSessions,
    UseRefreshToken,
)
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.records import Session, User, replaced


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
    session = replaced(session, {"last_used_at_millis": effect.now_ms})
    tenant.sessions[session.id] = session
    user = replaced(user, {"last_active_at_millis": max(user.last_active_at_millis, effect.now_ms)})
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


@applies(DropSession)
def _apply_drop_session(tenant: Tenant, write: DropSession) -> None:
    _drop_session(tenant, write.session.id)


@_performs(DeleteSession)
def _delete_session(store: MemoryStore, effect: DeleteSession) -> bool:
    return _drop_session(store.tenant(effect.project_id), effect.session_id)


@_performs(RevokeUserSessions)
def _revoke_user_sessions(store: MemoryStore, effect: RevokeUserSessions) -> int:
    tenant = store.tenant(effect.project_id)
    session_ids = list(tenant.user_sessions.pop(effect.user_id, ()))
    return sum(_drop_session(tenant, session_id) for session_id in session_ids)


@checks(UserSessionsAre)
def _user_sessions_are(tenant: Tenant, guard: UserSessionsAre) -> bool:
    held = tenant.user_sessions.get(guard.user_id, set())
    return held == set(guard.session_ids) and len(held) == len(guard.session_ids)
