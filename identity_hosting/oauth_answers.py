"""What both OAuth provider clients (`identity_hosting.oauth_client`) share: pure functions of the providers'
answers (tokens, ID-token verification, each provider's identity), where the service's own mock provider lives, and
the one thing the two clients do differently, a hand-written pair: `mounted_app` / `async_mounted_app` serve that
mock in process (WSGI: handed the path after the mount point; ASGI: the whole path, the mount point as `root_path`).
"""

from __future__ import annotations

import logging
import warnings
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# authlib 1.6+ announces a future move of its httpx integration (to "httpx2"); the integration is what it documents
# today, and the warning would fail test suites that turn warnings into errors. Importing `authlib.deprecate` installs
# an "always" filter for it, so that module is imported first and the "ignore" below goes in front of that filter.
import authlib.deprecate  # noqa: F401
import httpx
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from identity_proto.effects.oauth_provider import (
    ProviderEndpoints,
    ProviderFailure,
    ProviderIdentity,
    ProviderSpec,
    ProviderTokens,
)
from identity_proto.oauth import MOCK_OAUTH_PATH

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from authlib.integrations.base_client.errors import OAuthError


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


class _MountedWSGI(httpx.BaseTransport):
    """A WSGI app as a transport, handed the path as a WSGI server would hand it to an application mounted at
    `mount`."""

    def __init__(self, app: Any, mount: str) -> None:
        self._mount = mount
        self._wsgi = httpx.WSGITransport(app=app, script_name=mount)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self._wsgi.handle_request(_unmounted(request, self._mount) if self._mount else request)


def mounted_app(app: Any, mount: str) -> httpx.BaseTransport:
    """The sync client's in-process mock provider: `app` (WSGI) mounted at `mount` (percent-decoded)."""
    return _MountedWSGI(app, mount)


def async_mounted_app(app: Any, mount: str) -> httpx.AsyncBaseTransport:
    """The asyncio client's in-process mock provider: `app` (ASGI) mounted at `mount` (the whole path, and the mount
    point as `root_path`)."""
    return httpx.ASGITransport(app=app, root_path=mount)


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
