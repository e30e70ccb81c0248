"""Sessions and tokens: starting a session, refreshing access tokens, signing out, and managing sessions.

A session is a stored record; its refresh token (45 random Crockford characters, reference §1.4) is returned once
and kept only as a hash; it is never rotated. Access tokens are ES256 JWTs with the claims the official SDK
validates (official-sdk §4), signed with the project's key; they live 10 minutes by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from identity_proto.auth import AccessType, check_project_admits
from identity_proto.changes import UserChanges
from identity_proto.context import RequestContext
from identity_proto.effects import (
    DropSession,
    EndSession,
    Exists,
    Flow,
    ListSessions,
    LoadProject,
    LoadSession,
    LoadUser,
    SessionExists,
    UseRefreshToken,
    perform,
)
from identity_proto.effects.commit import (
    Commit,
    Conflict,
    FieldsAre,
    Guard,
    PatchUser,
    PutSession,
    RecordKind,
    Write,
    commit,
)
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.http import Response
from identity_proto.records import Project, Session, User
from identity_proto.render import json_response
from identity_proto.schemas import schema_error
from identity_proto.tokens import access_token_key, hash_secret, new_uuid, random_string, secret_matches
from identity_proto.users import restricted_reason

if TYPE_CHECKING:
    from identity_proto.schemas import CreateSessionBody, ListSessionsQuery, OAuthTokenGrantBody, SessionIdParams

__all__ = [
    "IssuedTokens",
    "access_token_claims",
    "create_session_endpoint",
    "delete_session_endpoint",
    "end_session",
    "issue_access_token",
    "list_sessions_endpoint",
    "new_session",
    "oauth_token",
    "refresh_access_token",
    "sign_out",
    "start_session",
    "use_refresh_token",
]

#: oauth4webapi sends this client secret when the app has no publishable key (official-sdk §3.8).
PUBLIC_CLIENT_SECRET = "__stack_public_client__"  # noqa: S105 - a public marker, not a secret


@dataclass(frozen=True, slots=True)
class IssuedTokens:
    """What a sign-in returns: the refresh token (shown once), an access token, and the session."""

    refresh_token: str
    access_token: str
    session: Session


def access_token_claims(
    project: Project, user: User, session_id: str, *, now_ms: int, lifetime_ms: int, base_url: str
) -> dict[str, Any]:
    """The claims of an access token for `user` (official-sdk §4; reference §1.3 for iss and aud)."""
    reason = restricted_reason(user, project.config)
    if user.is_anonymous:
        issuer_segment, audience = "projects-anonymous-users", f"{project.id}:anon"
    elif reason is not None:
        issuer_segment, audience = "projects-restricted-users", f"{project.id}:restricted"
    else:
        issuer_segment, audience = "projects", project.id
    issued_at = now_ms // 1000
    return {
        "sub": user.id,
        "iat": issued_at,
        "exp": issued_at + lifetime_ms // 1000,
        "iss": f"{base_url}/api/v1/{issuer_segment}/{project.id}",
        "aud": audience,
        "project_id": project.id,
        "branch_id": "main",
        "refresh_token_id": session_id,
        "role": "authenticated",
        "name": user.display_name,
        "email": user.primary_email,
        "email_verified": user.primary_email_verified,
        "selected_team_id": user.selected_team_id,
        "signed_up_at": user.signed_up_at_millis // 1000,
        "is_anonymous": user.is_anonymous,
        "is_restricted": reason is not None,
        "restricted_reason": None if reason is None else {"type": reason},
        "requires_totp_mfa": user.totp_secret_base64 is not None,
    }


def issue_access_token(ctx: RequestContext, project: Project, user: User, session_id: str) -> str:
    """A fresh access token for `user` in session `session_id`, signed with the project's key."""
    claims = access_token_claims(
        project,
        user,
        session_id,
        now_ms=ctx.now_ms,
        lifetime_ms=ctx.options.access_token_lifetime_ms,
        base_url=ctx.base_url,
    )
    # Anonymous and restricted users' tokens are signed with keys of their own, listed in the JWKS only on request
    # (see `tokens.access_token_key`).
    key = access_token_key(project.signing_key, claims["aud"])
    token = key.sign(claims)
    if ctx.token_cache is not None:
        ctx.token_cache.remember(key, token, claims)
    return token


def new_session(
    ctx: RequestContext, user_id: str, *, lifetime_ms: int | None = None, is_impersonation: bool = False
) -> tuple[str, Session]:
    """A fresh refresh token and the session record to store for it (the token only as a hash)."""
    refresh_token = random_string(ctx.entropy, 45)
    session = Session(
        id=new_uuid(ctx.entropy),
        user_id=user_id,
        refresh_token_hash=hash_secret(refresh_token),
        created_at_millis=ctx.now_ms,
        last_used_at_millis=ctx.now_ms,
        expires_at_millis=ctx.now_ms
        + (lifetime_ms if lifetime_ms is not None else ctx.options.refresh_token_lifetime_ms),
        is_impersonation=is_impersonation,
    )
    return refresh_token, session


def start_session(
    ctx: RequestContext,
    project: Project,
    user: User,
    *,
    lifetime_ms: int | None = None,
    is_impersonation: bool = False,
    decided_on: tuple[str, ...] | None = None,
    touch: bool = False,
    writes: tuple[Write, ...] = (),
) -> Flow[IssuedTokens]:
    """Create a session for `user` and return its tokens: one commit, guarded on the user existing and holding in
    `decided_on` what the caller decided on (a sign-in: the password it checked, the second factor it found), so
    a concurrent change of those re-runs the flow (`CommitConflict`). With `touch`, signing in is activity: the
    user's `last_active_at_millis` is raised to now in the same commit, with `writes` (what the sign-in changes: a
    passkey's counter). The token is issued for the user as stored once the commit is applied (same round trip)."""
    refresh_token, session = new_session(ctx, user.id, lifetime_ms=lifetime_ms, is_impersonation=is_impersonation)
    guard: Guard = Exists(RecordKind.USER, user.id) if decided_on is None else FieldsAre(user, decided_on)
    all_writes: list[Write] = list(writes)
    if touch and user.last_active_at_millis < ctx.now_ms:
        all_writes.append(PatchUser(user.id, UserChanges.of(last_active_at_millis=ctx.now_ms)))
    all_writes.append(PutSession(session))
    (stored,) = yield from commit(project.id, (guard,), tuple(all_writes), returns=((RecordKind.USER, user.id),))
    return IssuedTokens(refresh_token, issue_access_token(ctx, project, stored, session.id), session)


def use_refresh_token(ctx: RequestContext, project: Project, refresh_token: str) -> Flow[str]:
    """A new access token for the session of `refresh_token`; REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED when the session
    is gone, expired, or its user was deleted."""
    found = yield from perform(UseRefreshToken(project.id, hash_secret(refresh_token), ctx.now_ms))
    if found is None or ctx.now_ms >= found[0].expires_at_millis:
        raise KnownError(ErrorCode.REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED)
    session, user = found
    return issue_access_token(ctx, project, user, session.id)


def refresh_access_token(ctx: RequestContext) -> Flow[Response]:
    """POST /auth/sessions/current/refresh: header x-service-refresh-token -> {access_token}."""
    auth = ctx.require_auth()
    refresh_token = ctx.options.headers.get(ctx.request, "refresh-token")
    if not refresh_token:
        raise _missing_header(ctx, "x-service-refresh-token")
    access_token = yield from use_refresh_token(ctx, auth.project, refresh_token)
    return json_response(200, {"access_token": access_token})


def oauth_token(ctx: RequestContext[OAuthTokenGrantBody]) -> Flow[Response]:
    """POST /auth/oauth/token (form-encoded, the SDK's refresh grant): the project is named by `client_id`, the
    publishable key is the `client_secret`; no authentication headers are sent (official-sdk §3.8)."""
    body = ctx.body
    # The model requires both for this grant.
    assert body.client_secret is not None
    assert body.refresh_token is not None
    check_project_admits(body.client_id, AccessType.CLIENT)  # a publishable key is client access
    project = yield from perform(LoadProject(body.client_id))
    if project is None:
        raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, details={"project_id": body.client_id})
    keyless = body.client_secret == PUBLIC_CLIENT_SECRET and not project.config.require_publishable_client_key
    if not keyless and not secret_matches(body.client_secret, project.keys.publishable_client_key_hash):
        raise KnownError(ErrorCode.INVALID_PUBLISHABLE_CLIENT_KEY, details={"project_id": project.id})
    access_token = yield from use_refresh_token(ctx, project, body.refresh_token)
    return json_response(
        200,
        {
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": ctx.options.access_token_lifetime_ms // 1000,
        },
    )


def sign_out(ctx: RequestContext) -> Flow[Response]:
    """DELETE /auth/sessions/current: ends the session named by the access token's refresh_token_id."""
    auth = ctx.require_auth()
    if auth.refresh_token_id is None:
        # reference §1.4: without an access token the original answers ACCESS_TOKEN_EXPIRED, expired "now".
        raise KnownError(
            ErrorCode.ACCESS_TOKEN_EXPIRED,
            details={
                "expired_at_millis": ctx.now_ms,
                "project_id": auth.project.id,
                "user_id": None,
                "refresh_token_id": None,
            },
        )
    if not (yield from end_session(auth.project.id, auth.refresh_token_id)):
        raise KnownError(ErrorCode.REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED)
    return json_response(200, {"success": True})


def end_session(project_id: str, session_id: str) -> Flow[bool]:
    """End the session `session_id` (signing out knows only its id): one commit, guarded on it existing. False
    when it is gone already (signed out, revoked, its user deleted; nothing written)."""
    ended = yield from perform(Commit(project_id, (SessionExists(session_id),), (EndSession(session_id),)))
    return not isinstance(ended, Conflict)


def create_session_endpoint(ctx: RequestContext[CreateSessionBody]) -> Flow[Response]:
    """POST /auth/sessions (server, admin): sign a user in directly -> {refresh_token, access_token}."""
    auth = ctx.require_auth()
    body: CreateSessionBody = ctx.body
    user_id = ctx.resolve_user_id(body.user_id)
    user = yield from perform(LoadUser(auth.project.id, user_id))
    if user is None:
        raise KnownError(ErrorCode.USER_ID_DOES_NOT_EXIST, details={"user_id": user_id})
    tokens = yield from start_session(
        ctx, auth.project, user, lifetime_ms=body.expires_in_millis, is_impersonation=body.is_impersonation
    )
    return json_response(200, {"refresh_token": tokens.refresh_token, "access_token": tokens.access_token})


def list_sessions_endpoint(ctx: RequestContext[None, ListSessionsQuery]) -> Flow[Response]:
    """GET /auth/sessions?user_id=: a user's sessions, newest first (clients: only their own; impersonation
    sessions only for admin)."""
    auth = ctx.require_auth()
    query: ListSessionsQuery = ctx.query
    user_id = ctx.resolve_user_id(query.user_id)
    if auth.access_type is AccessType.CLIENT and user_id != auth.user_id:
        raise KnownError(ErrorCode.CLIENT_CAN_ONLY_LIST_OWN_SESSIONS)
    sessions = yield from perform(ListSessions(auth.project.id, user_id))
    items = [
        {
            "id": s.id,
            "user_id": s.user_id,
            "created_at": s.created_at_millis,
            "last_used_at": s.last_used_at_millis,
            "is_impersonation": s.is_impersonation,
            "is_current_session": s.id == auth.refresh_token_id,
        }
        for s in sessions
        if (not s.is_impersonation or auth.access_type is AccessType.ADMIN) and s.expires_at_millis > ctx.now_ms
    ]
    return json_response(200, {"items": items, "is_paginated": False})


def delete_session_endpoint(ctx: RequestContext[object, object, SessionIdParams]) -> Flow[Response]:
    """DELETE /auth/sessions/{session_id}: not the caller's current one; a client only its own."""
    auth = ctx.require_auth()
    params: SessionIdParams = ctx.params
    session = yield from perform(LoadSession(auth.project.id, params.session_id))
    if session is None or (auth.access_type is AccessType.CLIENT and session.user_id != auth.user_id):
        raise KnownError(ErrorCode.SESSION_NOT_FOUND)
    if session.id == auth.refresh_token_id:
        raise KnownError(ErrorCode.CANNOT_DELETE_CURRENT_SESSION)
    yield from commit(auth.project.id, writes=(DropSession(session),))  # gone meanwhile: no error
    return json_response(200, {"success": True})


def _missing_header(ctx: RequestContext, name: str) -> KnownError:
    return schema_error(ctx.request.method, ctx.request.path, [f"headers.{name} must be defined"])
