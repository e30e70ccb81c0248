"""Request authentication: headers in, `Auth` (or None for an unauthenticated request) out.

The checks run in exactly the original's order (reference §1.2), because the order decides which error a caller
sees first:

1. a key without an access type            -> 400 PROJECT_KEY_WITHOUT_ACCESS_TYPE
2. no access type                          -> unauthenticated (None); the access token is then ignored
3. access type not client/server/admin     -> 400 INVALID_ACCESS_TYPE
4. no project id                           -> 400 ACCESS_TYPE_WITHOUT_PROJECT_ID
5. the access token, before the project    -> 401 UNPARSABLE_ACCESS_TOKEN / ACCESS_TOKEN_EXPIRED /
                                              INVALID_PROJECT_FOR_ACCESS_TOKEN / ANONYMOUS_AUTHENTICATION_NOT_ALLOWED,
                                              403 RESTRICTED_USER_NOT_ALLOWED
6. the project exists                      -> 400 CURRENT_PROJECT_NOT_FOUND
   the internal project: admin access only -> 401 INSUFFICIENT_ACCESS_TYPE (`check_project_admits`; ours)
7. the key of the access type in use       -> 401 ..._REQUIRED / INVALID_... (keys of other types are ignored)
8. the branch                              -> 400 BRANCH_DOES_NOT_EXIST

Keys are compared as SHA-256 digests in constant time (`tokens.secret_matches`); the store never holds a key.

An access token is also only as good as its session: `session_precondition` checks, with the request's first trip to the
store (or inside its first `Commit`, which carries the guard `live_session_guard`), that the session the token was
issued for still exists (not signed out, not revoked by a password change or a session revoke, its user not deleted),
and answers 401 ACCESS_TOKEN_EXPIRED when it does not. The original service accepts such a token until it expires (up to
ten minutes); we refuse it at once, on every worker sharing the store. ACCESS_TOKEN_EXPIRED is the answer the original's
SDK already handles: it tries its refresh token, which fails for a revoked session, and signs the user out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import field
from enum import Enum
from typing import TYPE_CHECKING, Any

from identity_proto.effects import Flow, LoadSession, load_project
from identity_proto.effects.commit import SessionIsLive
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.http import Request
from identity_proto.preconditions import Precondition
from identity_proto.records import INTERNAL_PROJECT_ID, Project, Session
from identity_proto.tokens import VerifiedTokenCache, access_token_key, secret_matches, unverified_claims

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


__all__ = [
    "AccessType",
    "Auth",
    "AuthCache",
    "HeaderReader",
    "ProjectCache",
    "authenticate",
    "check_project_admits",
    "live_session_guard",
    "session_precondition",
]

#: The only branch there is (reference §1.3: anything else is rejected).
DEFAULT_BRANCH_ID = "main"


class AccessType(Enum):
    """Who is calling, as declared by the access-type header."""

    #: An end user's frontend: reads and updates only the signed-in user's data.
    CLIENT = "client"
    #: A trusted backend: full access to all user data of the project.
    SERVER = "server"
    #: A dashboard or configuration tool: everything server may do, plus project configuration.
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class HeaderReader:
    """Reads our authentication headers by suffix under each accepted prefix, in order.

    `x-service-` always; `x-stack-` too in compatibility mode, so the original's SDK works unmodified.
    """

    prefixes: tuple[str, ...] = ("x-service-",)
    #: suffix -> the full header names to try, in order (filled on first use; a handful of suffixes exist).
    _names: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def get(self, request: Request, suffix: str) -> str | None:
        """The value of `<prefix><suffix>` for the first prefix that has one, else None."""
        names = self._names.get(suffix)
        if names is None:
            names = self._names[suffix] = tuple(prefix + suffix for prefix in self.prefixes)
        for name in names:
            value = request.header(name)
            if value is not None:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Auth:
    """An authenticated request: access type, project, and the user its access token names (if any)."""

    access_type: AccessType
    project: Project
    branch_id: str
    #: Verified claims of the access token, or None when no token was sent.
    token_claims: Mapping[str, Any] | None = None

    @property
    def user_id(self) -> str | None:
        """The signed-in user's id, from the access token."""
        return None if self.token_claims is None else str(self.token_claims["sub"])

    @property
    def refresh_token_id(self) -> str | None:
        """The session the access token was issued for."""
        return None if self.token_claims is None else self.token_claims.get("refresh_token_id")


class ProjectCache:
    """Projects as authentication last read them, for `ttl_ms` of the requests' own clock (thread-safe).

    Every request needs its project; reading it from the store each time would cost a round trip per request. A
    worker's own writes to a project forget it at once (`forget`); another worker's writes reach this one within
    `ttl_ms` (one second by default): that is how long a key rotated or a project deleted elsewhere may still be
    accepted here. A ttl of 0 turns the cache off. Unknown projects are never cached.
    """

    def __init__(self, ttl_ms: int, max_entries: int = 10_000) -> None:
        self.ttl_ms = ttl_ms
        self._entries: dict[str, tuple[Project, int]] = {}
        self._max_entries = max_entries
        self._lock = threading.Lock()
        #: Dev mode (`Service.bootstrap(recreate_missing=True)`): the projects start-up makes sure of, and the flow
        #: that does it again when one of them is missing from the store (a Redis restarted empty).
        self.recreatable: frozenset[str] = frozenset()
        self.recreate: Callable[[int], Flow[object]] | None = None

    def load(self, project_id: str, now_ms: int) -> Flow[Project | None]:
        """The project, from the cache while fresh, else from the store."""
        if self.ttl_ms > 0:
            found = self._entries.get(project_id)
            if found is not None and now_ms - found[1] < self.ttl_ms and now_ms >= found[1]:
                return found[0]
        project = yield from load_project(project_id)
        if project is None and self.recreate is not None and project_id in self.recreatable:
            # As a restart would: a dev-mode store that lost its projects (emptied, or a Redis restarted without
            # persistence) would otherwise answer CURRENT_PROJECT_NOT_FOUND for the dev project until one.
            logger.warning(
                "project %s is missing from the store (was it emptied?): made again, as at start-up", project_id
            )
            yield from self.recreate(now_ms)
            project = yield from load_project(project_id)
        if project is not None and self.ttl_ms > 0:
            with self._lock:
                if len(self._entries) >= self._max_entries:
                    self._entries.clear()
                self._entries[project_id] = (project, now_ms)
        return project

    def fresh(self, project_id: str, now_ms: int) -> Project | None:
        """The cached project while it is fresh, else None (nothing is loaded)."""
        found = self._entries.get(project_id)
        if found is None or not (0 <= now_ms - found[1] < self.ttl_ms):
            return None
        return found[0]

    def forget(self, project_id: str) -> None:
        """Drop a project this worker just changed or deleted."""
        with self._lock:
            self._entries.pop(project_id, None)


logger = logging.getLogger("identity_service")

_KEY_HEADERS = ("publishable-client-key", "secret-server-key", "super-secret-admin-key", "admin-access-token")
#: Every header `authenticate` reads (by suffix): its result is a function of these, the project and the clock.
_AUTH_HEADERS = (
    "access-type",
    "project-id",
    "access-token",
    "branch-id",
    "allow-anonymous-user",
    "allow-restricted-user",
    *_KEY_HEADERS,
)


class AuthCache:
    """Successful authentications, by the exact authentication headers that produced them (thread-safe).

    `authenticate` is a function of the headers it reads, the project and the clock. An entry is used only while
    the `ProjectCache` still holds the very project object it was computed with (so a project this worker changed,
    or one older than the project cache's ttl, recomputes it) and before its access token expires; failures are
    never cached, so every error is decided afresh. A hit skips the key's SHA-256, the token's claims and the
    header checks: a repeated request costs one tuple and one dictionary lookup. (Keys are compared by the
    dictionary: hashing is randomised per process, so the lookup's timing says nothing about a key's bytes.)

    The cache key holds only the headers authentication reads, never the others: the original's SDK sends a fresh
    random nonce header with every request, which would make every key unique.
    """

    def __init__(self, prefixes: tuple[str, ...], max_entries: int = 4096) -> None:
        self._names = frozenset(prefix + suffix for prefix in prefixes for suffix in _AUTH_HEADERS)
        self._entries: dict[tuple[tuple[str, str], ...], tuple[Auth, int]] = {}
        self._max_entries = max_entries
        self._lock = threading.Lock()

    def key(self, request: Request) -> tuple[tuple[str, str], ...]:
        """The authentication headers of `request`, in order (repeats included: they change the outcome)."""
        names = self._names
        return tuple(item for item in request.headers if item[0] in names)

    def get(self, key: tuple[tuple[str, str], ...], now_ms: int, projects: ProjectCache) -> Auth | None:
        """The cached result for `key`, if it still holds at `now_ms`."""
        found = self._entries.get(key)
        if found is None:
            return None
        auth, expires_ms = found
        if now_ms >= expires_ms or projects.fresh(auth.project.id, now_ms) is not auth.project:
            return None
        return auth

    def put(self, key: tuple[tuple[str, str], ...], auth: Auth) -> None:
        """Remember a successful authentication (valid until its access token expires)."""
        claims = auth.token_claims
        expires_ms = claims["exp"] * 1000 if claims is not None else 2**63
        with self._lock:
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
            self._entries[key] = (auth, expires_ms)


def authenticate(
    request: Request,
    *,
    now_ms: int,
    headers: HeaderReader,
    token_cache: VerifiedTokenCache,
    projects: ProjectCache | None = None,
    keys_first: bool = False,
) -> Flow[Auth | None]:
    """Implements the decision procedure of reference §1.2 (see the module docstring). (`AuthCache` keeps its
    successes: the service looks there first.) `keys_first` (compatibility mode): the key of the access type is
    judged before whether the project admits that access type, so a key the internal project does not have is
    refused as the original refuses it (`INVALID_PUBLISHABLE_CLIENT_KEY`, ...); what is admitted is the same."""
    access_type_value = headers.get(request, "access-type")
    if access_type_value is None:
        if any(headers.get(request, name) is not None for name in _KEY_HEADERS):
            raise KnownError(ErrorCode.PROJECT_KEY_WITHOUT_ACCESS_TYPE)
        return None
    try:
        access_type = AccessType(access_type_value)
    except ValueError:
        raise KnownError(ErrorCode.INVALID_ACCESS_TYPE, context={"access_type": access_type_value}) from None
    project_id = headers.get(request, "project-id")
    if not project_id:
        raise KnownError(ErrorCode.ACCESS_TYPE_WITHOUT_PROJECT_ID, details={"request_type": access_type.value})

    projects = projects or ProjectCache(0)
    project = yield from projects.load(project_id, now_ms)

    claims: Mapping[str, Any] | None = None
    access_token = headers.get(request, "access-token")
    if access_token:
        claims = yield from _verify_access_token(
            access_token, project_id, project, now_ms=now_ms, token_cache=token_cache, projects=projects
        )
        if claims is not None:
            _check_user_kind(claims, request, headers)

    if project is None:
        raise KnownError(ErrorCode.CURRENT_PROJECT_NOT_FOUND, details={"project_id": project_id})

    if keys_first:
        _check_key(request, headers, access_type, project)
    check_project_admits(project.id, access_type)
    if not keys_first:
        _check_key(request, headers, access_type, project)

    branch_id = headers.get(request, "branch-id") or DEFAULT_BRANCH_ID
    if branch_id != DEFAULT_BRANCH_ID:
        raise KnownError(ErrorCode.BRANCH_DOES_NOT_EXIST, details={"branch_id": branch_id})

    return Auth(access_type=access_type, project=project, branch_id=branch_id, token_claims=claims)


def live_session_guard(auth: Auth | None, *, now_ms: int) -> SessionIsLive | None:
    """The commit guard checking that the access token's session is still live (None for a request without an
    access token): a flow whose commit carries it needs no separate check of the session (`session_precondition`,
    whose guard it is)."""
    if auth is None or auth.token_claims is None:
        return None
    session_id = auth.token_claims.get("refresh_token_id")
    if not isinstance(session_id, str) or not session_id:
        return None
    return SessionIsLive(session_id, str(auth.token_claims["sub"]), now_ms)


def session_precondition(auth: Auth | None, *, now_ms: int) -> Precondition[Session | None] | None:
    """The check that the access token's session is still live (see the module docstring); None for a request
    without an access token."""
    guard = live_session_guard(auth, now_ms=now_ms)
    if auth is None or guard is None:
        return None
    session_id, user_id = guard.session_id, guard.user_id

    def check(session: Session | None) -> None:
        if session is None or session.user_id != user_id or now_ms >= session.expires_at_millis:
            raise KnownError(
                ErrorCode.ACCESS_TOKEN_EXPIRED,
                message="The access token's session was signed out or revoked. Please refresh or sign in again.",
                details={
                    "expired_at_millis": now_ms,
                    "project_id": auth.project.id,
                    "user_id": user_id,
                    "refresh_token_id": session_id,
                },
            )

    return Precondition(LoadSession(auth.project.id, session_id), check, guard)


def check_project_admits(project_id: str, access_type: AccessType | None) -> None:
    """The internal project admits admin access only (with its own key, checked next): it manages every project
    and has no users of its own, so client and server access to it, and endpoints that name a project without
    authentication headers (`access_type` None: the OAuth token endpoint's client_id, the JWKS path), are refused
    before any flow is looked at, and before the key except in compatibility mode (`authenticate`'s
    `keys_first`). The original's internal project is its dashboard's, with users; ours is
    not, so nothing may sign up, sign in or send mail there."""
    if project_id != INTERNAL_PROJECT_ID or access_type is AccessType.ADMIN:
        return
    actual = None if access_type is None else access_type.value
    raise KnownError(
        ErrorCode.INSUFFICIENT_ACCESS_TYPE,
        message=f"The internal project admits only 'admin' access, but the access type was '{actual or 'none'}'.",
        details={"actual_access_type": actual, "allowed_access_types": [AccessType.ADMIN.value]},
    )


def _verify_access_token(
    token: str,
    header_project_id: str,
    header_project: Project | None,
    *,
    now_ms: int,
    token_cache: VerifiedTokenCache,
    projects: ProjectCache,
) -> Flow[Mapping[str, Any] | None]:
    """Step 5: the token's signature (by its own project's key), expiry, then its project against the header's.

    Returns None only when the token names the header's project and that project does not exist: no user can be
    had then, and step 6 answers CURRENT_PROJECT_NOT_FOUND.
    """
    # A token verified before names its project in claims already decoded; only a new one is decoded unverified.
    seen = token_cache.seen(token)
    unverified = seen[1] if seen is not None else unverified_claims(token)
    token_project_id = _token_project_id(unverified)
    if token_project_id is None:
        raise KnownError(ErrorCode.UNPARSABLE_ACCESS_TOKEN)
    if token_project_id == header_project_id:
        signer = header_project
        if signer is None:
            return None
    else:
        signer = yield from projects.load(token_project_id, now_ms)
        if signer is None:
            raise KnownError(ErrorCode.UNPARSABLE_ACCESS_TOKEN)
    # Anonymous and restricted users' tokens are signed with keys of their own (`tokens.access_token_key`), named
    # by the audience: a token whose audience says otherwise than its key fails here.
    claims = token_cache.verify(access_token_key(signer.signing_key, _audience(unverified)), token, seen, now_ms)
    if claims is None or not isinstance(claims.get("sub"), str) or not isinstance(claims.get("exp"), int):
        raise KnownError(ErrorCode.UNPARSABLE_ACCESS_TOKEN)
    if now_ms >= claims["exp"] * 1000:
        raise KnownError(
            ErrorCode.ACCESS_TOKEN_EXPIRED,
            details={
                "expired_at_millis": claims["exp"] * 1000,
                "project_id": token_project_id,
                "user_id": claims.get("sub"),
                "refresh_token_id": claims.get("refresh_token_id"),
            },
        )
    if token_project_id != header_project_id:
        raise KnownError(
            ErrorCode.INVALID_PROJECT_FOR_ACCESS_TOKEN,
            details={"expected_project_id": header_project_id, "actual_project_id": token_project_id},
        )
    return claims


def _token_project_id(claims: Mapping[str, Any] | None) -> str | None:
    # reference §1.3: the audience is `<projectId>`, `<projectId>:anon` or `<projectId>:restricted`.
    if claims is None or not isinstance(claims.get("aud"), str):
        return None
    project_id = claims["aud"].split(":", 1)[0]
    return project_id or None


def _audience(claims: Mapping[str, Any] | None) -> str:
    audience = claims.get("aud") if claims is not None else None
    return audience if isinstance(audience, str) else ""


def _check_user_kind(claims: Mapping[str, Any], request: Request, headers: HeaderReader) -> None:
    """Anonymous and restricted users need the caller to opt in (reference §1.2 step 5), judged by the claims."""
    allow_anonymous = headers.get(request, "allow-anonymous-user") == "true"
    allow_restricted = allow_anonymous or headers.get(request, "allow-restricted-user") == "true"
    if claims.get("is_anonymous") is True and not allow_anonymous:
        raise KnownError(ErrorCode.ANONYMOUS_AUTHENTICATION_NOT_ALLOWED)
    reason = claims.get("restricted_reason")
    if reason is not None and not allow_restricted:
        reason_type = reason.get("type") if isinstance(reason, dict) else None
        raise KnownError(
            ErrorCode.RESTRICTED_USER_NOT_ALLOWED,
            details={"restricted_reason": {"type": reason_type}},
            context={"reason": reason_type},
        )


def _check_key(request: Request, headers: HeaderReader, access_type: AccessType, project: Project) -> None:
    """Step 7: only the key of the access type in use is looked at."""
    if headers.get(request, "admin-access-token") is not None:
        raise KnownError(ErrorCode.UNPARSABLE_ADMIN_ACCESS_TOKEN)
    details = {"project_id": project.id}
    if access_type is AccessType.CLIENT:
        key = headers.get(request, "publishable-client-key")
        if not key:
            if project.config.require_publishable_client_key:
                raise KnownError(ErrorCode.PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT, details=details)
        elif not secret_matches(key, project.keys.publishable_client_key_hash):
            raise KnownError(ErrorCode.INVALID_PUBLISHABLE_CLIENT_KEY, details=details)
    elif access_type is AccessType.SERVER:
        key = headers.get(request, "secret-server-key")
        if not key:
            raise KnownError(ErrorCode.SERVER_AUTHENTICATION_REQUIRED)
        if not secret_matches(key, project.keys.secret_server_key_hash):
            raise KnownError(ErrorCode.INVALID_SECRET_SERVER_KEY, details=details)
    else:
        key = headers.get(request, "super-secret-admin-key")
        if not key:
            raise KnownError(ErrorCode.ADMIN_AUTHENTICATION_REQUIRED)
        if not secret_matches(key, project.keys.super_secret_admin_key_hash):
            raise KnownError(ErrorCode.INVALID_SUPER_SECRET_ADMIN_KEY, details=details)
