"""Request schemas (pydantic models) and their translation into SCHEMA_ERROR.

Rules:
- Unknown keys are never dropped: every model forbids extra keys, at every nesting level, and the error reads
  like the original's: `body contains unknown properties: a, b` (reference §0.1).
- JSON bodies are validated strictly (no "123" for a number); query strings, which are text by nature, laxly.
- All errors of one request are collected into one SCHEMA_ERROR whose `details.message` starts with
  `Request validation failed on <METHOD> <path>:` and lists one `  - <message>` line per problem.
- A route that takes no query or no body has no model for it: `validate_nothing` checks that input, in the words
  a model without fields would use, without pydantic.

The models are split by resource (`base` holds the bases, the validation and the field rules models share;
`problems` what validating gives and its wording, free of pydantic). Import from this package: it re-exports every
name.

Each name below `_LAZY` is loaded the first time something asks the package for it (PEP 562). The route table
imports its models (and so pydantic); each model's validator is built by its first use (`defer_build`), or by
`Service.prepare` when a serving host starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from identity_proto.schemas.problems import Validated, schema_error, validate_nothing

if TYPE_CHECKING:
    from identity_proto.schemas.api_keys import (
        MAX_EXPIRES_AT_MILLIS,
        ApiKeyCheckBody,
        ApiKeyIdParams,
        ApiKeyUpdateBody,
        TeamApiKeyCreateBody,
        TeamApiKeysQuery,
        UserApiKeyCreateBody,
        UserApiKeysQuery,
    )
    from identity_proto.schemas.base import (
        MAX_METADATA_BYTES,
        MAX_PROFILE_IMAGE_BYTES,
        Body,
        IgnoredBody,
        M,
        Query,
        is_uuid,
        validate_model,
    )
    from identity_proto.schemas.contact_channels import (
        ClientContactChannelCreateBody,
        ClientContactChannelUpdateBody,
        ContactChannelParams,
        ListContactChannelsQuery,
        SendChannelVerificationBody,
        SendPrimaryVerificationBody,
        ServerContactChannelCreateBody,
        ServerContactChannelUpdateBody,
        VerificationCodeBody,
    )
    from identity_proto.schemas.meta import HealthQuery
    from identity_proto.schemas.mock_oauth import (
        MockAuthorizeParams,
        MockFailNextBody,
        MockRevokeBody,
        MockTokenForm,
    )
    from identity_proto.schemas.oauth import (
        CrossDomainAuthorizeBody,
        OAuthAuthorizeQuery,
        OAuthCallbackForm,
        OAuthCallbackInput,
        OAuthProviderIdParams,
        OAuthTokenGrantBody,
    )
    from identity_proto.schemas.oauth_accounts import (
        ClientOAuthProviderUpdateBody,
        ConnectedAccessTokenBody,
        ConnectedAccessTokenParams,
        ConnectedAccountsParams,
        DeprecatedConnectedAccessTokenParams,
        LegacyConnectedAccessTokenParams,
        ListOAuthProvidersQuery,
        OAuthProviderCreateBody,
        OAuthProviderIn,
        OAuthProviderParams,
        ServerOAuthProviderUpdateBody,
    )
    from identity_proto.schemas.outbox import (
        OutboxQuery,
    )
    from identity_proto.schemas.passkeys import PasskeyRegisterBody, PasskeySignInBody
    from identity_proto.schemas.passwords import (
        ResetCodeBody,
        ResetPasswordBody,
        SendResetCodeBody,
        SetPasswordBody,
        UpdatePasswordBody,
    )
    from identity_proto.schemas.permissions import (
        ListProjectPermissionsQuery,
        ListTeamPermissionsQuery,
        PermissionDefinitionCreateBody,
        PermissionDefinitionParams,
        PermissionDefinitionUpdateBody,
        ProjectPermissionParams,
        TeamPermissionParams,
    )
    from identity_proto.schemas.projects import (
        AnyProjectIdParams,
        DomainIn,
        JwksQuery,
        OriginalProjectUpdateBody,
        ProjectConfigPatch,
        ProjectCreateBody,
        ProjectIdParams,
        ProjectUpdateBody,
        RateLimitIn,
    )
    from identity_proto.schemas.sessions import (
        MAX_SESSION_LIFETIME_MS,
        CreateSessionBody,
        ListSessionsQuery,
        SessionIdParams,
        SessionUserQuery,
    )
    from identity_proto.schemas.sign_in import (
        CodeBody,
        MfaSignInBody,
        PasswordSignInBody,
        PasswordSignUpBody,
        SendSignInCodeBody,
    )
    from identity_proto.schemas.team_invitations import (
        AcceptTeamInvitationQuery,
        ListTeamInvitationsQuery,
        RevokeTeamInvitationQuery,
        SendTeamInvitationBody,
        TeamInvitationCodeBody,
        TeamInvitationIdParams,
    )
    from identity_proto.schemas.teams import (
        ClientTeamCreateBody,
        ClientTeamUpdateBody,
        ListMembershipsQuery,
        ListTeamsQuery,
        MemberProfileUpdateBody,
        MembershipParams,
        PermissionParams,
        ServerTeamCreateBody,
        ServerTeamUpdateBody,
        TeamIdParams,
    )
    from identity_proto.schemas.testing import (
        ClockBody,
        ImportBody,
    )
    from identity_proto.schemas.users import (
        ClientUserUpdateBody,
        ListUsersQuery,
        RiskScoresIn,
        ServerUserUpdateBody,
        SignUpRiskScores,
        UserCreateBody,
        UserIdParams,
    )
    from identity_proto.schemas.webhooks import (
        SendTestWebhookBody,
        WebhookDeliveriesQuery,
        WebhookEndpointCreateBody,
        WebhookEndpointParams,
        WebhookEndpointUpdateBody,
        WebhookMessageParams,
    )


#: module of this package -> the names it defines that the package re-exports, loaded on first use.
_LAZY: dict[str, tuple[str, ...]] = {
    "api_keys": (
        "MAX_EXPIRES_AT_MILLIS",
        "ApiKeyCheckBody",
        "ApiKeyIdParams",
        "ApiKeyUpdateBody",
        "TeamApiKeyCreateBody",
        "TeamApiKeysQuery",
        "UserApiKeyCreateBody",
        "UserApiKeysQuery",
    ),
    "base": (
        "MAX_METADATA_BYTES",
        "MAX_PROFILE_IMAGE_BYTES",
        "Body",
        "IgnoredBody",
        "M",
        "Query",
        "is_uuid",
        "validate_model",
    ),
    "mock_oauth": ("MockAuthorizeParams", "MockFailNextBody", "MockRevokeBody", "MockTokenForm"),
    "meta": ("HealthQuery",),
    "outbox": ("OutboxQuery",),
    "oauth": (
        "CrossDomainAuthorizeBody",
        "OAuthAuthorizeQuery",
        "OAuthCallbackForm",
        "OAuthCallbackInput",
        "OAuthProviderIdParams",
        "OAuthTokenGrantBody",
    ),
    "permissions": (
        "ListProjectPermissionsQuery",
        "ListTeamPermissionsQuery",
        "PermissionDefinitionCreateBody",
        "PermissionDefinitionParams",
        "PermissionDefinitionUpdateBody",
        "ProjectPermissionParams",
        "TeamPermissionParams",
    ),
    "passwords": ("ResetCodeBody", "ResetPasswordBody", "SendResetCodeBody", "SetPasswordBody", "UpdatePasswordBody"),
    "contact_channels": (
        "ClientContactChannelCreateBody",
        "ClientContactChannelUpdateBody",
        "ContactChannelParams",
        "ListContactChannelsQuery",
        "SendChannelVerificationBody",
        "SendPrimaryVerificationBody",
        "ServerContactChannelCreateBody",
        "ServerContactChannelUpdateBody",
        "VerificationCodeBody",
    ),
    "oauth_accounts": (
        "ClientOAuthProviderUpdateBody",
        "ConnectedAccessTokenBody",
        "ConnectedAccessTokenParams",
        "ConnectedAccountsParams",
        "DeprecatedConnectedAccessTokenParams",
        "LegacyConnectedAccessTokenParams",
        "ListOAuthProvidersQuery",
        "OAuthProviderCreateBody",
        "OAuthProviderIn",
        "OAuthProviderParams",
        "ServerOAuthProviderUpdateBody",
    ),
    "webhooks": (
        "SendTestWebhookBody",
        "WebhookDeliveriesQuery",
        "WebhookEndpointCreateBody",
        "WebhookEndpointParams",
        "WebhookEndpointUpdateBody",
        "WebhookMessageParams",
    ),
    "projects": (
        "AnyProjectIdParams",
        "DomainIn",
        "JwksQuery",
        "OriginalProjectUpdateBody",
        "ProjectConfigPatch",
        "ProjectCreateBody",
        "ProjectIdParams",
        "ProjectUpdateBody",
        "RateLimitIn",
    ),
    "sessions": (
        "MAX_SESSION_LIFETIME_MS",
        "CreateSessionBody",
        "ListSessionsQuery",
        "SessionIdParams",
        "SessionUserQuery",
        "SessionUserQuery",
    ),
    "passkeys": ("PasskeyRegisterBody", "PasskeySignInBody"),
    "sign_in": ("CodeBody", "MfaSignInBody", "PasswordSignInBody", "PasswordSignUpBody", "SendSignInCodeBody"),
    "teams": (
        "ClientTeamCreateBody",
        "ClientTeamUpdateBody",
        "ListMembershipsQuery",
        "ListTeamsQuery",
        "MemberProfileUpdateBody",
        "MembershipParams",
        "PermissionParams",
        "ServerTeamCreateBody",
        "ServerTeamUpdateBody",
        "TeamIdParams",
    ),
    "team_invitations": (
        "AcceptTeamInvitationQuery",
        "ListTeamInvitationsQuery",
        "RevokeTeamInvitationQuery",
        "SendTeamInvitationBody",
        "TeamInvitationCodeBody",
        "TeamInvitationIdParams",
    ),
    "testing": ("ClockBody", "ImportBody"),
    "users": (
        "ClientUserUpdateBody",
        "ListUsersQuery",
        "RiskScoresIn",
        "ServerUserUpdateBody",
        "SignUpRiskScores",
        "UserCreateBody",
        "UserIdParams",
    ),
}
_HOMES = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "MAX_METADATA_BYTES",
    "MAX_PROFILE_IMAGE_BYTES",
    "MAX_SESSION_LIFETIME_MS",
    "AcceptTeamInvitationQuery",
    "AnyProjectIdParams",
    "Body",
    "ClientTeamCreateBody",
    "ClientTeamUpdateBody",
    "ClientUserUpdateBody",
    "ClockBody",
    "CodeBody",
    "CreateSessionBody",
    "DomainIn",
    "HealthQuery",
    "IgnoredBody",
    "ImportBody",
    "JwksQuery",
    "ListMembershipsQuery",
    "ListProjectPermissionsQuery",
    "ListSessionsQuery",
    "ListTeamInvitationsQuery",
    "ListTeamPermissionsQuery",
    "ListTeamsQuery",
    "ListUsersQuery",
    "M",
    "MemberProfileUpdateBody",
    "MembershipParams",
    "MfaSignInBody",
    "OriginalProjectUpdateBody",
    "OutboxQuery",
    "PasswordSignInBody",
    "PasswordSignUpBody",
    "PermissionDefinitionCreateBody",
    "PermissionDefinitionParams",
    "PermissionDefinitionUpdateBody",
    "PermissionParams",
    "ProjectConfigPatch",
    "ProjectCreateBody",
    "ProjectIdParams",
    "ProjectPermissionParams",
    "ProjectUpdateBody",
    "Query",
    "RateLimitIn",
    "ResetCodeBody",
    "ResetPasswordBody",
    "RevokeTeamInvitationQuery",
    "RiskScoresIn",
    "SendResetCodeBody",
    "SendSignInCodeBody",
    "SendTeamInvitationBody",
    "ServerTeamCreateBody",
    "ServerTeamUpdateBody",
    "ServerUserUpdateBody",
    "SessionIdParams",
    "SessionUserQuery",
    "SetPasswordBody",
    "SignUpRiskScores",
    "TeamIdParams",
    "TeamInvitationCodeBody",
    "TeamInvitationIdParams",
    "TeamPermissionParams",
    "UpdatePasswordBody",
    "UserCreateBody",
    "UserIdParams",
    "Validated",
    "is_uuid",
    "schema_error",
    "validate_model",
    "validate_nothing",
]
__all__ += [
    "MAX_EXPIRES_AT_MILLIS",
    "ApiKeyCheckBody",
    "ApiKeyIdParams",
    "ApiKeyUpdateBody",
    "TeamApiKeyCreateBody",
    "TeamApiKeysQuery",
    "UserApiKeyCreateBody",
    "UserApiKeysQuery",
]
__all__ += [
    "ClientContactChannelCreateBody",
    "ClientContactChannelUpdateBody",
    "ContactChannelParams",
    "ListContactChannelsQuery",
    "SendChannelVerificationBody",
    "SendPrimaryVerificationBody",
    "ServerContactChannelCreateBody",
    "ServerContactChannelUpdateBody",
    "VerificationCodeBody",
]
__all__ += ["PasskeyRegisterBody", "PasskeySignInBody"]
__all__ += ["MockAuthorizeParams", "MockFailNextBody", "MockRevokeBody", "MockTokenForm"]
__all__ += [
    "CrossDomainAuthorizeBody",
    "OAuthAuthorizeQuery",
    "OAuthCallbackForm",
    "OAuthCallbackInput",
    "OAuthProviderIdParams",
    "OAuthTokenGrantBody",
]
__all__ += [
    "ClientOAuthProviderUpdateBody",
    "ConnectedAccessTokenBody",
    "ConnectedAccessTokenParams",
    "ConnectedAccountsParams",
    "DeprecatedConnectedAccessTokenParams",
    "LegacyConnectedAccessTokenParams",
    "ListOAuthProvidersQuery",
    "OAuthProviderCreateBody",
    "OAuthProviderIn",
    "OAuthProviderParams",
    "ServerOAuthProviderUpdateBody",
]
__all__ += [
    "SendTestWebhookBody",
    "WebhookDeliveriesQuery",
    "WebhookEndpointCreateBody",
    "WebhookEndpointParams",
    "WebhookEndpointUpdateBody",
    "WebhookMessageParams",
]


if not TYPE_CHECKING:  # mypy reads the imports above instead, so a misspelt name is still an error

    def __getattr__(name: str) -> Any:
        """`name` from the module that defines it, imported (its models built) on first use."""
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
        globals()[name] = value  # from now on a plain attribute: __getattr__ is not called again
        return value
