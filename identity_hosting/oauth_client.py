"""The hosts' OAuth provider clients: perform the core's provider effects (`identity_proto.effects.oauth_provider`)
over HTTP with authlib (code exchange with the PKCE verifier, refresh) and joserfc (ID tokens verified against the
provider's JWKS: signature, `iss`, `aud` = client id, `exp`, `nonce`). Nothing here parses a JWT or builds an OAuth
request by hand.

- `ProviderHttpClient` (sync: WSGI host, the fake) and `AsyncProviderHttpClient` (the ASGI host); each holds one
  httpx client (closed with the host), a timeout for every call (`IDENTITY_OAUTH_TIMEOUT_SECONDS`), a cache of
  discovery documents and of JWKS (per URL, `CACHE_TTL_S`; a JWKS is fetched again, once, when an ID token names a
  key it does not hold).
- Identity: from the verified ID token when the provider speaks OpenID Connect (its endpoints name a `jwks_uri`;
  the userinfo endpoint fills in a missing e-mail), else from its API: GitHub `/user` + `/user/emails` (the primary
  verified address), Discord `/users/@me`, Bitbucket `/2.0/user` + `/2.0/user/emails`, Spotify `/v1/me`, and the
  OIDC userinfo of Microsoft (and of a provider whose token carries no ID token).
- Failures become `ProviderFailure`: an OAuth `access_denied` -> access_denied; `invalid_grant` at the token
  endpoint -> invalid_grant (for a refresh: invalid_token); connection errors, timeouts, 5xx, answers that are no
  JSON object, ID tokens that fail verification -> unavailable. Tokens are never logged.
- Addresses (SSRF): every URL called (discovery, token, userinfo, JWKS, the provider APIs) follows the address rule
  of the webhook sender (`identity_hosting.egress`: as written, and every resolved address at connect time; global
  unicast only unless `allow_private`), and must be https unless the host is in dev mode (`require_https`). A
  refusal is a connection error: `ProviderFailure("unavailable")`, no request made.
- In-process dispatch: a URL under the service's own mock provider (`MOCK_OAUTH_PATH` below the base URL) is served
  by the host's own app through an httpx WSGI/ASGI transport, so one worker never calls itself over a socket (the
  hosts give their app in dev mode only: production has no mock provider).
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

# authlib 1.6+ announces a future move of its httpx integration (to "httpx2"); the integration is what it documents
# today, and the warning would fail test suites that turn warnings into errors. Importing `authlib.deprecate` installs
# an "always" filter for it, so that module is imported first and the "ignore" below goes in front of that filter.
import authlib.deprecate  # noqa: F401
import httpx
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from identity_hosting.egress import AsyncGuardedTransport, GuardedTransport
from identity_proto.context import ServiceOptions, public_base_url
from identity_proto.effects.oauth_provider import (
    CheckProviderAccessToken,
    DiscoverProvider,
    ExchangeProviderCode,
    ProviderEffect,
    ProviderEndpoints,
    ProviderFailure,
    ProviderGrant,
    ProviderIdentity,
    ProviderSpec,
    ProviderTokens,
    RefreshProviderToken,
)
from identity_proto.http import Request
from identity_proto.oauth import MOCK_OAUTH_PATH

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from authlib.integrations.base_client.errors import OAuthError
    from authlib.integrations.httpx_client import AsyncOAuth2Client, OAuth2Client

__all__ = [
    "CACHE_TTL_S",
    "AsyncProviderHttpClient",
    "ProviderHttpClient",
    "is_local_mock_url",
    "local_mock_mount",
]

logger = logging.getLogger("identity_service.oauth")

#: How long a discovery document or a JWKS is trusted before it is fetched again.
CACHE_TTL_S = 3600.0
#: ID-token algorithms accepted (asymmetric only: a provider's ID token is never verified with the client secret).
_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
#: Leeway for `exp`/`iat` between the provider's clock and ours.
_LEEWAY_S = 60


#: The public base URL of the request being served (set by a client's `for_request` view while it performs an
#: effect): the URLs under it + `MOCK_OAUTH_PATH` are this service's own mock provider.
_REQUEST_BASE_URL: ContextVar[str] = ContextVar("identity_oauth_request_base_url", default="")


def local_mock_mount(url: str, base_url: str) -> str | None:
    """The mount point (the path before `MOCK_OAUTH_PATH`, percent-encoded, "" at the root) when `url` is served by
    the service's own mock provider at `base_url` (same scheme and host, path under its mount point +
    `MOCK_OAUTH_PATH`); None when it is not. Without a base URL only a path under `MOCK_OAUTH_PATH` at the root
    counts."""
    target = urlsplit(url)
    mount = ""
    if base_url:
        base = urlsplit(base_url)
        if (target.scheme, target.netloc.lower()) != (base.scheme, base.netloc.lower()):
            return None
        mount = base.path.rstrip("/")
    return mount if target.path.startswith(mount + MOCK_OAUTH_PATH + "/") else None


def is_local_mock_url(url: str, base_url: str) -> bool:
    """Whether `url` is served by this service's own mock provider (see `local_mock_mount`)."""
    return local_mock_mount(url, base_url) is not None


def _unmounted(request: httpx.Request, mount: str) -> httpx.Request:
    """`request` as a WSGI server hands it to an application mounted at `mount`: the path after the mount point
    (`SCRIPT_NAME` carries the rest)."""
    path = request.url.path[len(mount) :] or "/"
    return httpx.Request(
        request.method,
        request.url.copy_with(path=path),
        headers=request.headers,
        stream=request.stream,
        extensions=request.extensions,
    )


class _LocalDispatch(httpx.BaseTransport):
    """The network, except for this service's own mock provider: that is served by `app` in process (WSGI), handed
    the path as a WSGI server would hand it to an application mounted where the service is."""

    def __init__(self, app: Any, base_url: str, network: httpx.BaseTransport) -> None:
        self._network = network
        self._app = app
        self._base_url = base_url
        self._local: dict[str, httpx.WSGITransport] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        base = _REQUEST_BASE_URL.get() or self._base_url
        mount = local_mock_mount(str(request.url), base) if self._app is not None else None
        if mount is None:
            return self._network.handle_request(request)
        mount = unquote(mount)
        local = self._local.get(mount)
        if local is None:
            local = self._local[mount] = httpx.WSGITransport(app=self._app, script_name=mount)
        return local.handle_request(_unmounted(request, mount) if mount else request)

    def close(self) -> None:
        self._network.close()


class _AsyncLocalDispatch(httpx.AsyncBaseTransport):
    """`_LocalDispatch` for the ASGI host: the mock is served by `app` in process (ASGI: the whole path, and the
    mount point as `root_path`)."""

    def __init__(self, app: Any, base_url: str, network: httpx.AsyncBaseTransport) -> None:
        self._network = network
        self._app = app
        self._base_url = base_url
        self._local: dict[str, httpx.ASGITransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        base = _REQUEST_BASE_URL.get() or self._base_url
        mount = local_mock_mount(str(request.url), base) if self._app is not None else None
        if mount is None:
            return await self._network.handle_async_request(request)
        mount = unquote(mount)
        local = self._local.get(mount)
        if local is None:
            local = self._local[mount] = httpx.ASGITransport(app=self._app, root_path=mount)
        return await local.handle_async_request(request)

    async def aclose(self) -> None:
        await self._network.aclose()


class _ForRequest:
    """A sync client's view for one request: it knows the request's public base URL (its own mock provider)."""

    __slots__ = ("_client", "_options", "_request")

    def __init__(self, client: ProviderHttpClient, request: Request, options: ServiceOptions) -> None:
        self._client = client
        self._request = request
        self._options = options

    def perform(self, effect: ProviderEffect[object]) -> object:
        """Do `effect` for this request."""
        token = _REQUEST_BASE_URL.set(public_base_url(self._request, self._options))
        try:
            return self._client.perform(effect)
        finally:
            _REQUEST_BASE_URL.reset(token)


class _AsyncForRequest:
    """`_ForRequest` of the asyncio client."""

    __slots__ = ("_client", "_options", "_request")

    def __init__(self, client: AsyncProviderHttpClient, request: Request, options: ServiceOptions) -> None:
        self._client = client
        self._request = request
        self._options = options

    async def perform(self, effect: ProviderEffect[object]) -> object:
        """Do `effect` for this request."""
        token = _REQUEST_BASE_URL.set(public_base_url(self._request, self._options))
        try:
            return await self._client.perform(effect)
        finally:
            _REQUEST_BASE_URL.reset(token)


# --------------------------------------------------------------------------------------------------------------
# What both clients share: pure functions of the providers' answers


@dataclass
class _Cached:
    value: Any
    fetched_at: float


def _json_object(response: httpx.Response) -> dict[str, Any]:
    """A provider API's JSON object answer; anything else (5xx, HTML, a list) is `unavailable`."""
    if response.status_code >= 500:
        raise ProviderFailure("unavailable", f"HTTP {response.status_code} from {response.url}")
    try:
        value = response.json()
    except ValueError:
        value = None
    if response.status_code >= 400 or not isinstance(value, dict):
        raise ProviderFailure("unavailable", f"HTTP {response.status_code} (not a JSON object) from {response.url}")
    return value


def _endpoints_of(issuer_url: str, document: dict[str, Any]) -> ProviderEndpoints:
    try:
        return ProviderEndpoints(
            authorization_endpoint=str(document["authorization_endpoint"]),
            token_endpoint=str(document["token_endpoint"]),
            userinfo_endpoint=document.get("userinfo_endpoint"),
            jwks_uri=document.get("jwks_uri"),
            issuer=str(document.get("issuer") or issuer_url),
        )
    except KeyError as exc:
        raise ProviderFailure("unavailable", f"discovery document of {issuer_url} lacks {exc}") from None


def _oauth_failure(exc: OAuthError, *, refreshing: bool) -> ProviderFailure:
    error = getattr(exc, "error", "")
    if error == "access_denied":
        return ProviderFailure("access_denied", error)
    if error == "invalid_grant":
        return ProviderFailure("invalid_token" if refreshing else "invalid_grant", error)
    return ProviderFailure("unavailable", f"OAuth error {error!r}")


def _tokens_of(token: dict[str, Any], asked_scope: str, now_s: float) -> ProviderTokens:
    access = token.get("access_token")
    if not isinstance(access, str) or not access:
        raise ProviderFailure("unavailable", "token response without access_token")
    expires_at: int | None = None
    expires_in = token.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        expires_at = int((now_s + expires_in) * 1000)
    refresh = token.get("refresh_token")
    scope = token.get("scope")
    return ProviderTokens(
        access_token=access,
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_at_millis=expires_at,
        scope=scope if isinstance(scope, str) and scope else asked_scope,
    )


def _unknown_kid(id_token: str, keys: KeySet) -> bool:
    try:
        kid = jws.extract_compact(id_token.encode()).protected.get("kid")
    except (JoseError, ValueError):
        return False
    return kid is not None and all(key.kid != kid for key in keys.keys)


def _verified_claims(
    id_token: str, keys: KeySet, spec: ProviderSpec, nonce: str | None, now_s: float
) -> dict[str, Any]:
    try:
        token = jwt.decode(id_token, keys, algorithms=_ALGORITHMS)
        options: dict[str, Any] = {
            "iss": {"essential": True, "value": spec.endpoints.issuer},
            "aud": {"essential": True, "value": spec.client_id},
            "exp": {"essential": True},
            "sub": {"essential": True},
        }
        if nonce is not None:
            options["nonce"] = {"essential": True, "value": nonce}
        jwt.JWTClaimsRegistry(now=int(now_s), leeway=_LEEWAY_S, **options).validate(token.claims)
    except (JoseError, ValueError) as exc:
        raise ProviderFailure("unavailable", f"ID token of {spec.provider_id} refused: {type(exc).__name__}") from None
    return dict(token.claims)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _oidc_identity(claims: dict[str, Any]) -> ProviderIdentity:
    sub = claims.get("sub")
    if not isinstance(sub, str | int) or isinstance(sub, bool) or sub == "":
        raise ProviderFailure("unavailable", "no subject in the provider's answer")
    return ProviderIdentity(
        account_id=str(sub),
        email=_text(claims.get("email")),
        email_verified=claims.get("email_verified") is True,
        display_name=_text(claims.get("name")),
        profile_image_url=_text(claims.get("picture")),
    )


def _github_identity(user: dict[str, Any], emails: list[Any]) -> ProviderIdentity:
    primary = next((e for e in emails if isinstance(e, dict) and e.get("primary") and e.get("verified")), None)
    if user.get("id") is None:
        raise ProviderFailure("unavailable", "GitHub user without id")
    return ProviderIdentity(
        account_id=str(user["id"]),
        email=_text(primary.get("email")) if primary else _text(user.get("email")),
        email_verified=primary is not None,
        display_name=_text(user.get("name")) or _text(user.get("login")),
        profile_image_url=_text(user.get("avatar_url")),
    )


def _discord_identity(user: dict[str, Any]) -> ProviderIdentity:
    if user.get("id") is None:
        raise ProviderFailure("unavailable", "Discord user without id")
    avatar = _text(user.get("avatar"))
    return ProviderIdentity(
        account_id=str(user["id"]),
        email=_text(user.get("email")),
        email_verified=user.get("verified") is True,
        display_name=_text(user.get("global_name")) or _text(user.get("username")),
        profile_image_url=f"https://cdn.discordapp.com/avatars/{user['id']}/{avatar}.png" if avatar else None,
    )


def _bitbucket_identity(user: dict[str, Any], emails: dict[str, Any]) -> ProviderIdentity:
    values = emails.get("values") if isinstance(emails.get("values"), list) else []
    primary = next((e for e in values or () if isinstance(e, dict) and e.get("is_primary")), None)
    if user.get("uuid") is None:
        raise ProviderFailure("unavailable", "Bitbucket user without uuid")
    avatar = (user.get("links") or {}).get("avatar") or {}
    return ProviderIdentity(
        account_id=str(user["uuid"]),
        email=_text(primary.get("email")) if primary else None,
        email_verified=bool(primary and primary.get("is_confirmed")),
        display_name=_text(user.get("display_name")),
        profile_image_url=_text(avatar.get("href")) if isinstance(avatar, dict) else None,
    )


def _spotify_identity(user: dict[str, Any]) -> ProviderIdentity:
    if user.get("id") is None:
        raise ProviderFailure("unavailable", "Spotify user without id")
    images = user.get("images") if isinstance(user.get("images"), list) else []
    image = images[0] if images and isinstance(images[0], dict) else {}
    return ProviderIdentity(
        account_id=str(user["id"]),
        email=_text(user.get("email")),
        # Spotify does not say whether the address was verified.
        email_verified=False,
        display_name=_text(user.get("display_name")),
        profile_image_url=_text(image.get("url")),
    )


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json"}


def _api_base(spec: ProviderSpec) -> str:
    """Where a provider's API lives: the origin of its userinfo endpoint, with the path up to the known suffix."""
    userinfo = spec.endpoints.userinfo_endpoint or ""
    for suffix in ("/2.0/user", "/users/@me", "/v1/me", "/user"):  # longest first: Bitbucket's ends in /user too
        if userinfo.endswith(suffix):
            return userinfo[: -len(suffix)]
    return userinfo


# --------------------------------------------------------------------------------------------------------------
# The sync client


class ProviderHttpClient:
    """Performs provider effects for sync hosts (WSGI, the fake)."""

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        base_url: str = "",
        local_app: Any = None,
        clock: Callable[[], float] = time.time,
        network: httpx.BaseTransport | None = None,
        allow_private: bool = False,
        require_https: bool = True,
    ) -> None:
        # `network`: how providers are reached (default: HTTP; tests give an `httpx.MockTransport`), always behind
        # the address rule (`identity_hosting.egress`; `allow_private` and `require_https` from the host's mode).
        guarded = GuardedTransport(allow_private=allow_private, require_https=require_https, network=network)
        dispatch = _LocalDispatch(local_app, base_url, guarded)
        self._http = httpx.Client(transport=dispatch, timeout=httpx.Timeout(timeout_s))
        self._timeout = timeout_s
        self._clock = clock
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def for_request(self, request: Request, options: ServiceOptions) -> _ForRequest:
        """This client as one request's flow uses it: URLs under that request's public base URL + `MOCK_OAUTH_PATH`
        are the service's own mock provider, served in process."""
        return _ForRequest(self, request, options)

    def perform(self, effect: ProviderEffect[object]) -> object:
        """Do `effect` (raises `ProviderFailure` on any provider trouble)."""
        try:
            if isinstance(effect, DiscoverProvider):
                return self._discover(effect.issuer_url)
            if isinstance(effect, ExchangeProviderCode):
                return self._exchange(effect)
            if isinstance(effect, RefreshProviderToken):
                return self._refresh(effect)
            if isinstance(effect, CheckProviderAccessToken):
                return self._check(effect)
        except httpx.HTTPError as exc:  # connection refused, timeout, a 5xx authlib raised for
            raise ProviderFailure("unavailable", type(exc).__name__) from None
        raise TypeError(f"not a provider effect: {effect!r}")

    def _get_json(self, url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        return _json_object(self._http.get(url, headers=headers))

    def _cached(self, url: str, *, refresh: bool = False) -> dict[str, Any]:
        now = self._clock()
        with self._lock:
            found = self._cache.get(url)
        if found is not None and not refresh and now - found.fetched_at < CACHE_TTL_S:
            return dict(found.value)
        value = self._get_json(url)
        with self._lock:
            self._cache[url] = _Cached(value, now)
        return value

    def _discover(self, issuer_url: str) -> ProviderEndpoints:
        url = issuer_url.rstrip("/") + "/.well-known/openid-configuration"
        return _endpoints_of(issuer_url, self._cached(url))

    def _oauth(self, spec: ProviderSpec, scope: str) -> OAuth2Client:
        return OAuth2Client(
            client_id=spec.client_id,
            client_secret=spec.client_secret,
            token_endpoint_auth_method=spec.token_auth_method,
            scope=scope,
            timeout=self._timeout,
            transport=self._http._transport,  # the same dispatch (in process for the mock)
        )

    def _exchange(self, effect: ExchangeProviderCode) -> ProviderGrant:
        spec = effect.provider
        # The OAuth client shares our transport and is not closed (closing it would close the transport).
        oauth = self._oauth(spec, effect.scope)
        try:
            token = oauth.fetch_token(
                spec.endpoints.token_endpoint,
                grant_type="authorization_code",
                code=effect.code,
                redirect_uri=effect.redirect_uri,
                code_verifier=effect.code_verifier,
            )
        except OAuthError as exc:
            raise _oauth_failure(exc, refreshing=False) from None
        except ValueError:
            raise ProviderFailure("unavailable", "token response is not a JSON object") from None
        tokens = _tokens_of(dict(token), effect.scope, self._clock())
        return ProviderGrant(tokens, self._identity(spec, dict(token), tokens.access_token, effect.nonce))

    def _identity(self, spec: ProviderSpec, token: dict[str, Any], access: str, nonce: str | None) -> ProviderIdentity:
        endpoints = spec.endpoints
        id_token = token.get("id_token")
        if endpoints.jwks_uri and isinstance(id_token, str):
            keys = KeySet.import_key_set(self._cached(endpoints.jwks_uri))  # type: ignore[arg-type]
            if _unknown_kid(id_token, keys):  # the provider rotated its keys: fetch them again, once
                keys = KeySet.import_key_set(self._cached(endpoints.jwks_uri, refresh=True))  # type: ignore[arg-type]
            claims = _verified_claims(id_token, keys, spec, nonce, self._clock())
            if not claims.get("email") and endpoints.userinfo_endpoint:
                info = self._get_json(endpoints.userinfo_endpoint, _bearer(access))
                if str(info.get("sub")) == str(claims.get("sub")):
                    claims = {**info, **{k: v for k, v in claims.items() if v is not None}}
            return _oidc_identity(claims)
        base = _api_base(spec)
        if spec.type == "github":
            user = self._get_json(f"{base}/user", _bearer(access))
            emails = self._http.get(f"{base}/user/emails", headers=_bearer(access))
            listed = emails.json() if emails.status_code == 200 else []
            return _github_identity(user, listed if isinstance(listed, list) else [])
        if spec.type == "discord":
            return _discord_identity(self._get_json(f"{base}/users/@me", _bearer(access)))
        if spec.type == "bitbucket":
            user = self._get_json(f"{base}/2.0/user", _bearer(access))
            return _bitbucket_identity(user, self._get_json(f"{base}/2.0/user/emails", _bearer(access)))
        if spec.type == "spotify":
            return _spotify_identity(self._get_json(f"{base}/v1/me", _bearer(access)))
        if not endpoints.userinfo_endpoint:
            raise ProviderFailure("unavailable", f"{spec.provider_id}: no way to learn who signed in")
        return _oidc_identity(self._get_json(endpoints.userinfo_endpoint, _bearer(access)))

    def _refresh(self, effect: RefreshProviderToken) -> ProviderTokens:
        spec = effect.provider
        oauth = self._oauth(spec, effect.scope)
        try:
            token = oauth.refresh_token(spec.endpoints.token_endpoint, refresh_token=effect.refresh_token)
        except OAuthError as exc:
            raise _oauth_failure(exc, refreshing=True) from None
        except ValueError:
            raise ProviderFailure("unavailable", "token response is not a JSON object") from None
        answer = dict(token)
        if answer.get("refresh_token") == effect.refresh_token:
            answer.pop("refresh_token")  # authlib keeps the old one when none came back: say "not rotated"
        return _tokens_of(answer, effect.scope, self._clock())

    def _check(self, effect: CheckProviderAccessToken) -> bool:
        url = effect.provider.endpoints.userinfo_endpoint
        if not url:
            return True  # nothing to ask: the stored expiry is all there is
        response = self._http.get(url, headers=_bearer(effect.access_token))
        if response.status_code in (401, 403):
            return False
        _json_object(response)
        return True


# --------------------------------------------------------------------------------------------------------------
# The asyncio client


class AsyncProviderHttpClient:
    """Performs provider effects for the ASGI host (the same behaviour as `ProviderHttpClient`)."""

    def __init__(
        self,
        *,
        timeout_s: float = 10.0,
        base_url: str = "",
        local_app: Any = None,
        clock: Callable[[], float] = time.time,
        network: httpx.AsyncBaseTransport | None = None,
        allow_private: bool = False,
        require_https: bool = True,
    ) -> None:
        guarded = AsyncGuardedTransport(allow_private=allow_private, require_https=require_https, network=network)
        dispatch = _AsyncLocalDispatch(local_app, base_url, guarded)
        self._http = httpx.AsyncClient(transport=dispatch, timeout=httpx.Timeout(timeout_s))
        self._timeout = timeout_s
        self._clock = clock
        self._cache: dict[str, _Cached] = {}

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    def for_request(self, request: Request, options: ServiceOptions) -> _AsyncForRequest:
        """This client as one request's flow uses it (see `ProviderHttpClient.for_request`)."""
        return _AsyncForRequest(self, request, options)

    async def perform(self, effect: ProviderEffect[object]) -> object:
        """Do `effect` (raises `ProviderFailure` on any provider trouble)."""
        try:
            if isinstance(effect, DiscoverProvider):
                url = effect.issuer_url.rstrip("/") + "/.well-known/openid-configuration"
                return _endpoints_of(effect.issuer_url, await self._cached(url))
            if isinstance(effect, ExchangeProviderCode):
                return await self._exchange(effect)
            if isinstance(effect, RefreshProviderToken):
                return await self._refresh(effect)
            if isinstance(effect, CheckProviderAccessToken):
                return await self._check(effect)
        except httpx.HTTPError as exc:
            raise ProviderFailure("unavailable", type(exc).__name__) from None
        raise TypeError(f"not a provider effect: {effect!r}")

    async def _get_json(self, url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        return _json_object(await self._http.get(url, headers=headers))

    async def _cached(self, url: str, *, refresh: bool = False) -> dict[str, Any]:
        now = self._clock()
        found = self._cache.get(url)
        if found is not None and not refresh and now - found.fetched_at < CACHE_TTL_S:
            return dict(found.value)
        value = await self._get_json(url)
        self._cache[url] = _Cached(value, now)
        return value

    def _oauth(self, spec: ProviderSpec, scope: str) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=spec.client_id,
            client_secret=spec.client_secret,
            token_endpoint_auth_method=spec.token_auth_method,
            scope=scope,
            timeout=self._timeout,
            transport=self._http._transport,
        )

    async def _exchange(self, effect: ExchangeProviderCode) -> ProviderGrant:
        spec = effect.provider
        oauth = self._oauth(spec, effect.scope)
        try:
            token = await oauth.fetch_token(
                spec.endpoints.token_endpoint,
                grant_type="authorization_code",
                code=effect.code,
                redirect_uri=effect.redirect_uri,
                code_verifier=effect.code_verifier,
            )
        except OAuthError as exc:
            raise _oauth_failure(exc, refreshing=False) from None
        except ValueError:
            raise ProviderFailure("unavailable", "token response is not a JSON object") from None
        tokens = _tokens_of(dict(token), effect.scope, self._clock())
        identity = await self._identity(spec, dict(token), tokens.access_token, effect.nonce)
        return ProviderGrant(tokens, identity)

    async def _identity(
        self, spec: ProviderSpec, token: dict[str, Any], access: str, nonce: str | None
    ) -> ProviderIdentity:
        endpoints = spec.endpoints
        id_token = token.get("id_token")
        if endpoints.jwks_uri and isinstance(id_token, str):
            keys = KeySet.import_key_set(await self._cached(endpoints.jwks_uri))  # type: ignore[arg-type]
            if _unknown_kid(id_token, keys):
                keys = KeySet.import_key_set(await self._cached(endpoints.jwks_uri, refresh=True))  # type: ignore[arg-type]
            claims = _verified_claims(id_token, keys, spec, nonce, self._clock())
            if not claims.get("email") and endpoints.userinfo_endpoint:
                info = await self._get_json(endpoints.userinfo_endpoint, _bearer(access))
                if str(info.get("sub")) == str(claims.get("sub")):
                    claims = {**info, **{k: v for k, v in claims.items() if v is not None}}
            return _oidc_identity(claims)
        base = _api_base(spec)
        if spec.type == "github":
            user = await self._get_json(f"{base}/user", _bearer(access))
            emails = await self._http.get(f"{base}/user/emails", headers=_bearer(access))
            listed = emails.json() if emails.status_code == 200 else []
            return _github_identity(user, listed if isinstance(listed, list) else [])
        if spec.type == "discord":
            return _discord_identity(await self._get_json(f"{base}/users/@me", _bearer(access)))
        if spec.type == "bitbucket":
            user = await self._get_json(f"{base}/2.0/user", _bearer(access))
            return _bitbucket_identity(user, await self._get_json(f"{base}/2.0/user/emails", _bearer(access)))
        if spec.type == "spotify":
            return _spotify_identity(await self._get_json(f"{base}/v1/me", _bearer(access)))
        if not endpoints.userinfo_endpoint:
            raise ProviderFailure("unavailable", f"{spec.provider_id}: no way to learn who signed in")
        return _oidc_identity(await self._get_json(endpoints.userinfo_endpoint, _bearer(access)))

    async def _refresh(self, effect: RefreshProviderToken) -> ProviderTokens:
        spec = effect.provider
        oauth = self._oauth(spec, effect.scope)
        try:
            token = await oauth.refresh_token(spec.endpoints.token_endpoint, refresh_token=effect.refresh_token)
        except OAuthError as exc:
            raise _oauth_failure(exc, refreshing=True) from None
        except ValueError:
            raise ProviderFailure("unavailable", "token response is not a JSON object") from None
        answer = dict(token)
        if answer.get("refresh_token") == effect.refresh_token:
            answer.pop("refresh_token")
        return _tokens_of(answer, effect.scope, self._clock())

    async def _check(self, effect: CheckProviderAccessToken) -> bool:
        url = effect.provider.endpoints.userinfo_endpoint
        if not url:
            return True
        response = await self._http.get(url, headers=_bearer(effect.access_token))
        if response.status_code in (401, 403):
            return False
        _json_object(response)
        return True
