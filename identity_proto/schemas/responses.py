"""What the service answers: the JSON Schema of every success body, in one place.

The renderers (`identity_proto.render`, and the few flows that render their own objects) build plain dicts; these
schemas describe them, and are checked against them: tests/unit/test_openapi.py validates rendered objects of every
access type against the document, and tests/hardening/test_schemathesis.py validates every response schemathesis
provokes, on the memory store and on Redis. Objects are closed (`additionalProperties: false`): a field added to a
renderer and not here fails those tests, so the document cannot drift from what is sent.

The document describes the default mode. Compatibility mode (`IDENTITY_COMPAT=stack`) answers some objects in the
original's shapes (fewer user and team fields for clients, the original's project views, `provider_config_id` on
OAuth providers); those are the original's and are not described here.

Access types: where client access sees fewer fields than server and admin (users, teams, OAuth accounts), an object
has ONE schema, with the fields only server and admin see listed but not required, each marked in its description
and by `x-visible-to: [server, admin]`. One type per object is what client generators handle best (a `oneOf` of
two near-identical objects without a discriminator gives most of them an untyped union); a client SDK simply never
finds those fields set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["COMPONENTS", "REDIRECTS", "RESPONSE_SCHEMAS", "response_schema"]

Schema = dict[str, Any]

_REF = "#/components/schemas/{model}"


def ref(name: str) -> Schema:
    return {"$ref": _REF.format(model=name)}


def nullable(schema: Schema) -> Schema:
    if set(schema) == {"type"} and isinstance(schema["type"], str):
        return {"type": [schema["type"], "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def obj(required: Mapping[str, Schema], optional: Mapping[str, Schema] | None = None, **extra: Any) -> Schema:
    """A closed object: every key of `required` always present, those of `optional` present or absent."""
    schema: Schema = {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
        "additionalProperties": False,
    }
    schema.update(extra)
    return schema


def server_only(schema: Schema) -> Schema:
    """A field that only server and admin access see (absent for client access)."""
    return {
        **schema,
        "description": "Server and admin access only: absent for client access.",
        "x-visible-to": ["server", "admin"],
    }


STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
INTEGER: Schema = {"type": "integer"}
MILLIS: Schema = {"type": "integer", "description": "Milliseconds since the Unix epoch."}
UUID: Schema = {"type": "string", "format": "uuid"}
ANY_JSON: Schema = {"description": "Any JSON value the owner stored (free-form metadata)."}
TRUE: Schema = {"const": True}


def listing(item: Schema) -> Schema:
    return obj({"items": {"type": "array", "items": item}, "is_paginated": {"const": False}})


# --------------------------------------------------------------------------------------------------------------
# Objects (components)

_TEAM = obj(
    {
        "id": UUID,
        "display_name": STRING,
        "profile_image_url": nullable(STRING),
        "created_at_millis": MILLIS,
        "client_metadata": ANY_JSON,
        "client_read_only_metadata": ANY_JSON,
    },
    {"server_metadata": server_only(ANY_JSON)},
    description="A team (render.render_team).",
)

_USER = obj(
    {
        "id": UUID,
        "primary_email": nullable(STRING),
        "primary_email_verified": BOOLEAN,
        "primary_email_auth_enabled": BOOLEAN,
        "display_name": nullable(STRING),
        "selected_team": nullable(ref("Team")),
        "selected_team_id": nullable(UUID),
        "profile_image_url": nullable(STRING),
        "signed_up_at_millis": MILLIS,
        "last_active_at_millis": MILLIS,
        "has_password": BOOLEAN,
        "otp_auth_enabled": BOOLEAN,
        "passkey_auth_enabled": BOOLEAN,
        "auth_with_email": BOOLEAN,
        "requires_totp_mfa": BOOLEAN,
        "oauth_providers": {
            "type": "array",
            "items": obj({"id": STRING, "account_id": STRING, "email": nullable(STRING)}),
        },
        "client_metadata": ANY_JSON,
        "client_read_only_metadata": ANY_JSON,
        "is_anonymous": BOOLEAN,
        "is_restricted": BOOLEAN,
        "restricted_reason": nullable(
            obj({"type": {"enum": ["anonymous", "email_not_verified", "restricted_by_administrator"]}})
        ),
        "restricted_by_admin": BOOLEAN,
        "restricted_by_admin_reason": nullable(STRING),
        "country_code": nullable(STRING),
        "risk_scores": obj(
            {
                "sign_up": obj(
                    {
                        "bot": {"type": "integer", "minimum": 0, "maximum": 100},
                        "free_trial_abuse": {"type": "integer", "minimum": 0, "maximum": 100},
                    }
                )
            }
        ),
    },
    {
        "server_metadata": server_only(ANY_JSON),
        "restricted_by_admin_private_details": server_only(nullable(STRING)),
    },
    description="A user (render.render_user).",
)

_DOMAIN = obj({"domain": STRING, "handler_path": STRING})
_PUBLIC_CONFIG = {
    "sign_up_enabled": BOOLEAN,
    "credential_enabled": BOOLEAN,
    "magic_link_enabled": BOOLEAN,
    "passkey_enabled": BOOLEAN,
    "client_team_creation_enabled": BOOLEAN,
    "client_user_deletion_enabled": BOOLEAN,
    "allow_localhost": BOOLEAN,
    "domains": {"type": "array", "items": _DOMAIN},
    "allow_team_api_keys": BOOLEAN,
    "allow_user_api_keys": BOOLEAN,
    "enabled_oauth_providers": {"type": "array", "items": obj({"id": STRING})},
}
_STRINGS: Schema = {"type": "array", "items": STRING}
_ADMIN_CONFIG = {
    **_PUBLIC_CONFIG,
    "create_team_on_sign_up": BOOLEAN,
    "require_email_verification": BOOLEAN,
    "require_publishable_client_key": BOOLEAN,
    "team_creator_default_permissions": _STRINGS,
    "team_member_default_permissions": _STRINGS,
    "user_default_permissions": _STRINGS,
    "rate_limits": {
        "type": "object",
        "additionalProperties": obj({"limit": INTEGER, "window_seconds": INTEGER}),
        "description": "The rules this project sets itself, by name.",
    },
    "oauth_providers": {
        "type": "array",
        "items": obj(
            {
                "id": STRING,
                "type": STRING,
                "client_id": nullable(STRING),
                "allow_sign_in": BOOLEAN,
                "allow_connected_accounts": BOOLEAN,
                "issuer_url": nullable(STRING),
                "microsoft_tenant_id": nullable(STRING),
                "client_secret_set": BOOLEAN,
                "client_secret_last_four": nullable(STRING),
            },
        ),
    },
    "oauth_account_merge_strategy": STRING,
}
_CLIENT_PROJECT = obj(
    {"id": STRING, "display_name": STRING, "config": obj(_PUBLIC_CONFIG)},
    description="The current project as client and server access see it (render.render_project).",
)
_ADMIN_PROJECT = obj(
    {"id": STRING, "display_name": STRING, "created_at_millis": MILLIS, "config": obj(_ADMIN_CONFIG)},
    description="A project as admin access sees it (render.render_project): its whole config but secrets.",
)
_CREATED_PROJECT = obj(
    {
        **_ADMIN_PROJECT["properties"],
        "publishable_client_key": STRING,
        "secret_server_key": STRING,
        "super_secret_admin_key": STRING,
    },
    description="A new project with its three keys, shown this once.",
)

_API_KEY_FIELDS = {
    "id": UUID,
    "description": STRING,
    "is_public": BOOLEAN,
    "created_at_millis": MILLIS,
    "type": {"enum": ["user", "team"]},
}
_API_KEY_OPTIONAL = {"user_id": UUID, "team_id": UUID, "expires_at_millis": MILLIS}
_API_KEY = obj(
    {**_API_KEY_FIELDS, "value": obj({"last_four": STRING})},
    {**_API_KEY_OPTIONAL, "manually_revoked_at_millis": MILLIS},
    description="An API key (render.render_api_key); `user_id` for a user's key, `team_id` for a team's.",
)
_NEW_API_KEY = obj(
    {**_API_KEY_FIELDS, "value": {"type": "string", "description": "The whole key: shown this once."}},
    _API_KEY_OPTIONAL,
    description="A new API key, with the whole key.",
)

_CONTACT_CHANNEL = obj(
    {
        "id": UUID,
        "user_id": UUID,
        "type": {"const": "email"},
        "value": STRING,
        "is_primary": BOOLEAN,
        "is_verified": BOOLEAN,
        "used_for_auth": BOOLEAN,
    },
    description="A contact channel (render.render_contact_channel).",
)

_MEMBER_PROFILE = obj(
    {"team_id": UUID, "user_id": UUID, "display_name": nullable(STRING), "profile_image_url": nullable(STRING)},
    {"user": ref("User")},
    description="A team member profile (render.render_member_profile); `user` always in the default mode.",
)
_MEMBER_PROFILE["required"].append("user")

_OAUTH_ACCOUNT = obj(
    {
        "user_id": UUID,
        "id": STRING,
        "provider_config_id": STRING,
        "type": STRING,
        "allow_sign_in": BOOLEAN,
        "allow_connected_accounts": BOOLEAN,
    },
    {"email": STRING, "account_id": server_only(STRING)},
    description="A user's OAuth account as /oauth-providers lists it (flows.oauth_accounts.render_oauth_account).",
)

_PERMISSION_DEFINITION = obj(
    {"id": STRING, "contained_permission_ids": _STRINGS},
    {"description": STRING},
    description="A permission definition; `description` absent when there is none.",
)

_SESSION = obj(
    {
        "id": UUID,
        "user_id": UUID,
        "created_at": MILLIS,
        "last_used_at": nullable(MILLIS),
        "is_impersonation": BOOLEAN,
        "is_current_session": BOOLEAN,
    }
)

_INVITATION = obj(
    {"id": UUID, "team_id": UUID, "team_display_name": STRING, "expires_at_millis": MILLIS, "recipient_email": STRING}
)

_WEBHOOK_ENDPOINT_FIELDS = {
    "id": UUID,
    "url": STRING,
    "description": nullable(STRING),
    "event_types": nullable(_STRINGS),
    "disabled": BOOLEAN,
    "created_at_millis": MILLIS,
    "previous_secret_expires_at_millis": nullable(MILLIS),
}
_WEBHOOK_ENDPOINT = obj(_WEBHOOK_ENDPOINT_FIELDS, description="A webhook endpoint; its secret is never read back.")
_WEBHOOK_ENDPOINT_WITH_SECRET = obj(
    {**_WEBHOOK_ENDPOINT_FIELDS, "secret": STRING}, description="A webhook endpoint with its (new) signing secret."
)
_DELIVERY = obj(
    {
        "message_id": STRING,
        "event_type": STRING,
        "state": STRING,
        "created_at_millis": MILLIS,
        "next_attempt_at_millis": nullable(MILLIS),
        "attempts": {
            "type": "array",
            "items": obj(
                {
                    "at_millis": MILLIS,
                    "status_code": nullable(INTEGER),
                    "latency_ms": nullable({"type": "number"}),
                    "error": nullable(STRING),
                }
            ),
        },
    }
)

_SIGN_IN = obj(
    {"refresh_token": STRING, "access_token": STRING, "user_id": UUID},
    {"is_new_user": BOOLEAN},
    description="A new session's tokens.",
)

_OUTBOX_MAIL = obj(
    {
        "id": STRING,
        "to": STRING,
        "subject": STRING,
        "text": STRING,
        "created_at_millis": MILLIS,
        "code": nullable(STRING),
        "magic_link": nullable(STRING),
    }
)

_RECORDS: Schema = {"type": "array", "items": {"type": "object"}, "description": "Records as the store keeps them."}
_EXPORT = obj(
    {
        "format": {"const": "identity-service/project-data"},
        "version": INTEGER,
        "exported_at_millis": MILLIS,
        "project": obj({"id": STRING, "display_name": STRING, "config": {"type": "object"}}),
        "users": _RECORDS,
        "contact_channels": _RECORDS,
        "teams": _RECORDS,
        "memberships": _RECORDS,
        "project_permissions": {
            "type": "array",
            "items": obj({"user_id": UUID, "permission_ids": {"type": "array", "items": STRING}}),
        },
        "api_keys": _RECORDS,
        "team_invitations": _RECORDS,
        "webhook_endpoints": _RECORDS,
    },
    description="A project's data (docs: export and import); the records' fields are described there.",
)

_JWK: Schema = {"type": "object", "required": ["kty"], "properties": {"kty": STRING}, "description": "A public JWK."}

#: Every named object of the responses, as the document's components.
COMPONENTS: dict[str, Schema] = {
    "User": _USER,
    "Team": _TEAM,
    "ClientProject": _CLIENT_PROJECT,
    "AdminProject": _ADMIN_PROJECT,
    "CreatedProject": _CREATED_PROJECT,
    "ApiKey": _API_KEY,
    "NewApiKey": _NEW_API_KEY,
    "ContactChannel": _CONTACT_CHANNEL,
    "TeamMemberProfile": _MEMBER_PROFILE,
    "OAuthAccount": _OAUTH_ACCOUNT,
    "PermissionDefinition": _PERMISSION_DEFINITION,
    "Session": _SESSION,
    "TeamInvitation": _INVITATION,
    "WebhookEndpoint": _WEBHOOK_ENDPOINT,
    "WebhookEndpointWithSecret": _WEBHOOK_ENDPOINT_WITH_SECRET,
    "WebhookDelivery": _DELIVERY,
    "SignInResult": _SIGN_IN,
    "OutboxMail": _OUTBOX_MAIL,
    "Success": obj({"success": TRUE}),
    "ProjectExport": _EXPORT,
}

_SUCCESS = ref("Success")
_CODE_VALID = obj({"is_code_valid": TRUE})
_EMPTY = obj({})
_ACCESS_TOKEN = obj({"access_token": STRING})
_OAUTH_TOKENS = obj(
    {
        "access_token": STRING,
        "token_type": {"const": "Bearer"},
        "expires_in": INTEGER,
        "refresh_token": STRING,
        "scope": STRING,
        "is_new_user": BOOLEAN,
        "newUser": BOOLEAN,
        "after_callback_redirect_url": nullable(STRING),
        "afterCallbackRedirectUrl": nullable(STRING),
    },
    description="The authorization-code grant's answer.",
)
_OAUTH_REFRESHED = obj({"access_token": STRING, "token_type": {"const": "Bearer"}, "expires_in": INTEGER})
_CLOCK = obj({"now_millis": MILLIS, "frozen": BOOLEAN, "offset_millis": INTEGER})
_V1 = "/api/v1"
_MOCK = "/mock-oauth"

#: (method, path pattern) -> the schema of its JSON success body. Every route answering JSON has one (a unit test
#: checks the route table against this).
RESPONSE_SCHEMAS: dict[tuple[str, str], Schema] = {
    ("GET", f"{_V1}/openapi.json"): {
        "type": "object",
        "required": ["openapi", "paths"],
        "description": "This document.",
    },
    ("GET", "/health"): obj({"status": {"const": "ok"}}),
    ("GET", f"{_V1}/internal/backend-urls"): obj({"urls": _STRINGS}),
    # projects
    ("GET", f"{_V1}/projects/current"): {
        "anyOf": [ref("ClientProject"), ref("AdminProject")],
        "description": "ClientProject for client and server access, AdminProject for admin access.",
    },
    ("PATCH", f"{_V1}/projects/current"): ref("AdminProject"),
    ("GET", f"{_V1}/projects/{{project_id}}/.well-known/jwks.json"): obj({"keys": {"type": "array", "items": _JWK}}),
    ("GET", f"{_V1}/internal/projects"): listing(ref("AdminProject")),
    ("POST", f"{_V1}/internal/projects"): ref("CreatedProject"),
    ("DELETE", f"{_V1}/internal/projects/{{project_id}}"): _SUCCESS,
    # sign-in
    ("POST", f"{_V1}/auth/otp/send-sign-in-code"): obj({"nonce": STRING}),
    ("POST", f"{_V1}/auth/otp/sign-in"): ref("SignInResult"),
    ("POST", f"{_V1}/auth/otp/sign-in/check-code"): _CODE_VALID,
    ("POST", f"{_V1}/auth/mfa/sign-in"): ref("SignInResult"),
    ("POST", f"{_V1}/auth/password/sign-up"): ref("SignInResult"),
    ("POST", f"{_V1}/auth/password/sign-in"): ref("SignInResult"),
    ("POST", f"{_V1}/auth/anonymous/sign-up"): ref("SignInResult"),
    ("POST", f"{_V1}/auth/password/send-reset-code"): obj(
        {"success": {"const": "maybe, only if user with e-mail exists"}}
    ),
    ("POST", f"{_V1}/auth/password/reset"): _SUCCESS,
    ("POST", f"{_V1}/auth/password/reset/check-code"): _CODE_VALID,
    ("POST", f"{_V1}/auth/password/update"): _SUCCESS,
    ("POST", f"{_V1}/auth/password/set"): _SUCCESS,
    # sessions
    ("POST", f"{_V1}/auth/sessions/current/refresh"): _ACCESS_TOKEN,
    ("POST", f"{_V1}/auth/oauth/token"): {"anyOf": [_OAUTH_TOKENS, _OAUTH_REFRESHED]},
    ("POST", f"{_V1}/auth/oauth/cross-domain/authorize"): obj({"redirect_url": STRING}),
    ("GET", f"{_V1}/auth/oauth/authorize/{{provider_id}}"): obj(
        {"location": STRING}, description="With stack_response_mode=json; otherwise a 307 redirect."
    ),
    ("DELETE", f"{_V1}/auth/sessions/current"): _SUCCESS,
    ("POST", f"{_V1}/auth/sessions"): obj({"refresh_token": STRING, "access_token": STRING}),
    ("GET", f"{_V1}/auth/sessions"): listing(ref("Session")),
    ("DELETE", f"{_V1}/auth/sessions/{{session_id}}"): _SUCCESS,
    ("GET", f"{_V1}/emails/outbox"): listing(ref("OutboxMail")),
    # users
    ("GET", f"{_V1}/users/me"): ref("User"),
    ("PATCH", f"{_V1}/users/me"): ref("User"),
    ("DELETE", f"{_V1}/users/me"): _SUCCESS,
    ("GET", f"{_V1}/users"): obj(
        {
            "items": {"type": "array", "items": ref("User")},
            "is_paginated": {"const": True},
            "pagination": obj({"next_cursor": nullable(STRING)}),
        }
    ),
    ("POST", f"{_V1}/users"): ref("User"),
    ("GET", f"{_V1}/users/{{user_id}}"): ref("User"),
    ("PATCH", f"{_V1}/users/{{user_id}}"): ref("User"),
    ("DELETE", f"{_V1}/users/{{user_id}}"): _SUCCESS,
    # teams
    ("POST", f"{_V1}/teams"): ref("Team"),
    ("GET", f"{_V1}/teams"): listing(ref("Team")),
    ("GET", f"{_V1}/teams/{{team_id}}"): ref("Team"),
    ("PATCH", f"{_V1}/teams/{{team_id}}"): ref("Team"),
    ("DELETE", f"{_V1}/teams/{{team_id}}"): _SUCCESS,
    ("POST", f"{_V1}/team-memberships/{{team_id}}/{{user_id}}"): obj({"team_id": UUID, "user_id": UUID}),
    ("DELETE", f"{_V1}/team-memberships/{{team_id}}/{{user_id}}"): _SUCCESS,
    # permissions
    ("GET", f"{_V1}/team-permissions"): listing(obj({"id": STRING, "team_id": UUID, "user_id": UUID})),
    ("POST", f"{_V1}/team-permissions/{{team_id}}/{{user_id}}/{{permission_id}}"): obj(
        {"id": STRING, "team_id": UUID, "user_id": UUID}
    ),
    ("DELETE", f"{_V1}/team-permissions/{{team_id}}/{{user_id}}/{{permission_id}}"): _SUCCESS,
    ("GET", f"{_V1}/project-permissions"): listing(obj({"id": STRING, "user_id": UUID})),
    ("POST", f"{_V1}/project-permissions/{{user_id}}/{{permission_id}}"): obj({"id": STRING, "user_id": UUID}),
    ("DELETE", f"{_V1}/project-permissions/{{user_id}}/{{permission_id}}"): _SUCCESS,
    ("GET", f"{_V1}/team-permission-definitions"): listing(ref("PermissionDefinition")),
    ("POST", f"{_V1}/team-permission-definitions"): ref("PermissionDefinition"),
    ("PATCH", f"{_V1}/team-permission-definitions/{{permission_id}}"): ref("PermissionDefinition"),
    ("DELETE", f"{_V1}/team-permission-definitions/{{permission_id}}"): _SUCCESS,
    ("GET", f"{_V1}/project-permission-definitions"): listing(ref("PermissionDefinition")),
    ("POST", f"{_V1}/project-permission-definitions"): ref("PermissionDefinition"),
    ("PATCH", f"{_V1}/project-permission-definitions/{{permission_id}}"): ref("PermissionDefinition"),
    ("DELETE", f"{_V1}/project-permission-definitions/{{permission_id}}"): _SUCCESS,
    # team member profiles
    ("GET", f"{_V1}/team-member-profiles"): listing(ref("TeamMemberProfile")),
    ("GET", f"{_V1}/team-member-profiles/{{team_id}}/{{user_id}}"): ref("TeamMemberProfile"),
    ("PATCH", f"{_V1}/team-member-profiles/{{team_id}}/{{user_id}}"): ref("TeamMemberProfile"),
    # API keys
    ("POST", f"{_V1}/user-api-keys"): ref("NewApiKey"),
    ("GET", f"{_V1}/user-api-keys"): listing(ref("ApiKey")),
    ("POST", f"{_V1}/user-api-keys/check"): ref("ApiKey"),
    ("GET", f"{_V1}/user-api-keys/{{api_key_id}}"): ref("ApiKey"),
    ("PATCH", f"{_V1}/user-api-keys/{{api_key_id}}"): ref("ApiKey"),
    ("POST", f"{_V1}/team-api-keys"): ref("NewApiKey"),
    ("GET", f"{_V1}/team-api-keys"): listing(ref("ApiKey")),
    ("POST", f"{_V1}/team-api-keys/check"): ref("ApiKey"),
    ("GET", f"{_V1}/team-api-keys/{{api_key_id}}"): ref("ApiKey"),
    ("PATCH", f"{_V1}/team-api-keys/{{api_key_id}}"): ref("ApiKey"),
    # team invitations
    ("POST", f"{_V1}/team-invitations/send-code"): obj({"success": TRUE, "id": UUID}),
    ("GET", f"{_V1}/team-invitations"): listing(ref("TeamInvitation")),
    ("DELETE", f"{_V1}/team-invitations/{{invitation_id}}"): _SUCCESS,
    ("POST", f"{_V1}/team-invitations/accept"): _EMPTY,
    ("POST", f"{_V1}/team-invitations/accept/check-code"): _CODE_VALID,
    ("POST", f"{_V1}/team-invitations/accept/details"): obj({"team_id": UUID, "team_display_name": STRING}),
    ("POST", f"{_V1}/team-invitations/{{invitation_id}}/accept"): _EMPTY,
    # contact channels
    ("GET", f"{_V1}/contact-channels"): listing(ref("ContactChannel")),
    ("POST", f"{_V1}/contact-channels"): ref("ContactChannel"),
    ("GET", f"{_V1}/contact-channels/{{user_id}}/{{contact_channel_id}}"): ref("ContactChannel"),
    ("PATCH", f"{_V1}/contact-channels/{{user_id}}/{{contact_channel_id}}"): ref("ContactChannel"),
    ("DELETE", f"{_V1}/contact-channels/{{user_id}}/{{contact_channel_id}}"): _SUCCESS,
    ("POST", f"{_V1}/contact-channels/verify"): _SUCCESS,
    ("POST", f"{_V1}/contact-channels/verify/check-code"): _CODE_VALID,
    ("POST", f"{_V1}/contact-channels/send-verification-code"): _SUCCESS,
    ("POST", f"{_V1}/contact-channels/{{user_id}}/{{contact_channel_id}}/send-verification-code"): _SUCCESS,
    # OAuth accounts
    ("GET", f"{_V1}/oauth-providers"): listing(ref("OAuthAccount")),
    ("POST", f"{_V1}/oauth-providers"): ref("OAuthAccount"),
    ("GET", f"{_V1}/oauth-providers/{{user_id}}/{{provider_id}}"): ref("OAuthAccount"),
    ("PATCH", f"{_V1}/oauth-providers/{{user_id}}/{{provider_id}}"): ref("OAuthAccount"),
    ("DELETE", f"{_V1}/oauth-providers/{{user_id}}/{{provider_id}}"): _SUCCESS,
    ("GET", f"{_V1}/connected-accounts/{{user_id}}"): listing(
        obj({"user_id": UUID, "provider": STRING, "provider_account_id": STRING})
    ),
    (
        "POST",
        f"{_V1}/connected-accounts/{{user_id}}/{{provider_id}}/{{provider_account_id}}/access-token",
    ): _ACCESS_TOKEN,
    ("POST", f"{_V1}/connected-accounts/{{user_id}}/{{provider_id}}/access-token"): _ACCESS_TOKEN,
    ("POST", f"{_V1}/auth/oauth/connected-accounts/{{provider_id}}/access-token"): _ACCESS_TOKEN,
    # webhooks
    ("POST", f"{_V1}/webhook-endpoints"): ref("WebhookEndpointWithSecret"),
    ("GET", f"{_V1}/webhook-endpoints"): listing(ref("WebhookEndpoint")),
    ("GET", f"{_V1}/webhook-endpoints/{{endpoint_id}}"): ref("WebhookEndpoint"),
    ("PATCH", f"{_V1}/webhook-endpoints/{{endpoint_id}}"): ref("WebhookEndpoint"),
    ("DELETE", f"{_V1}/webhook-endpoints/{{endpoint_id}}"): _SUCCESS,
    ("POST", f"{_V1}/webhook-endpoints/{{endpoint_id}}/rotate-secret"): ref("WebhookEndpointWithSecret"),
    ("GET", f"{_V1}/webhook-endpoints/{{endpoint_id}}/deliveries"): listing(ref("WebhookDelivery")),
    ("POST", f"{_V1}/webhook-endpoints/{{endpoint_id}}/deliveries/{{message_id}}/replay"): ref("WebhookDelivery"),
    ("POST", f"{_V1}/webhook-endpoints/{{endpoint_id}}/test"): obj(
        {"message_id": STRING, "type": STRING, "data": {"type": "object"}}
    ),
    ("POST", f"{_V1}/internal/send-test-webhook"): obj({"success": BOOLEAN}, {"error_message": STRING}),
    # testing (dev/test mode)
    ("GET", f"{_V1}/testing/clock"): _CLOCK,
    ("POST", f"{_V1}/testing/clock"): _CLOCK,
    ("POST", f"{_V1}/testing/projects/{{project_id}}/reset"): _SUCCESS,
    ("GET", f"{_V1}/testing/projects/{{project_id}}/export"): ref("ProjectExport"),
    ("POST", f"{_V1}/testing/projects/{{project_id}}/import"): obj(
        {"imported": {"type": "object", "additionalProperties": INTEGER, "description": "Records imported, by kind."}}
    ),
    # the mock OAuth provider (dev/test mode)
    ("GET", f"{_MOCK}/.well-known/openid-configuration"): {
        "type": "object",
        "required": ["issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"],
        "properties": dict.fromkeys(
            ("issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri"), STRING
        ),
    },
    ("POST", f"{_MOCK}/token"): obj(
        {"access_token": STRING, "token_type": {"const": "Bearer"}, "expires_in": INTEGER, "scope": STRING},
        {"refresh_token": STRING, "id_token": STRING},
    ),
    ("GET", f"{_MOCK}/userinfo"): obj({"sub": STRING, "email": STRING, "email_verified": BOOLEAN}, {"name": STRING}),
    ("GET", f"{_MOCK}/jwks"): obj({"keys": {"type": "array", "items": _JWK}}),
    ("POST", f"{_MOCK}/hooks/fail-next"): obj({"kind": STRING, "client_id": STRING}),
    ("POST", f"{_MOCK}/hooks/revoke"): obj({"revoked": BOOLEAN}),
}

#: Routes whose success is (or may be) a redirect: status -> what it is. A route listed here with no entry in
#: RESPONSE_SCHEMAS answers only the redirect.
REDIRECTS: dict[tuple[str, str], dict[int, str]] = {
    ("GET", f"{_V1}/auth/oauth/authorize/{{provider_id}}"): {307: "To the provider's authorization page."},
    ("GET", f"{_V1}/auth/oauth/callback/{{provider_id}}"): {303: "Back to the app, with a one-time code."},
    ("POST", f"{_V1}/auth/oauth/callback/{{provider_id}}"): {303: "Back to the app, with a one-time code."},
    ("POST", f"{_MOCK}/authorize"): {303: "Back to the client's redirect URI, with a code."},
}


def response_schema(method: str, pattern: str) -> Schema | None:
    """The schema of the JSON success body of a route; None when the document has none for it."""
    return RESPONSE_SCHEMAS.get((method, pattern))
