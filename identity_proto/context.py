"""What a flow is given: the request, its validated inputs, the caller, the time and entropy, the options."""

from __future__ import annotations

import functools
from dataclasses import field
from typing import TYPE_CHECKING, Generic
from urllib.parse import quote

from typing_extensions import TypeVar

from identity_proto.auth import AccessType, Auth, HeaderReader, ProjectCache
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.http import Request
from identity_proto.quickinit import quick_init
from identity_proto.tokens import Entropy, VerifiedTokenCache

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


if TYPE_CHECKING:
    from identity_proto.effects.commit import CommitGuard
    from identity_proto.routing import Route

__all__ = ["RequestContext", "ServiceOptions", "client_address", "public_base_url"]

#: What a flow receives, as its route validated it: `RequestContext[Body, Query, Params]`; `object` (the default)
#: for an input the flow does not read, `None` for one its route takes none of.
BodyT = TypeVar("BodyT", covariant=True, default=object)
QueryT = TypeVar("QueryT", covariant=True, default=object)
ParamsT = TypeVar("ParamsT", covariant=True, default=object)


@dataclass(frozen=True, slots=True)
class ServiceOptions:
    """How one service instance behaves; hosts build it from their configuration."""

    #: Header prefixes accepted on requests and used on responses: ours, plus `x-stack-` in compatibility mode.
    header_prefixes: tuple[str, ...] = ("x-service-",)
    #: The public base URL: everything before `/api/v1` (scheme, host, port and the mount point, if any), used in
    #: token issuers. Empty: the request's scheme, Host header and mount point (`Request.root_path`).
    base_url: str = ""
    #: Dev/test mode: the test-only routes exist and the clock can be moved (never in a production
    #: configuration; off unless a host turns it on).
    dev_mode: bool = False
    #: Lifetimes (reference §1.3, §1.4, §2.1).
    access_token_lifetime_ms: int = 10 * 60 * 1000
    refresh_token_lifetime_ms: int = 365 * 24 * 3600 * 1000
    code_lifetime_ms: int = 7 * 24 * 3600 * 1000
    mfa_attempt_lifetime_ms: int = 5 * 60 * 1000
    #: bcrypt cost for new password hashes (tests and the dev default may lower it; 4 is bcrypt's minimum).
    password_rounds: int = 10
    #: Where mail goes: "outbox" keeps it in the store (readable at /emails/outbox); "mailer" hands it to the
    #: host's mailer (SMTP, console).
    mail_delivery: str = "outbox"
    #: How long a worker trusts a project it read (see `auth.ProjectCache`); 0: read it on every request.
    project_cache_ms: int = 1000
    #: Rate limits (identity_proto.ratelimits); off only for a whole process (load tests, other suites).
    rate_limits_enabled: bool = True
    #: Behind a trusted reverse proxy: the header carrying the client's address (its last entry is used, the
    #: one the proxy itself added). Empty: the peer address of the connection.
    trusted_proxy_header: str = ""
    #: OAuth: the AES-256 key provider tokens are sealed with at rest (`identity_proto.provider_tokens`); None: the
    #: public dev key in dev mode, and no provider token stored at all otherwise.
    oauth_token_key: bytes | None = field(default=None, repr=False)
    #: Webhooks. Production: allow endpoint URLs on private, loopback and link-local addresses and local host names
    #: (dev mode always allows them; see `flows.webhooks.check_endpoint_url`).
    webhook_allow_private: bool = False
    #: Retention of webhook events and settled deliveries (`TrimWebhookData`): recorded this long ago at most...
    webhook_retention_ms: int = 72 * 3600 * 1000
    #: ...and the newest this many events per project at most.
    webhook_keep_events: int = 10_000
    #: Seconds a receiver has to answer one webhook POST (Svix: 15).
    webhook_timeout_s: float = 15.0

    @property
    def headers(self) -> HeaderReader:
        """Reads request headers under every accepted prefix (one reader per set of prefixes: it memoises the
        header names it builds)."""
        return _header_reader(self.header_prefixes)

    @property
    def compat(self) -> bool:
        """Compatibility mode (`IDENTITY_COMPAT=stack`): answers as the original's where they differ."""
        return "x-stack-" in self.header_prefixes

    @property
    def known_error_headers(self) -> tuple[str, ...]:
        """Names of the known-error response header, one per prefix."""
        return tuple(f"{prefix}known-error" for prefix in self.header_prefixes)

    @property
    def request_id_headers(self) -> tuple[str, ...]:
        """Names of the request-id response header, one per prefix."""
        return tuple(f"{prefix}request-id" for prefix in self.header_prefixes)


@dataclass(frozen=True, slots=True)
class RequestContext(Generic[BodyT, QueryT, ParamsT]):
    """Everything one endpoint flow may use. Inputs are already validated against the route's models (a flow
    declares them: `ctx: RequestContext[UserCreateBody]`, `RequestContext[None, ListUsersQuery, UserIdParams]`)."""

    request: Request
    now_ms: int
    entropy: Entropy
    request_id: str
    options: ServiceOptions
    auth: Auth | None
    params: ParamsT
    query: QueryT
    body: BodyT
    #: The service's project cache: flows that change a project forget it there.
    projects: ProjectCache | None = None
    #: The route table serving this request (what the OpenAPI document describes).
    routes: tuple[Route, ...] = ()
    #: The guard that the access token's session is live, as the service's precondition checks it (None without an
    #: access token, or on a route that checks its own session): a flow's commit carries this very object, so the
    #: precondition rides inside the commit (`identity_proto.preconditions.guarded`) without a second build.
    live_session: CommitGuard | None = None
    #: The service's memo of verified access tokens: a token this process signs goes in as it is issued, so that the
    #: next request carrying it needs no signature check (`tokens.VerifiedTokenCache.remember`). None: not kept.
    token_cache: VerifiedTokenCache | None = None

    def forget_project(self, project_id: str) -> None:
        """This worker changed or deleted `project_id`: its next request reads it afresh."""
        if self.projects is not None:
            self.projects.forget(project_id)

    @property
    def base_url(self) -> str:
        """The service's public base URL, everything before `/api/v1`: configured, else where the request came in
        (its scheme, Host header and mount point)."""
        return public_base_url(self.request, self.options)

    @property
    def client_address(self) -> str | None:
        """The client's address: from the trusted proxy header when one is configured, else the peer's."""
        return client_address(self.request, self.options)

    @property
    def access_type(self) -> AccessType | None:
        """The caller's access type, or None for an unauthenticated request."""
        return None if self.auth is None else self.auth.access_type

    def resolve_user_id(self, value: str) -> str:
        """A `user_id` input: `me` becomes the signed-in user's id (reference §0.1 step 4)."""
        if value != "me":
            return value
        user_id = self.require_auth().user_id
        if user_id is None:
            raise KnownError(ErrorCode.CANNOT_GET_OWN_USER_WITHOUT_USER)
        return user_id

    def require_auth(self) -> Auth:
        """The caller's `Auth`; routes that allow access types only ever run with one."""
        if self.auth is None:
            raise KnownError(ErrorCode.ACCESS_TYPE_REQUIRED)
        return self.auth


quick_init(RequestContext)  # made per request (identity_proto.quickinit)


def public_base_url(request: Request, options: ServiceOptions) -> str:
    """The service's public base URL for `request` (`RequestContext.base_url`; hosts use it to know which URLs are
    their own, e.g. the mock OAuth provider's): configured, else the request's scheme, Host header and mount point."""
    if options.base_url:
        return options.base_url
    return f"{request.scheme}://{request.header('host') or 'localhost'}{quote(request.root_path)}"


def client_address(request: Request, options: ServiceOptions) -> str | None:
    """The address rate limits count by (see `ServiceOptions.trusted_proxy_header`)."""
    return forwarded_client(
        request.header(options.trusted_proxy_header) if options.trusted_proxy_header else None, request.client
    )


def forwarded_client(forwarded: str | None, peer: str | None) -> str | None:
    """The client's address: the last address of the trusted proxy's header `forwarded` (the one that proxy
    appended) when there is one, else the peer's. Hosts that log before a `Request` exists use it too."""
    if forwarded:
        return forwarded.split(",")[-1].strip() or peer
    return peer


@functools.cache
def _header_reader(prefixes: tuple[str, ...]) -> HeaderReader:
    return HeaderReader(prefixes)
