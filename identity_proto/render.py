"""Responses: the one JSON encoder, the headers every response carries, and records rendered per access type.

Which fields of a record a caller may see is decided here and nowhere else: each `render_*` function takes the
record and the caller's access type, so no flow can leak a field by building JSON by hand.
"""

from __future__ import annotations

import functools
from collections.abc import Set as AbstractSet
from typing import Any

import orjson

from identity_proto.auth import AccessType
from identity_proto.errors import KnownError
from identity_proto.http import Headers, Response, check_headers
from identity_proto.oauth import MOCK_CLIENT_ID
from identity_proto.records import (
    ApiKey,
    ApiKeyType,
    ContactChannel,
    Membership,
    Project,
    ProjectConfig,
    Team,
    User,
    config_to_json,
    replaced,
)
from identity_proto.users import restricted_reason

__all__ = [
    "JSON_CONTENT_TYPE",
    "SERVER_ONLY_USER_FIELDS",
    "cors_headers",
    "dump_json",
    "error_response",
    "json_response",
    "preflight_headers",
    "render_api_key",
    "render_member_profile",
    "render_original_project",
    "render_project",
    "render_team",
    "render_user",
    "text_response",
]
__all__ += ["render_contact_channel"]  # contact channels

JSON_CONTENT_TYPE = "application/json; charset=utf-8"

#: Sent on every response: nothing here may be cached (tokens, user data), nor sniffed as another type.
BASE_HEADERS: Headers = (
    ("cache-control", "no-store, max-age=0"),
    ("x-content-type-options", "nosniff"),
)
#: CORS is open (reference §0.2): browsers call the API from any origin; credentials travel in headers, not
#: cookies, so `*` exposes nothing a script could not already send. `cors_headers` go on every response to a request
#: with an `Origin` (every cross-origin request a browser makes has one) and on preflights, `preflight_headers` on
#: preflights only; each exactly once (a header sent twice, `*, *`, makes browsers refuse the response). A request
#: without an Origin (a server, curl, the SDK under Node) is no CORS request, and each header costs the HTTP server
#: work per response.
#: The request headers a browser may send: exactly the original's list (its backend's `proxy.tsx`), with each of its
#: `x-stack-` names under every accepted prefix. The original's SDK sends `ngrok-skip-browser-warning` on every
#: request, so a preflight that does not allow it blocks every browser-side call; Sentry's and Vercel's headers are
#: added by their browser SDKs and proxies. `x-stack-allow-restricted-user` is read by the original's backend but not
#: allowed by its preflight, so no browser sends it there; nor here.
_ALLOWED_REQUEST_HEADER_SUFFIXES = (
    "project-id",
    "branch-id",
    "override-error-status",
    "random-nonce",  # used to forcefully disable some caches
    "client-version",
    "disable-artificial-development-delay",
    # project authentication
    "access-type",
    "publishable-client-key",
    "secret-server-key",
    "super-secret-admin-key",
    "admin-access-token",
    # user authentication
    "refresh-token",
    "access-token",
    "allow-anonymous-user",
)
_ALLOWED_OTHER_REQUEST_HEADERS = ("baggage", "sentry-trace", "x-vercel-protection-bypass", "ngrok-skip-browser-warning")
#: Response headers a script may read besides the CORS-safelisted ones: the original's (`content-type`, the
#: known-error code, `actual-status` per accepted prefix), and ours: the request id, and a 429's retry hints (the SDK
#: reads `Retry-After`).
_EXPOSED_RESPONSE_HEADERS = ("retry-after", "ratelimit-limit", "ratelimit-remaining", "ratelimit-reset")


#: What every JSON response starts with (checked once, so that `json_response` need not check it again).
_JSON_HEADERS: Headers = check_headers((("content-type", JSON_CONTENT_TYPE), *BASE_HEADERS))


def cors_headers(prefixes: tuple[str, ...]) -> Headers:
    """The CORS headers of every response to a cross-origin request, for the accepted header prefixes."""
    exposed = (
        "content-type",
        *(f"{prefix}actual-status" for prefix in prefixes),
        *(f"{prefix}known-error" for prefix in prefixes),
        *(f"{prefix}request-id" for prefix in prefixes),
        *_EXPOSED_RESPONSE_HEADERS,
    )
    return (("access-control-allow-origin", "*"), ("access-control-expose-headers", ", ".join(exposed)))


def preflight_headers(prefixes: tuple[str, ...], methods: tuple[str, ...]) -> Headers:
    """What a preflight adds to `cors_headers`: the path's methods, the request headers a browser may send (an
    explicit list, as the original sends: browsers never let `*` cover `Authorization`), and how long the answer
    may be cached (browsers cap it lower: Chromium at 2 hours)."""
    allowed = (
        "content-type",
        "authorization",  # OAuth's client authentication (HTTP Basic) at the token endpoint
        *(p + s for p in prefixes for s in _ALLOWED_REQUEST_HEADER_SUFFIXES),
        *_ALLOWED_OTHER_REQUEST_HEADERS,
    )
    return (
        ("access-control-allow-methods", ", ".join(methods)),
        ("access-control-allow-headers", ", ".join(allowed)),
        ("access-control-max-age", "86400"),
    )


def dump_json(value: Any) -> bytes:
    """The one JSON encoder of the service."""
    return orjson.dumps(value)


def json_response(status: int, value: Any, headers: Headers = ()) -> Response:
    """A JSON response with the base headers (`headers`, when given, are checked; the constant ones were checked
    once, here, at import). A given header replaces the base header of its name (a response with two
    `Cache-Control` headers is read by caches as the stricter one, so the JWKS's `public, max-age=3600` must be
    the only one)."""
    if headers:
        given = {name for name, _ in headers}
        base = tuple(header for header in _JSON_HEADERS if header[0] not in given)
        return Response(status=status, headers=(*base, *headers), body=dump_json(value))
    return Response.trusted(status, _JSON_HEADERS, dump_json(value))


def text_response(status: int, text: str, headers: Headers = ()) -> Response:
    """A plain-text response with the base headers."""
    return Response(
        status=status,
        headers=(("content-type", "text/plain; charset=utf-8"), *BASE_HEADERS, *headers),
        body=text.encode(),
    )


def error_response(error: KnownError, *, known_error_headers: tuple[str, ...] = ("x-service-known-error",)) -> Response:
    """A known error as `{"code", "error", "details"?}` with one known-error header per name given."""
    code = error.code.name
    headers = (*_JSON_HEADERS, *((name, code) for name in _checked_names(known_error_headers)), *error.headers)
    # The code is a member name of `ErrorCode` and the names were checked once: trusted. What the error itself
    # adds (Allow, Retry-After) is checked.
    if error.headers:
        return Response(status=error.status, headers=headers, body=dump_json(error.to_json()))
    return Response.trusted(error.status, headers, dump_json(error.to_json()))


@functools.cache
def _checked_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` after checking, once per tuple, that each is a valid header name."""
    check_headers(tuple((name, "") for name in names))
    return names


#: Bound once: reading a member off an enum class costs several times a global's read (EnumType's attribute hook),
#: and every rendered user reads it.
_CLIENT = AccessType.CLIENT


def render_project(project: Project, access_type: AccessType, *, compat: bool = False) -> dict[str, Any]:
    """A project as `access_type` may see it: admin everything but secrets, others the public config. `compat`
    (compatibility mode): client and server see the original's client fields only (`render_original_project`
    renders its admin view), and each OAuth provider of the admin's config also names its id as the original's
    `provider_config_id` (the id `POST /oauth-providers` takes)."""
    config = project.config
    public_config: dict[str, Any] = {
        "sign_up_enabled": config.sign_up_enabled,
        "credential_enabled": config.credential_enabled,
        "magic_link_enabled": config.magic_link_enabled,
        "passkey_enabled": config.passkey_enabled,
        "client_team_creation_enabled": config.client_team_creation_enabled,
        "client_user_deletion_enabled": config.client_user_deletion_enabled,
        "allow_localhost": config.allow_localhost,
        "domains": [{"domain": d.domain, "handler_path": d.handler_path} for d in config.domains],
        "allow_team_api_keys": config.allow_team_api_keys,
        "allow_user_api_keys": config.allow_user_api_keys,
        "enabled_oauth_providers": [{"id": p.id} for p in config.oauth_providers if p.allow_sign_in],
    }
    if access_type is not AccessType.ADMIN:
        if compat:
            original = render_original_project(project)["config"]
            public_config = {name: original[name] for name in ORIGINAL_CLIENT_PROJECT_CONFIG}
        return {"id": project.id, "display_name": project.display_name, "config": public_config}
    return {
        "id": project.id,
        "display_name": project.display_name,
        "created_at_millis": project.created_at_millis,
        # The permission definitions have endpoints of their own (/…-permission-definitions), as in the original.
        "config": {**public_config, **_without_definitions(config_to_json(config), compat=compat)},
    }


#: The config fields of the original's client view of a project (its `projectsCrudClientReadSchema`).
ORIGINAL_CLIENT_PROJECT_CONFIG = (
    "sign_up_enabled",
    "credential_enabled",
    "magic_link_enabled",
    "passkey_enabled",
    "client_team_creation_enabled",
    "client_user_deletion_enabled",
    "allow_user_api_keys",
    "allow_team_api_keys",
    "enabled_oauth_providers",
    "domains",
)

#: The original's default e-mail theme (its `DEFAULT_EMAIL_THEME_ID`): the theme every project of ours mails with.
ORIGINAL_DEFAULT_EMAIL_THEME_ID = "1df07ae6-abf3-4a40-83a5-a1a2cbe336ac"


def render_original_project(project: Project) -> dict[str, Any]:
    """A project in the shape of the original's admin view (`projectsCrudAdminReadSchema`), compatibility mode.

    Lists are sorted as the original sorts them; permission lists are `[{"id"}]`. What this service has no notion
    of takes the value an original project has when it was never set: no description or logos, not in production
    mode, onboarding completed, no owner team (projects are made with the internal project's key, not by a team),
    the shared e-mail server and the default theme (mail goes out through the service's own mailer).
    OAuth providers: `type` "shared" for those the mock provider serves (the original's shared development keys),
    else "standard" with the client id; their client secrets are never returned (the original returns them)."""
    config = project.config
    # the original lists a default permission only while it is defined, in its scope
    team = {d.id for d in config.permission_definitions if d.scope == "team"}
    project_scope = {d.id for d in config.permission_definitions if d.scope == "project"}
    providers = sorted((p for p in config.oauth_providers if p.allow_sign_in), key=lambda p: p.id)
    oauth_providers = []
    for p in providers:
        shared = p.type == "mock" or p.client_id == MOCK_CLIENT_ID
        item: dict[str, Any] = {"id": p.id, "provider_config_id": p.id, "type": "shared" if shared else "standard"}
        if not shared:
            item["client_id"] = p.client_id
            if p.microsoft_tenant_id is not None:
                item["microsoft_tenant_id"] = p.microsoft_tenant_id
        oauth_providers.append(item)
    return {
        "id": project.id,
        "display_name": project.display_name,
        "description": "",
        "logo_url": None,
        "logo_full_url": None,
        "logo_dark_mode_url": None,
        "logo_full_dark_mode_url": None,
        "created_at_millis": project.created_at_millis,
        "is_production_mode": False,
        "owner_team_id": None,
        "onboarding_status": "completed",
        "config": {
            "allow_localhost": config.allow_localhost,
            "client_team_creation_enabled": config.client_team_creation_enabled,
            "client_user_deletion_enabled": config.client_user_deletion_enabled,
            "sign_up_enabled": config.sign_up_enabled,
            "oauth_account_merge_strategy": config.oauth_account_merge_strategy,
            "create_team_on_sign_up": config.create_team_on_sign_up,
            "credential_enabled": config.credential_enabled,
            "magic_link_enabled": config.magic_link_enabled,
            "passkey_enabled": config.passkey_enabled,
            "oauth_providers": oauth_providers,
            "enabled_oauth_providers": [{"id": p.id} for p in providers],
            "domains": sorted(
                ({"domain": d.domain, "handler_path": d.handler_path} for d in config.domains),
                key=lambda d: d["domain"],
            ),
            "email_config": {"type": "shared"},
            "email_theme": ORIGINAL_DEFAULT_EMAIL_THEME_ID,
            "team_creator_default_permissions": _id_list(config.team_creator_default_permissions, team),
            "team_member_default_permissions": _id_list(config.team_member_default_permissions, team),
            "user_default_permissions": _id_list(config.user_default_permissions, project_scope),
            "allow_user_api_keys": config.allow_user_api_keys,
            "allow_team_api_keys": config.allow_team_api_keys,
        },
    }


def _id_list(ids: tuple[str, ...], defined: AbstractSet[str]) -> list[dict[str, str]]:
    return [{"id": i} for i in sorted(set(ids) & defined)]


def _without_definitions(config: dict[str, Any], *, compat: bool = False) -> dict[str, Any]:
    """The admin's config object: the permission definitions have endpoints of their own, and an OAuth provider's
    client secret is never returned (only whether one is set, and its last four characters)."""
    config.pop("permission_definitions", None)
    for provider in config.get("oauth_providers", ()):
        if compat:
            provider["provider_config_id"] = provider["id"]
        secret = provider.pop("client_secret", None)
        provider["client_secret_set"] = bool(secret)
        provider["client_secret_last_four"] = secret[-4:] if secret and len(secret) >= 12 else None
    return config


def render_user(
    user: User,
    access_type: AccessType,
    config: ProjectConfig,
    selected_team: Team | None = None,
    *,
    caller_id: str | None = None,
    caller_team_ids: AbstractSet[str] = frozenset(),
    compat: bool = False,
) -> dict[str, Any]:
    """A user as `access_type` may see it (`compat`: a client sees the original's client fields only).

    Our spec (its rule 4) hides exactly two fields from client access: `server_metadata` and
    `restricted_by_admin_private_details`; every field it marks "required in response" is in every response.
    Server and admin see everything. (The original hides more from clients; where our spec speaks, it wins.)

    A client never sees a team it is not a member of, by any route: the user's `selected_team` and
    `selected_team_id` are shown to a client only when the user is the caller (`caller_id`; a user's selected
    team is always one of theirs) or the team is one of `caller_team_ids`, the teams the caller is a member of;
    otherwise both are null, as for a user with no selected team.
    """
    if access_type is _CLIENT and user.id != caller_id and user.selected_team_id not in caller_team_ids:
        user, selected_team = replaced(user, {"selected_team_id": None}), None
    reason = restricted_reason(user, config)
    rendered: dict[str, Any] = {
        "id": user.id,
        "primary_email": user.primary_email,
        "primary_email_verified": user.primary_email_verified,
        "primary_email_auth_enabled": user.primary_email_auth_enabled,
        "display_name": user.display_name,
        "selected_team": None if selected_team is None else render_team(selected_team, access_type, compat=compat),
        "selected_team_id": user.selected_team_id,
        "profile_image_url": user.profile_image_url,
        "signed_up_at_millis": user.signed_up_at_millis,
        "last_active_at_millis": user.last_active_at_millis,
        "has_password": user.password_hash is not None,
        "otp_auth_enabled": user.otp_auth_enabled,
        "passkey_auth_enabled": bool(user.passkeys),
        "auth_with_email": user.password_hash is not None or user.otp_auth_enabled,
        "requires_totp_mfa": user.totp_secret_base64 is not None,
        "oauth_providers": _oauth_providers(user, config),
        "client_metadata": user.client_metadata,
        "client_read_only_metadata": user.client_read_only_metadata,
        "server_metadata": user.server_metadata,
        "is_anonymous": user.is_anonymous,
        "is_restricted": reason is not None,
        "restricted_reason": None if reason is None else {"type": reason},
        "restricted_by_admin": user.restricted_by_admin,
        "restricted_by_admin_reason": user.restricted_by_admin_reason,
        "restricted_by_admin_private_details": user.restricted_by_admin_private_details,
        "country_code": user.country_code,
        "risk_scores": {
            "sign_up": {"bot": user.risk_scores.bot, "free_trial_abuse": user.risk_scores.free_trial_abuse}
        },
    }
    if access_type is _CLIENT:
        for hidden in (*SERVER_ONLY_USER_FIELDS, *(ORIGINAL_SERVER_ONLY_USER_FIELDS if compat else ())):
            del rendered[hidden]
    return rendered


#: The only user fields client access never sees (spec, rule 4).
SERVER_ONLY_USER_FIELDS = ("server_metadata", "restricted_by_admin_private_details")
#: The fields the original shows server access only, besides those (compatibility mode).
ORIGINAL_SERVER_ONLY_USER_FIELDS = (
    "primary_email_auth_enabled",
    "last_active_at_millis",
    "country_code",
    "risk_scores",
)


def render_team(team: Team, access_type: AccessType, *, compat: bool = False) -> dict[str, Any]:
    """A team as `access_type` may see it: clients never see `server_metadata` (spec, rule 4), nor, in
    compatibility mode (`compat`), `created_at_millis` (the original's client view)."""
    rendered: dict[str, Any] = {
        "id": team.id,
        "display_name": team.display_name,
        "profile_image_url": team.profile_image_url,
        "created_at_millis": team.created_at_millis,
        "client_metadata": team.client_metadata,
        "client_read_only_metadata": team.client_read_only_metadata,
        "server_metadata": team.server_metadata,
    }
    if access_type is AccessType.CLIENT:
        del rendered["server_metadata"]
        if compat:
            del rendered["created_at_millis"]
    return rendered


def render_member_profile(
    membership: Membership,
    user: User,
    access_type: AccessType,
    config: ProjectConfig,
    selected_team: Team | None,
    *,
    caller_id: str | None = None,
    caller_team_ids: AbstractSet[str] = frozenset(),
    compat: bool = False,
) -> dict[str, Any]:
    """A team member profile: its own name and image, falling back to the user's until set, and the `user` as the
    caller may see it (our spec marks `user` required; the original sends it to server and admin only: so does
    `compat` mode), by the rules of `render_user`: a client sees the member's selected team only when it is a
    member of that team."""
    rendered: dict[str, Any] = {
        "team_id": membership.team_id,
        "user_id": membership.user_id,
        "display_name": membership.display_name if membership.display_name is not None else user.display_name,
        "profile_image_url": (
            membership.profile_image_url if membership.profile_image_url is not None else user.profile_image_url
        ),
    }
    if compat and access_type is AccessType.CLIENT:
        return rendered
    rendered["user"] = render_user(
        user, access_type, config, selected_team, caller_id=caller_id, caller_team_ids=caller_team_ids, compat=compat
    )
    return rendered


# --------------------------------------------------------------------------------------------------------------
# API keys


def render_api_key(key: ApiKey, *, full_key: str | None = None) -> dict[str, Any]:
    """An API key, the same for every access type (reference part 2 §5): optional times absent rather than null;
    `value` its last four characters, or, in the answer to its creation only, the whole key (`full_key`), without
    `manually_revoked_at_millis`."""
    owner = "user_id" if key.type is ApiKeyType.USER else "team_id"
    rendered: dict[str, Any] = {
        "id": key.id,
        "description": key.description,
        "is_public": key.is_public,
        "created_at_millis": key.created_at_millis,
        "type": key.type.value,
        owner: key.owner_id,
    }
    if key.expires_at_millis is not None:
        rendered["expires_at_millis"] = key.expires_at_millis
    if full_key is not None:
        rendered["value"] = full_key
        return rendered
    if key.manually_revoked_at_millis is not None:
        rendered["manually_revoked_at_millis"] = key.manually_revoked_at_millis
    rendered["value"] = {"last_four": key.last_four}
    return rendered


# contact channels
def render_contact_channel(channel: ContactChannel) -> dict[str, Any]:
    """A contact channel, the same for every access type (reference part 2 §2)."""
    return {
        "id": channel.id,
        "user_id": channel.user_id,
        "type": "email",
        "value": channel.value,
        "is_primary": channel.is_primary,
        "is_verified": channel.is_verified,
        "used_for_auth": channel.used_for_auth,
    }


def _oauth_providers(user: User, config: ProjectConfig) -> list[dict[str, Any]]:
    """A user's linked provider accounts as the user object lists them (reference §7.4: `{id, account_id, email}`),
    skipping accounts of providers the project no longer configures (as the original's list does)."""
    if not user.oauth_accounts:
        return []
    configured = {p.id for p in config.oauth_providers}
    return [
        {"id": a.provider_config_id, "account_id": a.account_id, "email": a.email}
        for a in user.oauth_accounts
        if a.provider_config_id in configured
    ]
