"""OAuth sign-in with a provider (reference part 2 §7.2-7.5): authorize, the provider's callback, and the
authorization-code grant of the token endpoint.

Two OAuth flows nest. The *outer* one is the app's with us (its redirect URI, state and PKCE challenge; our code,
exchanged at `POST /auth/oauth/token`); the *inner* one is ours with the provider (our redirect URI
`<base>/api/v1/auth/oauth/callback/<provider_id>`, our own state, PKCE verifier and OIDC nonce). The authorize
request is kept 10 minutes under the SHA-256 of the inner state (`ShortLived.OAUTH_STATE`), taken once by the
callback; the outer code is kept 5 minutes under its SHA-256 (`ShortLived.OUTER_CODE`), consumed once by the token
exchange.

Who acts on a sign-in (a departure from the original, which does it all at the callback): the callback only
*checks* who signed in at the provider against the project (`_resolve_user(commit=False)`: the refusals of reference
§7.4 still go back to the app as error redirects), and keeps the provider's answer with the outer code, its tokens
sealed. Creating the user, linking the account (`type=link`), upgrading the anonymous user of `?token=`, and
storing the provider's tokens happen at `POST /auth/oauth/token` once the PKCE verifier matches. The callback cannot
tell whose browser came back: in json mode (the SDK's) no cookie binds the flow to the browser that started it, so
acting there would let anyone who starts a link or an anonymous sign-in with their own token and sends the
provider URL to a victim get the victim's provider account (and sign-in), provider tokens or verified address. The
verifier stays with the party that started the flow and the code goes to the browser that came back; only when
they are the same party does anything change. The official SDK exchanges every code with its verifier (json and
redirect mode alike), so its flows work unchanged.

Talking to the provider is an effect (`effects.oauth_provider`); its failures map as that module says. From the
callback's step 3 on, known errors are redirected to the app (`_redirect_or_raise`), as the original does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from email.utils import formatdate
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from identity_proto.context import RequestContext
from identity_proto.effects import (
    Flow,
    ListContactChannels,
    LoadProject,
    LoadSession,
    LoadUser,
    UpgradeRefusal,
    find_user_by_email,
    perform,
)
from identity_proto.effects.commit import CommitConflict, IndexIs
from identity_proto.effects.contact_channels import auth_address_verified
from identity_proto.effects.oauth import (
    OAuthState,
    OuterCode,
    ShortLived,
    find_user_by_oauth_account,
    put_record,
    take_record,
)
from identity_proto.effects.oauth_provider import (
    DiscoverProvider,
    ExchangeProviderCode,
    ProviderFailure,
    ProviderGrant,
    ProviderIdentity,
    ProviderSpec,
)
from identity_proto.errors import ErrorCode, KnownError, PlainError
from identity_proto.flows import sessions
from identity_proto.flows.anonymous import Anonymous, read_anonymous, upgrade_anonymous_user
from identity_proto.flows.oauth_accounts import account_claims, commit_accounts, save_provider_tokens, sign_in_keys
from identity_proto.flows.otp import callback_is_trusted
from identity_proto.flows.sessions import PUBLIC_CLIENT_SECRET, start_session
from identity_proto.flows.signin import NewUser, commit_new_user, require_second_factor, sign_up_parts
from identity_proto.http import Response
from identity_proto.oauth import MOCK_CLIENT_ID, PROVIDER_TYPES, spec_for, uses_mock
from identity_proto.provider_tokens import SealedTokens, seal, token_key, unseal
from identity_proto.ratelimits import address_bucket, check_under_limit, count_event, rule_for
from identity_proto.records import OAuthAccount, OAuthProviderConfig, Project, User
from identity_proto.render import dump_json, json_response
from identity_proto.tokens import access_token_key, new_uuid, secret_matches, unverified_claims
from identity_proto.users import normalize_email

if TYPE_CHECKING:
    from identity_proto.schemas import (
        CrossDomainAuthorizeBody,
        OAuthAuthorizeQuery,
        OAuthCallbackForm,
        OAuthCallbackInput,
        OAuthProviderIdParams,
        OAuthTokenGrantBody,
    )

__all__ = ["authorize", "callback", "cross_domain_authorize", "oauth_token", "store_oauth_user"]

#: reference §7.2: the authorize request (and the inner cookie) live 10 minutes; §7.5: an outer code 5.
STATE_LIFETIME_MS = 10 * 60 * 1000
OUTER_CODE_LIFETIME_MS = 5 * 60 * 1000
COOKIE_PREFIX = "stack-oauth-inner-"
#: The only outer scope there is (the original's `enabledScopes`).
OUTER_SCOPE = "legacy"
#: How often a write of a user's accounts is retried when another write changed them meanwhile.
_ACCOUNT_WRITE_ATTEMPTS = 4

_INVALID_STATE = "Invalid OAuth state. Please try signing in again."
_NO_COOKIE = (
    "Inner OAuth cookie not found. This is likely because you refreshed the page during the OAuth sign in process. "
    "Please try signing in again"
)
_INVALID_GRANT = "Inner OAuth callback failed due to invalid grant. Please try again."
_INVALID_SCOPE = "Invalid scope requested. Please check the scopes you are requesting."
_LINK_NEEDS_TOKEN = "?token= query parameter is required for link type"  # noqa: S105 (a message)
_TOKEN_OF_OTHER_PROJECT = "The access token is not valid for this project"  # noqa: S105 (a message)
_HANDOFF_NO_SESSION = "Cross-domain auth handoff requires a refresh-token-bound session. Please sign in again."
_HANDOFF_NO_TOKEN = "Cross-domain auth handoff requires passing the current refresh token."  # noqa: S105 (a message)
_HANDOFF_MISMATCH = "Cross-domain auth handoff refresh token does not match the authenticated session."
_HANDOFF_INVALID = "Cross-domain auth handoff refresh token is not valid."
_REDIRECT_MISMATCH = (
    "Invalid redirect URI. Your redirect URI must be the same as the one used to get the authorization code."
)


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _random_token(ctx: RequestContext) -> str:
    """32 random bytes, base64url without padding (43 characters: a valid PKCE verifier, state or nonce)."""
    return base64.urlsafe_b64encode(ctx.entropy.token_bytes(32)).decode().rstrip("=")


# ----------------------------------------------------------------------------------------------------------------
# The project, its key, its provider


def _client_project(ctx: RequestContext, client_id: str) -> Flow[Project | None]:
    """The project a `client_id` (`<projectId>` or `<projectId>#<branch>`) names; None for an unknown project or
    branch (there is one branch, "main"), and for the internal project, which has no users to sign in."""
    project_id, _, branch = client_id.partition("#")
    if not project_id or (branch and branch != "main") or project_id == "internal":
        return None
    return (yield from perform(LoadProject(project_id)))


def _check_client_key(project: Project, secret: str | None, invalid: KnownError) -> None:
    """The publishable key as `client_secret` (the original's `checkApiKeySet`): the sentinel (or, at the token
    endpoint, none) stands for "no key" and is refused when the project requires keys; a wrong key is `invalid`."""
    if secret is None or secret == PUBLIC_CLIENT_SECRET:
        if project.config.require_publishable_client_key:
            raise KnownError(ErrorCode.PUBLISHABLE_CLIENT_KEY_REQUIRED_FOR_PROJECT, details={"project_id": project.id})
        return
    if not secret_matches(secret, project.keys.publishable_client_key_hash):
        raise invalid


def _provider(ctx: RequestContext, project: Project, provider_id: str) -> OAuthProviderConfig:
    """The project's provider `provider_id`. A provider the mock serves exists only in dev mode. (As the original,
    `allow_sign_in` is not looked at: it says whether the account may sign in, not whether the flow may run.)"""
    for config in project.config.oauth_providers:
        if config.id == provider_id:
            if uses_mock(config) and not ctx.options.dev_mode:
                break
            return config
    raise KnownError(ErrorCode.OAUTH_PROVIDER_NOT_FOUND_OR_NOT_ENABLED)


def _spec(ctx: RequestContext, config: OAuthProviderConfig) -> Flow[ProviderSpec]:
    """What the host's provider client needs for `config` (`identity_proto.oauth.spec_for`)."""
    return (yield from spec_for(config, ctx.base_url, lambda issuer: _provider_call(DiscoverProvider(issuer))))


def _kind(config: OAuthProviderConfig) -> str:
    return "mock" if uses_mock(config) else config.type


def _scope(config: OAuthProviderConfig, provider_scope: str | None) -> str:
    """The provider scopes asked for: the type's base scopes, then the app's extra ones (each once)."""
    words = [*PROVIDER_TYPES[_kind(config)].base_scope.split(), *(provider_scope or "").split()]
    return " ".join(dict.fromkeys(words))


def _provider_call(effect: Any) -> Flow[Any]:
    """A provider effect, its failures mapped (reference §7.3 step 4, `effects.oauth_provider`)."""
    try:
        return (yield effect)
    except ProviderFailure as failure:
        if failure.kind == "access_denied":
            raise KnownError(ErrorCode.OAUTH_PROVIDER_ACCESS_DENIED) from None
        if failure.kind == "unavailable":
            raise KnownError(ErrorCode.OAUTH_PROVIDER_TEMPORARILY_UNAVAILABLE) from None
        raise PlainError(400, _INVALID_GRANT) from None


def _callback_url(ctx: RequestContext, provider_id: str) -> str:
    """Our redirect URI at the provider (reference §7.1), under the service's public base URL (mount point
    included)."""
    return f"{ctx.base_url}/api/v1/auth/oauth/callback/{provider_id}"


# ----------------------------------------------------------------------------------------------------------------
# GET /auth/oauth/authorize/{provider_id}


def _token_user(ctx: RequestContext, project: Project, token: str) -> Flow[str]:
    """The user an access token sent as `?token=` names (anonymous and restricted users too), checked as request
    authentication checks one: signature by its own project's key, then expiry, then its project."""
    claims = unverified_claims(token)
    audience = claims.get("aud") if claims is not None else None
    if not isinstance(audience, str) or not audience.split(":", 1)[0]:
        raise KnownError(ErrorCode.UNPARSABLE_ACCESS_TOKEN)
    token_project_id = audience.split(":", 1)[0]
    signer = project if token_project_id == project.id else (yield from perform(LoadProject(token_project_id)))
    if signer is None:
        raise KnownError(ErrorCode.UNPARSABLE_ACCESS_TOKEN)
    verified = access_token_key(signer.signing_key, audience).verify(token)
    if verified is None or not isinstance(verified.get("sub"), str) or not isinstance(verified.get("exp"), int):
        raise KnownError(ErrorCode.UNPARSABLE_ACCESS_TOKEN)
    if ctx.now_ms >= verified["exp"] * 1000:
        raise KnownError(
            ErrorCode.ACCESS_TOKEN_EXPIRED,
            details={
                "expired_at_millis": verified["exp"] * 1000,
                "project_id": token_project_id,
                "user_id": verified["sub"],
                "refresh_token_id": verified.get("refresh_token_id"),
            },
        )
    if token_project_id != project.id:
        raise PlainError(403, _TOKEN_OF_OTHER_PROJECT)
    return str(verified["sub"])


def _with_query(url: str, params: list[tuple[str, str]]) -> str:
    """`url` with `params` set in its query (replacing parameters of the same names)."""
    parts = urlsplit(url)
    names = {name for name, _ in params}
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in names]
    return urlunsplit(parts._replace(query=urlencode([*kept, *params])))


def _cookie_header(ctx: RequestContext, inner_state: str, *, max_age: int) -> tuple[str, str]:
    """The inner cookie (reference §7.2) as the original's framework writes it: `Path=/`, so the callback gets it
    wherever the service is mounted; `Expires` and `Max-Age`; `Secure` outside dev mode. `max_age=0` deletes it
    (empty, expired at the epoch)."""
    name = COOKIE_PREFIX + inner_state
    if not max_age:
        return ("set-cookie", f"{name}=; Path=/; Expires={formatdate(0, usegmt=True)}")
    expires = formatdate(ctx.now_ms // 1000 + max_age, usegmt=True)
    secure = "" if ctx.options.dev_mode else " Secure;"
    return ("set-cookie", f"{name}=true; Path=/; Expires={expires}; Max-Age={max_age};{secure} HttpOnly")


def authorize(ctx: RequestContext[None, OAuthAuthorizeQuery, OAuthProviderIdParams]) -> Flow[Response]:
    """GET /auth/oauth/authorize/{provider_id}: check the app's request in the original's order (reference §7.2),
    keep it 10 minutes for the callback, and send the browser to the provider: 307 with the inner cookie, or 200
    `{location}` with `stack_response_mode=json` (the SDK's way; no cookie: PKCE protects that flow)."""
    query: OAuthAuthorizeQuery = ctx.query
    provider_id: str = ctx.params.provider_id
    project = yield from _client_project(ctx, query.client_id)
    if project is None:
        raise KnownError(ErrorCode.INVALID_OAUTH_CLIENT_ID_OR_SECRET, details={"client_id": query.client_id})
    _check_client_key(
        project,
        query.client_secret,
        KnownError(ErrorCode.INVALID_PUBLISHABLE_CLIENT_KEY, details={"project_id": project.id}),
    )
    config = _provider(ctx, project, provider_id)
    if query.type == "link" and not query.token:
        raise PlainError(400, _LINK_NEEDS_TOKEN)
    after = query.after_callback_redirect_url
    if after is not None and not callback_is_trusted(after, project.config):
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    # The shared "MOCK" credentials stand for the original's shared keys, which take no extra scopes.
    if query.provider_scope and config.client_id == MOCK_CLIENT_ID and config.type != "mock":
        raise KnownError(ErrorCode.OAUTH_EXTRA_SCOPE_NOT_AVAILABLE_WITH_SHARED_OAUTH_KEYS)
    user_id = (yield from _token_user(ctx, project, query.token)) if query.token else None
    if query.scope != OUTER_SCOPE:
        # (inferred) "legacy" is the only outer scope; the original's OAuth library refuses others only at the
        # callback, after the provider round trip. Refused here, before anything is kept, in the same words.
        raise PlainError(400, _INVALID_SCOPE)

    spec = yield from _spec(ctx, config)
    kind = PROVIDER_TYPES[_kind(config)]
    inner_state, verifier = _random_token(ctx), _random_token(ctx)
    nonce = _random_token(ctx) if kind.openid else None
    scope = _scope(config, query.provider_scope)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    location = _with_query(
        spec.endpoints.authorization_endpoint,
        [
            ("client_id", spec.client_id),
            ("redirect_uri", _callback_url(ctx, config.id)),
            ("response_type", "code"),
            ("scope", scope),
            ("state", inner_state),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            *((("nonce", nonce),) if nonce else ()),
            *kind.extra_authorize_params,
        ],
    )
    state = OAuthState(
        project_id=project.id,
        branch_id=query.client_id.partition("#")[2] or None,
        provider_id=config.id,
        type=query.type,
        redirect_uri=query.redirect_uri,
        outer_state=query.state,
        code_challenge=query.code_challenge,
        code_challenge_method=query.code_challenge_method,
        inner_code_verifier=verifier,
        nonce=nonce,
        user_id=user_id,
        provider_scope=query.provider_scope,
        error_redirect_uri=query.error_redirect_uri or query.error_redirect_url,
        after_callback_redirect_url=after,
        response_mode=query.stack_response_mode,
        created_at_millis=ctx.now_ms,
        expires_at_millis=ctx.now_ms + STATE_LIFETIME_MS,
    )
    yield from put_record(ShortLived.OAUTH_STATE, _sha256(inner_state), state, ctx.now_ms)
    if query.stack_response_mode == "json":
        return json_response(200, {"location": location})
    return Response(
        307,
        (
            ("location", location),
            ("content-type", "text/plain; charset=utf-8"),
            _cookie_header(ctx, inner_state, max_age=STATE_LIFETIME_MS // 1000),
            ("cache-control", "no-store"),
        ),
        b"",
    )


# ----------------------------------------------------------------------------------------------------------------
# GET/POST /auth/oauth/callback/{provider_id}


def _cookie_sent(ctx: RequestContext, name: str) -> bool:
    raw = ctx.request.header("cookie")
    if not raw:
        return False
    jar: SimpleCookie = SimpleCookie()
    for part in raw.split(";"):  # one bad pair must not hide the others (SimpleCookie stops at the first)
        try:
            jar.load(part.strip())
        except CookieError:
            continue
    morsel = jar.get(name)
    return morsel is not None and morsel.value == "true"


def _redirect_or_raise(ctx: RequestContext, project: Project, state: OAuthState, error: KnownError) -> Response:
    """reference §7.3: a known error from step 3 on goes back to the app: to its redirect URI if trusted, else to
    its error redirect URL if trusted, with `error=server_error&error_description&errorCode&message&details`;
    when neither is trusted it is answered as itself (in the original's words in compatibility mode)."""
    if ctx.options.compat:
        original = error.in_original_words()
        if isinstance(original, PlainError):  # a code the original lacks: its plain text, as itself
            raise original
        error = original
    for target in (state.redirect_uri, state.error_redirect_uri):
        if target is not None and callback_is_trusted(target, project.config):
            details = dump_json(error.details if error.details else {}).decode()
            location = _with_query(
                target,
                [
                    ("error", "server_error"),
                    ("error_description", error.message),
                    ("errorCode", error.code.name),
                    ("message", error.message),
                    ("details", details),
                ],
            )
            return Response(307, (("location", location), ("cache-control", "no-store")), b"")
    raise error


def callback(
    ctx: RequestContext[OAuthCallbackForm | None, OAuthCallbackInput, OAuthProviderIdParams],
) -> Flow[Response]:
    """GET/POST /auth/oauth/callback/{provider_id}: the provider sends the browser back here (reference §7.3).
    Take the kept request (once), check the inner cookie, exchange the provider's code, check who signed in (§7.4,
    nothing written: see the module docstring), and send the browser back to the app with a one-time outer code
    (303) that carries the provider's answer to the exchange."""
    query: OAuthCallbackInput = ctx.query
    form: OAuthCallbackForm | None = ctx.body
    inner_state = query.state or (form.state if form is not None else None) or ""
    state = (yield from take_record(OAuthState, ShortLived.OAUTH_STATE, _sha256(inner_state))) if inner_state else None
    if state is None or (state.provider_id != ctx.params.provider_id and not ctx.options.compat):
        raise PlainError(400, _INVALID_STATE)
    # Redirect mode: the cookie is deleted on every answer from here on, errors too, as the original does.
    cookie = () if state.response_mode == "json" else (_cookie_header(ctx, inner_state, max_age=0),)
    try:
        if cookie and not _cookie_sent(ctx, COOKIE_PREFIX + inner_state):
            raise PlainError(400, _NO_COOKIE)
        project = yield from perform(LoadProject(state.project_id))
        if project is None:  # deleted since: nothing can be checked against its domains (a 400, not a redirect)
            raise KnownError(ErrorCode.INVALID_OAUTH_CLIENT_ID_OR_SECRET, details={"client_id": state.project_id})
        try:
            response = yield from _complete(ctx, project, state, ctx.params.provider_id, query, form)
        except KnownError as error:
            response = _redirect_or_raise(ctx, project, state, error)
    except (KnownError, PlainError) as error:
        error.headers = (*error.headers, *cookie)
        raise
    return response.with_headers(cookie) if cookie else response


def _complete(
    ctx: RequestContext,
    project: Project,
    state: OAuthState,
    path_provider_id: str,
    query: OAuthCallbackInput,
    form: OAuthCallbackForm | None,
) -> Flow[Response]:
    if ctx.now_ms >= state.expires_at_millis:
        raise KnownError(ErrorCode.OUTER_OAUTH_TIMEOUT)
    # The path's provider: the state's, but in compatibility mode, where a callback on another provider's path is
    # answered as the original answers it (that provider, if the project has it, refuses a code it did not issue).
    config = _provider(ctx, project, path_provider_id)
    # (The original re-checks the publishable key here; the kept request does not hold it, and a key rotated
    # within these ten minutes does not undo a sign-in its user already started.)
    provider_error = query.error or (form.error if form is not None else None)
    if provider_error == "access_denied":
        raise KnownError(ErrorCode.OAUTH_PROVIDER_ACCESS_DENIED)
    code = query.code or (form.code if form is not None else None)
    # (inferred) any other refusal: the provider gave no code to exchange; or the code is another provider's (it is
    # sent to none)
    if provider_error or not code or config.id != state.provider_id:
        raise PlainError(400, _INVALID_GRANT)
    spec = yield from _spec(ctx, config)
    scope = _scope(config, state.provider_scope)
    grant: ProviderGrant = yield from _provider_call(
        ExchangeProviderCode(
            spec,
            code=code,
            redirect_uri=_callback_url(ctx, config.id),
            code_verifier=state.inner_code_verifier,
            scope=scope,
            nonce=state.nonce,
        )
    )
    # The original's OAuth library checks the outer redirect URI before it asks who signed in.
    if not callback_is_trusted(state.redirect_uri, project.config):
        raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    identity = grant.identity
    # Only checked here (a refusal goes back to the app as the original's error redirect); done at the exchange.
    yield from _resolve_user(ctx, project, config, state.type, state.user_id, identity, commit=False)
    code_value = ctx.entropy.token_bytes(32).hex()
    code_hash = _sha256(code_value)
    yield from put_record(
        ShortLived.OUTER_CODE,
        code_hash,
        OuterCode(
            project_id=project.id,
            token_user_id=state.user_id,
            redirect_uri=state.redirect_uri,
            code_challenge=state.code_challenge,
            code_challenge_method=state.code_challenge_method,
            type=state.type,
            after_callback_redirect_url=state.after_callback_redirect_url,
            expires_at_millis=ctx.now_ms + OUTER_CODE_LIFETIME_MS,
            provider_id=config.id,
            account_id=identity.account_id,
            email=identity.email,
            email_verified=identity.email_verified,
            display_name=identity.display_name,
            profile_image_url=identity.profile_image_url,
            sealed_tokens=_seal_for_code(ctx, project, grant, scope, code_hash),
        ),
        ctx.now_ms,
        project_id=project.id,
    )
    location = _with_query(state.redirect_uri, [("code", code_value), ("state", state.outer_state)])
    return Response(303, (("location", location), ("cache-control", "no-store")), b"")


def _count_sign_in(ctx: RequestContext, project: Project) -> Flow[None]:
    """The `sign_in_ip` rule for a request presenting a secret (a provider's code, our outer code)."""
    address = ctx.client_address
    if not ctx.options.rate_limits_enabled or not address:
        return
    rule, subject = rule_for("sign_in_ip", project.config), address_bucket(address)
    yield from check_under_limit(rule, subject, now_ms=ctx.now_ms)
    yield from count_event(rule, subject, now_ms=ctx.now_ms, enforce=True)


def _pending_row(code_hash: str) -> str:
    """What provider tokens kept with an outer code are sealed for, in place of an account row id (a row id is a
    UUID: no row is ever named this)."""
    return f"outer-code:{code_hash}"


def _seal_for_code(
    ctx: RequestContext, project: Project, grant: ProviderGrant, scope: str, code_hash: str
) -> str | None:
    """reference §7.4: the provider's tokens, tagged with the scopes granted (else asked for), sealed to wait with
    the outer code for the exchange; None when no key is configured (nor dev mode): see
    `identity_proto.provider_tokens`."""
    key = token_key(ctx.options)
    if key is None:
        return None
    granted = grant.tokens.scope or scope
    return seal(
        grant.tokens, granted, key, project_id=project.id, account_row_id=_pending_row(code_hash), entropy=ctx.entropy
    )


def _store_provider_tokens(
    ctx: RequestContext, project: Project, user: User, account: OAuthAccount, code: OuterCode, code_hash: str
) -> Flow[None]:
    """The tokens the callback kept with the code, sealed again for the account row they now belong to. None kept,
    or kept under a key the service no longer has: nothing stored (connected accounts then ask for a new grant)."""
    key = token_key(ctx.options)
    if key is None or code.sealed_tokens is None:
        return
    try:
        tokens = unseal(code.sealed_tokens, key, project_id=project.id, account_row_id=_pending_row(code_hash))
    except SealedTokens:
        return
    sealed = seal(tokens, tokens.scope, key, project_id=project.id, account_row_id=account.id, entropy=ctx.entropy)
    yield from save_provider_tokens(project.id, user, account.id, sealed)


# ----------------------------------------------------------------------------------------------------------------
# Finding or creating the user (reference §7.4)


def _new_account(ctx: RequestContext, config: OAuthProviderConfig, identity: ProviderIdentity) -> OAuthAccount:
    return OAuthAccount(
        id=new_uuid(ctx.entropy),
        provider_config_id=config.id,
        account_id=identity.account_id,
        email=identity.email,
        created_at_millis=ctx.now_ms,
    )


def _add_account(project: Project, user: User, account: OAuthAccount) -> Flow[tuple[User, OAuthAccount] | None]:
    """Append `account` to the user's accounts, or find the user's own row for the same provider account (read again
    while other writes change the list). None when the user is gone; `CommitConflict` (at an `IndexIs`) when another
    user holds the account."""
    for _ in range(_ACCOUNT_WRITE_ATTEMPTS):
        own = next(
            (
                a
                for a in user.oauth_accounts
                if a.provider_config_id == account.provider_config_id and a.account_id == account.account_id
            ),
            None,
        )
        if own is not None:
            return user, own
        try:
            return (yield from commit_accounts(project.id, user, (*user.oauth_accounts, account))), account
        except CommitConflict as conflict:
            if isinstance(conflict.guard, IndexIs):
                raise
        reread = yield from perform(LoadUser(project.id, user.id))
        if reread is None:
            return None
        user = reread
    raise RuntimeError("linking an OAuth account: the user's accounts kept changing")  # a 500, logged


def _email_in_use(project: Project, email: str, identity: ProviderIdentity, stored_verified: bool) -> bool:
    """The merge strategy for a provider e-mail that signs `existing` in (reference §7.4 (2)): True to link the
    account to them; False to sign up a new user without that e-mail for auth (`allow_duplicates`); raises 409
    CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE otherwise."""
    strategy = project.config.oauth_account_merge_strategy
    if strategy == "allow_duplicates":
        return False
    if strategy == "link_method" and stored_verified and identity.email_verified:
        return True
    would_work = strategy == "link_method" and not stored_verified
    message = f'This email "({email})" is already used for authentication by another account' + (
        " but the email is not verified. Please login to your existing account with the method you used to sign up, "
        "and then verify your email to sign in with this login method."
        if would_work
        else "."
    )
    raise KnownError(
        ErrorCode.CONTACT_CHANNEL_ALREADY_USED_FOR_AUTH_BY_SOMEONE_ELSE,
        message=message,
        details={"type": "email", "contact_channel_value": email, "would_work_if_email_was_verified": would_work},
    )


def _resolve_user(
    ctx: RequestContext,
    project: Project,
    config: OAuthProviderConfig,
    kind: str,
    token_user_id: str | None,
    identity: ProviderIdentity,
    *,
    commit: bool,
) -> Flow[tuple[User, OAuthAccount, bool]]:
    """(user, their account row, is_new_user) for the provider account that signed in: for a `kind` "link", linked
    to `token_user_id`; else its user, or a user whose address it shares (merge strategy), or a new user (the
    anonymous `token_user_id` upgraded in place).

    With `commit` False nothing is written: the refusals the writes would meet are raised, and what the writes
    would give is returned (a user not stored, an account row not linked). The callback checks with it; only the
    PKCE-verified exchange commits (see `oauth_token`)."""
    for _ in range(_ACCOUNT_WRITE_ATTEMPTS):
        found = yield from _try_resolve_user(ctx, project, config, kind, token_user_id, identity, commit=commit)
        if found is not None:
            return found
    raise RuntimeError("OAuth sign-in: concurrent sign-ups kept taking the account")  # a 500, logged


def _try_resolve_user(
    ctx: RequestContext,
    project: Project,
    config: OAuthProviderConfig,
    kind: str,
    token_user_id: str | None,
    identity: ProviderIdentity,
    *,
    commit: bool,
) -> Flow[tuple[User, OAuthAccount, bool] | None]:
    """One attempt of `_resolve_user`; None when a concurrent write took what it was about to claim (retry)."""
    holder = yield from perform(find_user_by_oauth_account(project.id, config.id, identity.account_id))
    holder_row = _row(holder, config.id, identity.account_id)

    if kind == "link":
        user_id = token_user_id or ""
        if holder is not None and holder.id != user_id:
            raise KnownError(ErrorCode.OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER)
        if holder is not None and holder_row is not None:
            return holder, holder_row, False
        user = yield from perform(LoadUser(project.id, user_id))
        if user is None:  # deleted since the link began (inferred: the original fails with a 500)
            raise KnownError(ErrorCode.USER_NOT_FOUND)
        if not commit:
            return user, _new_account(ctx, config, identity), False
        try:
            linked = yield from _add_account(project, user, _new_account(ctx, config, identity))
        except CommitConflict:
            raise KnownError(ErrorCode.OAUTH_CONNECTION_ALREADY_CONNECTED_TO_ANOTHER_USER) from None
        if linked is None:
            raise KnownError(ErrorCode.USER_NOT_FOUND)
        return (*linked, False)

    # (1) a sign-in account of this provider account: its user.
    if holder is not None and holder_row is not None:
        return holder, holder_row, False

    # (2) the provider's e-mail signs someone in: the project's merge strategy decides.
    email = normalize_email(identity.email) if identity.email else None
    email_auth = email is not None
    if email is not None:
        existing = yield from perform(find_user_by_email(project.id, email))
        if existing is not None:
            channels = yield from perform(ListContactChannels(project.id, existing.id))
            stored = channels.stored if channels is not None else ()
            if _email_in_use(project, email, identity, auth_address_verified(existing, stored, email)):
                if not commit:
                    return existing, _new_account(ctx, config, identity), False
                try:
                    linked = yield from _add_account(project, existing, _new_account(ctx, config, identity))
                except CommitConflict:
                    linked = None
                return None if linked is None else (*linked, False)  # None: taken or gone meanwhile, look again
            email_auth = False

    # (3) a new user, or the anonymous caller upgraded in place.
    if not project.config.sign_up_enabled:
        raise KnownError(ErrorCode.SIGN_UP_NOT_ENABLED)
    account = _new_account(ctx, config, identity)
    fields: dict[str, Any] = {
        "display_name": identity.display_name,
        "profile_image_url": identity.profile_image_url,
        "primary_email": email,
        "primary_email_verified": identity.email_verified if email is not None else False,
        "primary_email_auth_enabled": email_auth,
    }
    if not commit:
        # (a user not stored: the dry run's answer is not used beyond its refusals)
        unsaved = User(id="", signed_up_at_millis=ctx.now_ms, last_active_at_millis=ctx.now_ms, **fields)
        return unsaved, account, True
    if token_user_id is not None:
        anonymous = yield from read_anonymous(project.id, token_user_id)
        if anonymous is not None and anonymous.user.is_anonymous:
            upgraded = yield from _upgrade(ctx, project, anonymous, fields, account)
            if isinstance(upgraded, User):
                return upgraded, account, True
            if upgraded in (None, UpgradeRefusal.EMAIL_TAKEN, UpgradeRefusal.ACCOUNT_TAKEN):
                return None
            # upgraded or deleted meanwhile: a new user as if no token had come
    new_user = User(
        id=new_uuid(ctx.entropy),
        signed_up_at_millis=ctx.now_ms,
        last_active_at_millis=ctx.now_ms,
        oauth_accounts=(account,),
        **fields,
    )
    try:
        created = yield from store_oauth_user(project.id, sign_up_parts(ctx, project, new_user))
    except CommitConflict:  # a concurrent sign-up took the address or the account: look again
        return None
    return created, account, True


def store_oauth_user(project_id: str, parts: NewUser) -> Flow[User]:
    """Store a new user who signed up with a provider as every sign-up is stored (`flows.signin.commit_new_user`),
    the OAuth index entries of their sign-in accounts claimed, while free, in the same commit (`CommitConflict`
    otherwise: the id, the address or an account taken)."""
    guards, writes = account_claims(parts.user.id, sign_in_keys(parts.user.oauth_accounts))
    return (yield from commit_new_user(project_id, parts, guards=guards, writes=writes))


def _row(user: User | None, provider_id: str, account_id: str) -> OAuthAccount | None:
    if user is None:
        return None
    return next(
        (
            a
            for a in user.oauth_accounts
            if a.provider_config_id == provider_id and a.account_id == account_id and a.allow_sign_in
        ),
        None,
    )


def _upgrade(
    ctx: RequestContext, project: Project, caller: Anonymous, fields: Mapping[str, Any], account: OAuthAccount
) -> Flow[User | UpgradeRefusal | None]:
    """The anonymous user of `caller` becomes the provider account's user in place (same id), as the other sign-ups
    upgrade (`flows.anonymous.upgrade_anonymous_user`), linking `account` in the same commit; their display name
    and picture stay unless the provider gives them. None when a concurrent change met the commit (look again)."""
    try:
        return (
            yield from upgrade_anonymous_user(
                ctx,
                project,
                caller,
                dict(fields),
                keep_when_absent=("display_name", "profile_image_url"),
                oauth_account=account,
            )
        )
    except CommitConflict:
        return None


# ----------------------------------------------------------------------------------------------------------------
# POST /auth/oauth/token


def _pkce_matches(code: OuterCode, verifier: str | None) -> bool:
    """RFC 7636 §4.6: the verifier against the challenge the code was issued for, by its method."""
    if verifier is None:
        return False
    if code.code_challenge_method == "S256":
        verifier = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    elif code.code_challenge_method != "plain":
        return False
    return hmac.compare_digest(verifier.encode(), code.code_challenge.encode())


def oauth_token(ctx: RequestContext[OAuthTokenGrantBody]) -> Flow[Response]:
    """POST /auth/oauth/token: the refresh grant (`flows.sessions.oauth_token`) or the authorization-code grant
    (reference §7.5), which exchanges an outer code for a new session's tokens, after finding, creating, linking or
    upgrading the user and storing the provider's tokens (§7.4; done here, not at the callback: see the module
    docstring)."""
    body: OAuthTokenGrantBody = ctx.body
    if body.grant_type == "refresh_token":
        return (yield from sessions.oauth_token(ctx))
    project = yield from _client_project(ctx, body.client_id)
    if project is None:
        raise KnownError(ErrorCode.INVALID_OAUTH_CLIENT_ID_OR_SECRET, details={"client_id": None})
    _check_client_key(
        project,
        body.client_secret,
        KnownError(ErrorCode.INVALID_OAUTH_CLIENT_ID_OR_SECRET, details={"client_id": None}),
    )
    yield from _count_sign_in(ctx, project)
    # Consumed before it is checked, so a code presented with the wrong verifier is burnt, as the original's OAuth
    # library revokes it: a stolen code is worth one guess.
    code_hash = _sha256(body.code or "")
    code = yield from take_record(OuterCode, ShortLived.OUTER_CODE, code_hash, project_id=project.id)
    if code is None or code.project_id != project.id or ctx.now_ms >= code.expires_at_millis:
        raise KnownError(ErrorCode.INVALID_AUTHORIZATION_CODE)
    if body.redirect_uri != code.redirect_uri:
        raise PlainError(400, _REDIRECT_MISMATCH)
    if not _pkce_matches(code, body.code_verifier):
        raise KnownError(ErrorCode.INVALID_AUTHORIZATION_CODE)
    # Only now, with the verifier shown, is the sign-in acted on (see `OuterCode`): whoever started the flow holds
    # the verifier, and the code reached them, so the browser that signed in at the provider is theirs. (A link or
    # an anonymous upgrade started with someone's token and completed by another person's browser stops here: the
    # code lands at that person's app, which does not hold the starter's verifier.) A provider removed since the
    # callback is refused; a refusal met now (a concurrent sign-up, a deleted user) is answered as itself.
    if code.session_id is not None:
        return (yield from _hand_off(ctx, project, code, body.code or ""))
    config = _provider(ctx, project, code.provider_id)
    identity = ProviderIdentity(
        account_id=code.account_id,
        email=code.email,
        email_verified=code.email_verified,
        display_name=code.display_name,
        profile_image_url=code.profile_image_url,
    )
    user, account, is_new_user = yield from _resolve_user(
        ctx, project, config, code.type, code.token_user_id, identity, commit=True
    )
    yield from _store_provider_tokens(ctx, project, user, account, code, code_hash)
    if user.totp_secret_base64 is not None:
        # As the original: the attempt code says is_new_user false (a new user has no second factor yet).
        yield from require_second_factor(ctx, project, user, is_new_user=False)
    tokens = yield from start_session(ctx, project, user)
    return _tokens(ctx, tokens.access_token, tokens.refresh_token, is_new_user, code.after_callback_redirect_url)


def _tokens(ctx: RequestContext, access: str, refresh: str, is_new_user: bool, after: str | None) -> Response:
    return json_response(
        200,
        {
            "access_token": access,
            "token_type": "Bearer",
            # The access token's real lifetime (the original's library says 3600 for its 10-minute tokens).
            "expires_in": ctx.options.access_token_lifetime_ms // 1000,
            "refresh_token": refresh,
            "scope": OUTER_SCOPE,
            "is_new_user": is_new_user,
            "newUser": is_new_user,
            "after_callback_redirect_url": after,
            "afterCallbackRedirectUrl": after,
        },
        # Cache-Control: the base headers' "no-store, max-age=0" (a second Cache-Control header would be joined to it).
        headers=(("pragma", "no-cache"),),
    )


# ----------------------------------------------------------------------------------------------------------------
# POST /auth/oauth/cross-domain/authorize


def _pad(code_value: str, data: bytes) -> bytes:
    """`data` XOR a pad only the code's holder can derive (the store keeps the code's SHA-256 alone): the handoff's
    refresh token waits with its code unreadable to a copy of the store. Its own inverse."""
    pad = hashlib.shake_256(b"cross-domain handoff\n" + code_value.encode()).digest(len(data))
    return bytes(a ^ b for a, b in zip(data, pad, strict=True))


def cross_domain_authorize(ctx: RequestContext[CrossDomainAuthorizeBody]) -> Flow[Response]:
    """POST /auth/oauth/cross-domain/authorize: the signed-in caller hands their session to another domain of the
    app: a one-time outer code (PKCE, 5 minutes) in `redirect_url`, which that domain exchanges at the token
    endpoint for the same session's tokens (`_hand_off`), as the original's handoff. The caller proves the session
    with its refresh token; both URLs must be trusted."""
    auth = ctx.require_auth()
    body: CrossDomainAuthorizeBody = ctx.body
    project = auth.project
    if auth.user_id is None:
        raise KnownError(ErrorCode.USER_AUTHENTICATION_REQUIRED)
    if auth.refresh_token_id is None:
        raise PlainError(400, _HANDOFF_NO_SESSION)
    refresh_token = ctx.options.headers.get(ctx.request, "refresh-token")
    if not refresh_token:
        raise PlainError(400, _HANDOFF_NO_TOKEN)
    session = yield from perform(LoadSession(project.id, auth.refresh_token_id))
    if (
        session is None
        or session.user_id != auth.user_id
        or not secret_matches(refresh_token, session.refresh_token_hash)
    ):
        raise PlainError(401, _HANDOFF_MISMATCH)
    if ctx.now_ms >= session.expires_at_millis:
        raise PlainError(401, _HANDOFF_INVALID)
    invalid_key = KnownError(ErrorCode.INVALID_PUBLISHABLE_CLIENT_KEY, details={"project_id": project.id})
    _check_client_key(project, ctx.options.headers.get(ctx.request, "publishable-client-key") or None, invalid_key)
    for url in (body.redirect_uri, body.after_callback_redirect_url):
        if url is not None and not callback_is_trusted(url, project.config):
            raise KnownError(ErrorCode.REDIRECT_URL_NOT_WHITELISTED)
    code_value = ctx.entropy.token_bytes(32).hex()
    handoff = OuterCode(
        project_id=project.id,
        token_user_id=auth.user_id,
        redirect_uri=body.redirect_uri,
        code_challenge=body.code_challenge,
        code_challenge_method=body.code_challenge_method,
        type="authenticate",
        after_callback_redirect_url=body.after_callback_redirect_url,
        expires_at_millis=ctx.now_ms + OUTER_CODE_LIFETIME_MS,
        session_id=session.id,
        handoff_refresh_token=_pad(code_value, refresh_token.encode()).hex(),
    )
    yield from put_record(ShortLived.OUTER_CODE, _sha256(code_value), handoff, ctx.now_ms, project_id=project.id)
    location = _with_query(body.redirect_uri, [("code", code_value), ("state", body.state)])
    return json_response(200, {"redirect_url": location})


def _hand_off(ctx: RequestContext, project: Project, code: OuterCode, code_value: str) -> Flow[Response]:
    """The exchange of a cross-domain code: the session it was issued for, with its own refresh token while that
    session lasts, else a new session (as the original); a user with a second factor is asked for it, as at every
    exchange (the original's too)."""
    user = yield from perform(LoadUser(project.id, code.token_user_id or ""))
    if user is None:
        raise KnownError(ErrorCode.INVALID_AUTHORIZATION_CODE)
    if user.totp_secret_base64 is not None:
        yield from require_second_factor(ctx, project, user, is_new_user=False)
    try:
        refresh = _pad(code_value, bytes.fromhex(code.handoff_refresh_token or "")).decode()
        access = yield from sessions.use_refresh_token(ctx, project, refresh)
    except (KnownError, ValueError):  # the session ended since
        tokens = yield from start_session(ctx, project, user)
        refresh, access = tokens.refresh_token, tokens.access_token
    return _tokens(ctx, access, refresh, False, code.after_callback_redirect_url)
