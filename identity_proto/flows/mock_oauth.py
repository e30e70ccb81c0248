"""The mock OAuth provider: a small OpenID Connect provider served by the service itself under `MOCK_OAUTH_PATH`,
in dev/test mode only (a production service has none of these routes). It stands in for any provider type: a
project's provider of type `mock`, or of any type with client id `MOCK` (`identity_proto.oauth.uses_mock`).

- `GET /.well-known/openid-configuration`: the discovery document (its endpoints are `oauth.mock_endpoints`).
- `GET /authorize`: checks `client_id`, `redirect_uri`, `response_type=code` and the PKCE parameters, then shows a
  login page: any e-mail, an optional display name, whether the provider calls the e-mail verified (a test of an
  unverified address), "Sign in" or "Cancel". Posting it (`POST /authorize`) answers 303 to
  `redirect_uri?code=...&state=...`, or `?error=access_denied&state=...` for Cancel.
- `POST /token`: `authorization_code` (single-use codes bound to the client id and redirect URI; PKCE S256 or plain
  checked when the authorize request had a challenge) and `refresh_token` (the refresh token is not rotated); the
  client authenticates with `client_secret_post` or `client_secret_basic`, any id and secret.
- `GET /userinfo` (Bearer), `GET /jwks`.
- Test hooks: `POST /hooks/fail-next {"kind", "client_id"?}` (the next token request fails: `access_denied` and
  `invalid_grant` as OAuth errors, `unavailable` as a 503), `POST /hooks/revoke {"token"}`.

Choices (the original's mock is `oidc-provider`, reference part 2 §7.7): `sub` is the e-mail, as there, so a linked
account's `account_id` is the address; the ID token (only when `openid` was asked for) carries `email`,
`email_verified` (true unless the login form said otherwise), `name` when one was given, `nonce`, `iss`, `aud`,
`iat`, `exp`; it is signed ES256, or RS256 with `alg=RS256` on the authorize request. The keys are generated once
and kept in the store, so every worker signs with the same ones. Codes live 5 minutes, access tokens 1 hour, refresh
tokens 30 days.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

from identity_proto.context import RequestContext
from identity_proto.effects import (
    Flow,
    GenerateMockSigningKeys,
    MockAuthorization,
    MockFailureKind,
    MockSigningKeys,
    MockToken,
    ShortLived,
    Together,
    perform,
)
from identity_proto.effects.oauth import TakeShortLived, put_record, record_put, take_record
from identity_proto.http import Response
from identity_proto.oauth import mock_endpoints, mock_issuer
from identity_proto.render import BASE_HEADERS, json_response, text_response
from identity_proto.tokens import hash_secret

if TYPE_CHECKING:
    from identity_proto.schemas import MockAuthorizeParams, MockFailNextBody, MockRevokeBody, MockTokenForm

__all__ = [
    "ACCESS_TOKEN_LIFETIME_MS",
    "CODE_LIFETIME_MS",
    "REFRESH_TOKEN_LIFETIME_MS",
    "authorize_page",
    "discovery",
    "fail_next",
    "jwks",
    "login",
    "revoke",
    "signing_keys",
    "take_failure",
    "token",
    "userinfo",
]

CODE_LIFETIME_MS = 5 * 60 * 1000
ACCESS_TOKEN_LIFETIME_MS = 3600 * 1000
REFRESH_TOKEN_LIFETIME_MS = 30 * 24 * 3600 * 1000
#: A failure hook nobody used is dropped after this.
HOOK_LIFETIME_MS = 10 * 60 * 1000
_ALGS = ("ES256", "RS256")
_FAILURES = ("access_denied", "invalid_grant", "unavailable")


@dataclass(frozen=True, slots=True)
class MockFailure:
    """A failure hook (`fail_next`), kept by client id ("" for any client)."""

    kind: MockFailureKind
    expires_at_millis: int


def discovery(ctx: RequestContext) -> Flow[Response]:
    """GET <mock>/.well-known/openid-configuration."""
    endpoints = mock_endpoints(ctx.base_url)
    return json_response(
        200,
        {
            "issuer": endpoints.issuer,
            "authorization_endpoint": endpoints.authorization_endpoint,
            "token_endpoint": endpoints.token_endpoint,
            "userinfo_endpoint": endpoints.userinfo_endpoint,
            "jwks_uri": endpoints.jwks_uri,
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": list(_ALGS),
            "scopes_supported": ["openid", "email", "profile", "offline_access"],
            "claims_supported": ["sub", "email", "email_verified", "name", "nonce"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            "code_challenge_methods_supported": ["S256", "plain"],
        },
    )
    yield  # pragma: no cover (a flow: a generator, though it needs no effect)


# --------------------------------------------------------------------------------------------------------------
# Authorize: the login page and its form


def _authorize_problem(params: MockAuthorizeParams) -> tuple[str, bool] | None:
    """What is wrong with an authorize request, and whether it may be told to `redirect_uri` (RFC 6749 §4.1.2.1:
    not when the client id or the redirect URI itself is bad)."""
    if not params.client_id:
        return "client_id is required", False
    split = urlsplit(params.redirect_uri)
    if split.scheme not in ("http", "https") or not split.netloc or split.fragment:
        return "redirect_uri must be an absolute http(s) URL without a fragment", False
    if params.response_type != "code":
        return "unsupported_response_type", True
    if params.code_challenge_method not in (None, "S256", "plain") or (
        params.code_challenge_method is not None and not params.code_challenge
    ):
        return "invalid_request", True
    if params.alg not in _ALGS:
        return "invalid_request", True
    return None


def _with_query(url: str, values: dict[str, str | None]) -> str:
    split = urlsplit(url)
    query = parse_qsl(split.query, keep_blank_values=True)
    query += [(name, value) for name, value in values.items() if value is not None]
    return urlunsplit((split.scheme, split.netloc, split.path, urlencode(query), ""))


def _redirect(location: str) -> Response:
    return Response(303, (("location", location), *BASE_HEADERS))


def _refused(params: MockAuthorizeParams, problem: tuple[str, bool]) -> Response:
    message, to_client = problem
    if to_client:
        return _redirect(_with_query(params.redirect_uri, {"error": message, "state": params.state}))
    return text_response(400, f"Mock OAuth provider: {message}.")


_HIDDEN = ("client_id", "redirect_uri", "response_type", "state", "scope", "nonce", "code_challenge",
           "code_challenge_method", "alg")  # fmt: skip


def _page(ctx: RequestContext, params: MockAuthorizeParams, status: int = 200, error: str = "") -> Response:
    esc = html.escape
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{esc(value)}">'
        for name in _HIDDEN
        if (value := getattr(params, name)) is not None
    )
    notice = f'<p class="error">{esc(error)}</p>' if error else ""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mock OAuth sign-in</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: sans-serif; max-width: 24rem; margin: 3rem auto">
<h1>Mock OAuth provider</h1>
<p>Signing in to <b>{esc(params.client_id)}</b>. Any e-mail address works; no password (dev/test mode only).</p>
{notice}<form method="post" action="{esc(mock_issuer(ctx.base_url))}/authorize">{hidden}
<p><label>E-mail<br><input type="email" name="email" value="{esc(params.email or "")}" autofocus></label></p>
<p><label>Display name (optional)<br><input type="text" name="display_name"
value="{esc(params.display_name or "")}"></label></p>
<p><label>The provider says the e-mail is<br><select name="email_verified">
<option value="true">verified</option><option value="false">not verified</option></select></label></p>
<p><button type="submit" name="action" value="sign_in">Sign in</button>
<button type="submit" name="action" value="cancel" formnovalidate>Cancel</button></p>
</form></body></html>
"""
    headers = (("content-type", "text/html; charset=utf-8"), *BASE_HEADERS)
    return Response(status, headers, body.encode())


def authorize_page(ctx: RequestContext[None, MockAuthorizeParams]) -> Flow[Response]:
    """GET <mock>/authorize: the login page (or the request's refusal)."""
    params: MockAuthorizeParams = ctx.query
    problem = _authorize_problem(params)
    return _refused(params, problem) if problem else _page(ctx, params)
    yield  # pragma: no cover


def login(ctx: RequestContext[MockAuthorizeParams]) -> Flow[Response]:
    """POST <mock>/authorize: the login form. Cancel: back with `error=access_denied`; else a code for the
    e-mail given (any address: it only has to look like one)."""
    params: MockAuthorizeParams = ctx.body
    problem = _authorize_problem(params)
    if problem:
        return _refused(params, problem)
    if params.action == "cancel":
        return _redirect(_with_query(params.redirect_uri, {"error": "access_denied", "state": params.state}))
    email = (params.email or "").strip()
    if "@" not in email or len(email) > 254:
        return _page(ctx, params, 400, "Enter an e-mail address.")
    code = _secret(ctx)
    authorization = MockAuthorization(
        client_id=params.client_id,
        redirect_uri=params.redirect_uri,
        scope=params.scope,
        email=email,
        display_name=(params.display_name or "").strip() or None,
        code_challenge=params.code_challenge,
        code_challenge_method=(params.code_challenge_method or "plain") if params.code_challenge else None,
        nonce=params.nonce,
        alg=params.alg,
        expires_at_millis=ctx.now_ms + CODE_LIFETIME_MS,
        email_verified=params.email_verified != "false",
    )
    yield from put_record(ShortLived.MOCK_CODE, hash_secret(code), authorization, ctx.now_ms)
    return _redirect(_with_query(params.redirect_uri, {"code": code, "state": params.state}))


def _secret(ctx: RequestContext) -> str:
    return base64.urlsafe_b64encode(ctx.entropy.token_bytes(32)).rstrip(b"=").decode()


# --------------------------------------------------------------------------------------------------------------
# Token


def _oauth_error(error: str, description: str, status: int = 400) -> Response:
    return json_response(status, {"error": error, "error_description": description})


def _client_id(ctx: RequestContext, form: MockTokenForm) -> str | None:
    """client_secret_basic (the Authorization header) or client_secret_post (the form); any secret is accepted."""
    header = ctx.request.header("authorization") or ""
    if header[:6].lower() == "basic ":
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
        except ValueError:
            return None
        from urllib.parse import unquote_plus

        return unquote_plus(decoded.partition(":")[0]) or None
    return form.client_id or None


def _pkce_matches(authorization: MockAuthorization, verifier: str | None) -> bool:
    if authorization.code_challenge is None:
        return True
    if not verifier:
        return False
    if authorization.code_challenge_method == "S256":
        digest = hashlib.sha256(verifier.encode()).digest()
        computed = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    else:
        computed = verifier
    return hmac.compare_digest(computed.encode(), authorization.code_challenge.encode())


def token(ctx: RequestContext[MockTokenForm]) -> Flow[Response]:
    """POST <mock>/token."""
    form: MockTokenForm = ctx.body
    client_id = _client_id(ctx, form)
    if client_id is None:
        return _oauth_error("invalid_client", "client authentication failed")
    if form.grant_type not in ("authorization_code", "refresh_token"):
        return _oauth_error("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
    failure = yield from take_failure(client_id, ctx.now_ms)
    if failure == "unavailable":
        return text_response(503, "Mock OAuth provider: temporarily unavailable (test hook).")
    if failure is not None:
        return _oauth_error(failure, "refused by a test hook")
    if form.grant_type == "refresh_token":
        return (yield from _refresh(ctx, form, client_id))
    # A code is spent by its first presentation, whatever is then judged of it.
    authorization = yield from take_record(MockAuthorization, ShortLived.MOCK_CODE, hash_secret(form.code or ""))
    if (
        authorization is None
        or authorization.expires_at_millis <= ctx.now_ms
        or authorization.client_id != client_id
        or authorization.redirect_uri != (form.redirect_uri or "")
        or not _pkce_matches(authorization, form.code_verifier)
    ):
        return _oauth_error("invalid_grant", "the code is invalid, expired, used, or was issued to another request")
    access, refresh = _secret(ctx), _secret(ctx)
    fields: dict[str, Any] = {
        "client_id": client_id,
        "scope": authorization.scope,
        "email": authorization.email,
        "display_name": authorization.display_name,
        "alg": authorization.alg,
        "email_verified": authorization.email_verified,
    }
    access_record = MockToken("access", **fields, expires_at_millis=ctx.now_ms + ACCESS_TOKEN_LIFETIME_MS)
    refresh_record = MockToken("refresh", **fields, expires_at_millis=ctx.now_ms + REFRESH_TOKEN_LIFETIME_MS)
    yield from _save_tokens(ctx, (access, access_record), (refresh, refresh_record))
    answer: dict[str, Any] = {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_LIFETIME_MS // 1000,
        "refresh_token": refresh,
        "scope": authorization.scope,
    }
    if "openid" in authorization.scope.split():
        keys = yield from signing_keys()
        answer["id_token"] = _id_token(ctx, keys, authorization, client_id)
    return json_response(200, answer, (("pragma", "no-cache"),))


def _refresh(ctx: RequestContext, form: MockTokenForm, client_id: str) -> Flow[Response]:
    stored = yield from _load_token(form.refresh_token or "")
    if (
        stored is None
        or stored.kind != "refresh"
        or stored.expires_at_millis <= ctx.now_ms
        or stored.client_id != client_id
    ):
        return _oauth_error("invalid_grant", "the refresh token is invalid, expired or revoked")
    scope = stored.scope
    if form.scope:
        asked = form.scope.split()
        if not set(asked) <= set(stored.scope.split()):
            return _oauth_error("invalid_scope", "the refresh token was not granted these scopes")
        scope = " ".join(asked)
    access = _secret(ctx)
    record = MockToken(
        "access",
        client_id,
        scope,
        stored.email,
        stored.display_name,
        stored.alg,
        ctx.now_ms + ACCESS_TOKEN_LIFETIME_MS,
        stored.email_verified,
    )
    yield from _save_tokens(ctx, (access, record))
    answer = {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_TOKEN_LIFETIME_MS // 1000,
        "scope": scope,
    }
    return json_response(200, answer, (("pragma", "no-cache"),))


def take_failure(client_id: str, now_ms: int) -> Flow[MockFailureKind | None]:
    """Take the failure hook of `client_id`, else the one of any client: the kind of the first not expired."""
    for key in (client_id, ""):
        failure = yield from take_record(MockFailure, ShortLived.MOCK_FAILURE, key)
        if failure is not None and failure.expires_at_millis > now_ms:
            return failure.kind
    return None


def _save_tokens(ctx: RequestContext, *tokens: tuple[str, MockToken]) -> Flow[None]:
    puts = (record_put(ShortLived.MOCK_TOKEN, hash_secret(secret), record, ctx.now_ms) for secret, record in tokens)
    yield from perform(Together(tuple(puts)))


def _load_token(secret: str) -> Flow[MockToken | None]:
    return (yield from take_record(MockToken, ShortLived.MOCK_TOKEN, hash_secret(secret), keep=True))


def signing_keys() -> Flow[MockSigningKeys]:
    """The stored keys; the first request generates them, and of concurrent first ones, the first kept wins."""
    keys = yield from take_record(MockSigningKeys, ShortLived.MOCK_KEYS, "", keep=True)
    if keys is None:
        fresh = yield from perform(GenerateMockSigningKeys())
        if not (yield from put_record(ShortLived.MOCK_KEYS, "", fresh, 0, only_if_absent=True)):
            keys = yield from take_record(MockSigningKeys, ShortLived.MOCK_KEYS, "", keep=True)
        keys = keys or fresh
    return keys


def _id_token(ctx: RequestContext, keys: MockSigningKeys, authorization: MockAuthorization, client_id: str) -> str:
    from joserfc import jwt
    from joserfc.jwk import ECKey, RSAKey

    jwk = orjson.loads(keys.rs256 if authorization.alg == "RS256" else keys.es256)
    key = RSAKey.import_key(jwk) if authorization.alg == "RS256" else ECKey.import_key(jwk)
    now_s = ctx.now_ms // 1000
    claims: dict[str, Any] = {
        "iss": mock_issuer(ctx.base_url),
        "sub": authorization.email,
        "aud": client_id,
        "iat": now_s,
        "exp": now_s + ACCESS_TOKEN_LIFETIME_MS // 1000,
        "email": authorization.email,
        "email_verified": authorization.email_verified,
    }
    if authorization.display_name:
        claims["name"] = authorization.display_name
    if authorization.nonce is not None:
        claims["nonce"] = authorization.nonce
    return jwt.encode({"alg": authorization.alg, "kid": jwk["kid"]}, claims, key)


# --------------------------------------------------------------------------------------------------------------
token.oauth_errors = (400, 401)  # type: ignore[attr-defined]  # for the OpenAPI document (`openapi._operation`)


# Userinfo, JWKS


def userinfo(ctx: RequestContext) -> Flow[Response]:
    """GET <mock>/userinfo with `Authorization: Bearer <access token>`."""
    header = ctx.request.header("authorization") or ""
    bearer = header[7:].strip() if header[:7].lower() == "bearer " else ""
    stored = (yield from _load_token(bearer)) if bearer else None
    if stored is None or stored.kind != "access" or stored.expires_at_millis <= ctx.now_ms:
        challenge = ("www-authenticate", 'Bearer error="invalid_token"')
        return json_response(401, {"error": "invalid_token", "error_description": "invalid access token"}, (challenge,))
    claims: dict[str, Any] = {"sub": stored.email, "email": stored.email, "email_verified": stored.email_verified}
    if stored.display_name:
        claims["name"] = stored.display_name
    return json_response(200, claims)


userinfo.oauth_errors = (401,)  # type: ignore[attr-defined]


def jwks(ctx: RequestContext) -> Flow[Response]:
    """GET <mock>/jwks: the public halves of both signing keys."""
    keys = yield from signing_keys()
    public = []
    for text in (keys.es256, keys.rs256):
        jwk = orjson.loads(text)
        public.append({name: value for name, value in jwk.items() if name not in ("d", "p", "q", "dp", "dq", "qi")})
    return json_response(200, {"keys": public})


# --------------------------------------------------------------------------------------------------------------
# Test hooks


def fail_next(ctx: RequestContext[MockFailNextBody]) -> Flow[Response]:
    """POST <mock>/hooks/fail-next {"kind", "client_id"?}: the next token request (of that client, else of any)
    fails as `kind` says."""
    body: MockFailNextBody = ctx.body
    if body.kind not in _FAILURES:
        return text_response(400, f"kind must be one of: {', '.join(_FAILURES)}")
    kind: Any = body.kind
    failure = MockFailure(kind, ctx.now_ms + HOOK_LIFETIME_MS)
    yield from put_record(ShortLived.MOCK_FAILURE, body.client_id or "", failure, ctx.now_ms)
    return json_response(200, {"kind": body.kind, "client_id": body.client_id})


def revoke(ctx: RequestContext[MockRevokeBody]) -> Flow[Response]:
    """POST <mock>/hooks/revoke {"token"}: the access or refresh token no longer works."""
    body: MockRevokeBody = ctx.body
    revoked = (yield from perform(TakeShortLived(ShortLived.MOCK_TOKEN, hash_secret(body.token)))) is not None
    return json_response(200, {"revoked": revoked})
