"""The asyncio OAuth provider client, `AsyncProviderHttpClient` (the ASGI host), and the source of the sync one,
`ProviderHttpClient` (the WSGI host, the fake: `identity_hosting.oauth_client_sync`, which `scripts/generate_sync`
writes from this module). What they do is told in `identity_hosting.oauth_client`; what they share that is no I/O
is in `identity_hosting.oauth_answers`.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import authlib.deprecate  # noqa: F401  (before the integration: see `identity_hosting.oauth_answers`)
import httpx
from joserfc.jwk import KeySet

from identity_hosting.egress_async import AsyncGuardedTransport
from identity_hosting.oauth_answers import (
    _REQUEST_BASE_URL,
    CACHE_TTL_S,
    _api_base,
    _bearer,
    _bitbucket_identity,
    _Cached,
    _discord_identity,
    _endpoints_of,
    _github_identity,
    _json_object,
    _oauth_failure,
    _oidc_identity,
    _spotify_identity,
    _tokens_of,
    _unknown_kid,
    _verified_claims,
    async_mounted_app,
    local_mock_mount,
)
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

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from authlib.integrations.base_client.errors import OAuthError
    from authlib.integrations.httpx_client import AsyncOAuth2Client

__all__ = ["AsyncProviderHttpClient"]


class _AsyncLocalDispatch(httpx.AsyncBaseTransport):
    """The network, except for this service's own mock provider: that is served by `app` in process, handed the
    path as a server would hand it to an application mounted where the service is (`async_mounted_app`)."""

    def __init__(self, app: Any, base_url: str, network: httpx.AsyncBaseTransport) -> None:
        self._network = network
        self._app = app
        self._base_url = base_url
        self._local: dict[str, httpx.AsyncBaseTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        base = _REQUEST_BASE_URL.get() or self._base_url
        mount = local_mock_mount(str(request.url), base) if self._app is not None else None
        if mount is None:
            return await self._network.handle_async_request(request)
        mount = unquote(mount)
        local = self._local.get(mount)
        if local is None:
            local = self._local[mount] = async_mounted_app(self._app, mount)
        return await local.handle_async_request(request)

    async def aclose(self) -> None:
        await self._network.aclose()


class _AsyncForRequest:
    """A client's view for one request: it knows the request's public base URL (its own mock provider)."""

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


class AsyncProviderHttpClient:
    """Performs provider effects for a host (this class: the ASGI host; its sync twin: the WSGI host, the fake)."""

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
        # `network`: how providers are reached (default: HTTP; tests give an `httpx.MockTransport`), always behind
        # the address rule (`identity_hosting.egress`; `allow_private` and `require_https` from the host's mode).
        guarded = AsyncGuardedTransport(allow_private=allow_private, require_https=require_https, network=network)
        dispatch = _AsyncLocalDispatch(local_app, base_url, guarded)
        self._http = httpx.AsyncClient(transport=dispatch, timeout=httpx.Timeout(timeout_s))
        self._timeout = timeout_s
        self._clock = clock
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()  # the sync client's threads share the cache (held for no I/O: never awaited)

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self._http.aclose()

    def for_request(self, request: Request, options: ServiceOptions) -> _AsyncForRequest:
        """This client as one request's flow uses it: URLs under that request's public base URL + `MOCK_OAUTH_PATH`
        are the service's own mock provider, served in process."""
        return _AsyncForRequest(self, request, options)

    async def perform(self, effect: ProviderEffect[object]) -> object:
        """Do `effect` (raises `ProviderFailure` on any provider trouble)."""
        try:
            if isinstance(effect, DiscoverProvider):
                return await self._discover(effect.issuer_url)
            if isinstance(effect, ExchangeProviderCode):
                return await self._exchange(effect)
            if isinstance(effect, RefreshProviderToken):
                return await self._refresh(effect)
            if isinstance(effect, CheckProviderAccessToken):
                return await self._check(effect)
        except httpx.HTTPError as exc:  # connection refused, timeout, a 5xx authlib raised for
            raise ProviderFailure("unavailable", type(exc).__name__) from None
        raise TypeError(f"not a provider effect: {effect!r}")

    async def _get_json(self, url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
        return _json_object(await self._http.get(url, headers=headers))

    async def _cached(self, url: str, *, refresh: bool = False) -> dict[str, Any]:
        now = self._clock()
        with self._lock:
            found = self._cache.get(url)
        if found is not None and not refresh and now - found.fetched_at < CACHE_TTL_S:
            return dict(found.value)
        value = await self._get_json(url)
        with self._lock:
            self._cache[url] = _Cached(value, now)
        return value

    async def _discover(self, issuer_url: str) -> ProviderEndpoints:
        url = issuer_url.rstrip("/") + "/.well-known/openid-configuration"
        return _endpoints_of(issuer_url, await self._cached(url))

    def _oauth(self, spec: ProviderSpec, scope: str) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=spec.client_id,
            client_secret=spec.client_secret,
            token_endpoint_auth_method=spec.token_auth_method,
            scope=scope,
            timeout=self._timeout,
            transport=self._http._transport,  # the same dispatch (in process for the mock)
        )

    async def _exchange(self, effect: ExchangeProviderCode) -> ProviderGrant:
        spec = effect.provider
        # The OAuth client shares our transport and is not closed (closing it would close the transport).
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
            if _unknown_kid(id_token, keys):  # the provider rotated its keys: fetch them again, once
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
            answer.pop("refresh_token")  # authlib keeps the old one when none came back: say "not rotated"
        return _tokens_of(answer, effect.scope, self._clock())

    async def _check(self, effect: CheckProviderAccessToken) -> bool:
        url = effect.provider.endpoints.userinfo_endpoint
        if not url:
            return True  # nothing to ask: the stored expiry is all there is
        response = await self._http.get(url, headers=_bearer(effect.access_token))
        if response.status_code in (401, 403):
            return False
        _json_object(response)
        return True
