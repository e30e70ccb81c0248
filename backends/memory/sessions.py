"""The memory store: sessions."""

from __future__ import annotations

from backends.memory.commit import applies, checks
from backends.memory.store import MemoryStore, Tenant, _performs
from identity_proto.effects import (
    DropSession,
    EndSession,
    ListSessions,
    LoadSession,
    SessionExists,
    UseRefreshToken,
)
from identity_proto.effects.sessions import UserSessionsAre
from identity_proto.records import Session, User, replaced


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


@applies(EndSession)
def _apply_end_session(tenant: Tenant, write: EndSession) -> None:
    _drop_session(tenant, write.session_id)


@checks(UserSessionsAre)
def _user_sessions_are(tenant: Tenant, guard: UserSessionsAre) -> bool:
    held = tenant.user_sessions.get(guard.user_id, set())
    return held == set(guard.session_ids) and len(held) == len(guard.session_ids)


@checks(SessionExists)
def _session_exists(tenant: Tenant, guard: SessionExists) -> bool:
    return guard.session_id in tenant.sessions
