"""The route table: (method, path pattern) -> flow, with who may call it and how its inputs are validated.

Paths are relative to the service root; every endpoint lives under /api/v1. Each model is built on its route's first
use, or by `Service.prepare` (see `identity_proto.routing`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from identity_proto.auth import AccessType
from identity_proto.oauth import MOCK_OAUTH_PATH
from identity_proto.routing import ADMIN_ONLY, SERVER_AND_ADMIN, Deferred, Route, deferred_module

if TYPE_CHECKING:
    from identity_proto.flows import (
        anonymous,
        api_keys,
        connected_accounts,
        contact_channels,
        emails,
        meta,
        mfa,
        mock_oauth,
        oauth,
        oauth_accounts,
        otp,
        passkeys,
        password,
        passwords,
        permissions,
        projects,
        sessions,
        team_invitations,
        team_member_profiles,
        teams,
        testing,
        users,
        webhooks,
    )
    from identity_proto.schemas import (
        AcceptTeamInvitationQuery,
        AnyProjectIdParams,
        ApiKeyCheckBody,
        ApiKeyIdParams,
        ApiKeyUpdateBody,
        ClientContactChannelCreateBody,
        ClientContactChannelUpdateBody,
        ClientOAuthProviderUpdateBody,
        ClientTeamCreateBody,
        ClientTeamUpdateBody,
        ClientUserUpdateBody,
        ClockBody,
        CodeBody,
        ConnectedAccessTokenBody,
        ConnectedAccessTokenParams,
        ConnectedAccountsParams,
        ContactChannelParams,
        CreateSessionBody,
        CrossDomainAuthorizeBody,
        DeprecatedConnectedAccessTokenParams,
        HealthQuery,
        IgnoredBody,
        ImportBody,
        JwksQuery,
        LegacyConnectedAccessTokenParams,
        ListContactChannelsQuery,
        ListMembershipsQuery,
        ListOAuthProvidersQuery,
        ListProjectPermissionsQuery,
        ListSessionsQuery,
        ListTeamInvitationsQuery,
        ListTeamPermissionsQuery,
        ListTeamsQuery,
        ListUsersQuery,
        MemberProfileUpdateBody,
        MembershipParams,
        MfaSignInBody,
        MockAuthorizeParams,
        MockFailNextBody,
        MockRevokeBody,
        MockTokenForm,
        OAuthAuthorizeQuery,
        OAuthCallbackForm,
        OAuthCallbackInput,
        OAuthProviderCreateBody,
        OAuthProviderIdParams,
        OAuthProviderParams,
        OAuthTokenGrantBody,
        OriginalProjectUpdateBody,
        OutboxQuery,
        PasskeyRegisterBody,
        PasskeySignInBody,
        PasswordSignInBody,
        PasswordSignUpBody,
        PermissionDefinitionCreateBody,
        PermissionDefinitionParams,
        PermissionDefinitionUpdateBody,
        ProjectCreateBody,
        ProjectIdParams,
        ProjectPermissionParams,
        ProjectUpdateBody,
        ResetCodeBody,
        ResetPasswordBody,
        RevokeTeamInvitationQuery,
        SendChannelVerificationBody,
        SendPrimaryVerificationBody,
        SendResetCodeBody,
        SendSignInCodeBody,
        SendTeamInvitationBody,
        SendTestWebhookBody,
        ServerContactChannelCreateBody,
        ServerContactChannelUpdateBody,
        ServerOAuthProviderUpdateBody,
        ServerTeamCreateBody,
        ServerTeamUpdateBody,
        ServerUserUpdateBody,
        SessionIdParams,
        SessionUserQuery,
        SetPasswordBody,
        TeamApiKeyCreateBody,
        TeamApiKeysQuery,
        TeamIdParams,
        TeamInvitationCodeBody,
        TeamInvitationIdParams,
        TeamPermissionParams,
        UpdatePasswordBody,
        UserApiKeyCreateBody,
        UserApiKeysQuery,
        UserCreateBody,
        UserIdParams,
        VerificationCodeBody,
        WebhookDeliveriesQuery,
        WebhookEndpointCreateBody,
        WebhookEndpointParams,
        WebhookEndpointUpdateBody,
        WebhookMessageParams,
    )
else:
    # Named, not imported: a route's flow module and models (and pydantic) are imported when a request first reaches
    # it (`identity_proto.routing.Router`), or when the whole table is asked for (`ROUTES` and the others, below).
    for _name in [
        "anonymous",
        "api_keys",
        "connected_accounts",
        "contact_channels",
        "emails",
        "meta",
        "mfa",
        "mock_oauth",
        "oauth",
        "oauth_accounts",
        "otp",
        "passkeys",
        "password",
        "passwords",
        "permissions",
        "projects",
        "sessions",
        "team_invitations",
        "team_member_profiles",
        "teams",
        "testing",
        "users",
        "webhooks",
    ]:
        globals()[_name] = deferred_module(f"identity_proto.flows.{_name}")
    del _name
    globals().update(
        (_name, Deferred("identity_proto.schemas", _name))
        for _name in [
            "AcceptTeamInvitationQuery",
            "AnyProjectIdParams",
            "ApiKeyCheckBody",
            "ApiKeyIdParams",
            "ApiKeyUpdateBody",
            "ClientContactChannelCreateBody",
            "ClientContactChannelUpdateBody",
            "ClientOAuthProviderUpdateBody",
            "ClientTeamCreateBody",
            "ClientTeamUpdateBody",
            "ClientUserUpdateBody",
            "ClockBody",
            "CodeBody",
            "ConnectedAccessTokenBody",
            "ConnectedAccessTokenParams",
            "ConnectedAccountsParams",
            "ContactChannelParams",
            "CreateSessionBody",
            "CrossDomainAuthorizeBody",
            "DeprecatedConnectedAccessTokenParams",
            "HealthQuery",
            "IgnoredBody",
            "ImportBody",
            "JwksQuery",
            "LegacyConnectedAccessTokenParams",
            "ListContactChannelsQuery",
            "ListMembershipsQuery",
            "ListOAuthProvidersQuery",
            "ListProjectPermissionsQuery",
            "ListSessionsQuery",
            "ListTeamInvitationsQuery",
            "ListTeamPermissionsQuery",
            "ListTeamsQuery",
            "ListUsersQuery",
            "MemberProfileUpdateBody",
            "MembershipParams",
            "MfaSignInBody",
            "MockAuthorizeParams",
            "MockFailNextBody",
            "MockRevokeBody",
            "MockTokenForm",
            "OAuthAuthorizeQuery",
            "OAuthCallbackForm",
            "OAuthCallbackInput",
            "OAuthProviderCreateBody",
            "OAuthProviderIdParams",
            "OAuthProviderParams",
            "OAuthTokenGrantBody",
            "OriginalProjectUpdateBody",
            "OutboxQuery",
            "PasskeyRegisterBody",
            "PasskeySignInBody",
            "PasswordSignInBody",
            "PasswordSignUpBody",
            "PermissionDefinitionCreateBody",
            "PermissionDefinitionParams",
            "PermissionDefinitionUpdateBody",
            "ProjectCreateBody",
            "ProjectIdParams",
            "ProjectPermissionParams",
            "ProjectUpdateBody",
            "ResetCodeBody",
            "ResetPasswordBody",
            "RevokeTeamInvitationQuery",
            "SendChannelVerificationBody",
            "SendPrimaryVerificationBody",
            "SendResetCodeBody",
            "SendSignInCodeBody",
            "SendTeamInvitationBody",
            "SendTestWebhookBody",
            "ServerContactChannelCreateBody",
            "ServerContactChannelUpdateBody",
            "ServerOAuthProviderUpdateBody",
            "ServerTeamCreateBody",
            "ServerTeamUpdateBody",
            "ServerUserUpdateBody",
            "SessionIdParams",
            "SessionUserQuery",
            "SetPasswordBody",
            "TeamApiKeyCreateBody",
            "TeamApiKeysQuery",
            "TeamIdParams",
            "TeamInvitationCodeBody",
            "TeamInvitationIdParams",
            "TeamPermissionParams",
            "UpdatePasswordBody",
            "UserApiKeyCreateBody",
            "UserApiKeysQuery",
            "UserCreateBody",
            "UserIdParams",
            "VerificationCodeBody",
            "WebhookDeliveriesQuery",
            "WebhookEndpointCreateBody",
            "WebhookEndpointParams",
            "WebhookEndpointUpdateBody",
            "WebhookMessageParams",
        ]
    )

__all__ = ["API_PREFIX", "COMPAT_ROUTES", "MOCK_OAUTH_ROUTES", "ROUTES", "TESTING_ROUTES", "route_table"]

B = TypeVar("B")

API_PREFIX = "/api/v1"
V1 = API_PREFIX


def _by_access(client: type[B], server: type[B]) -> dict[AccessType, type[B]]:
    """One body model for client access, another for server and admin (which may write more fields)."""
    return {AccessType.CLIENT: client, AccessType.SERVER: server, AccessType.ADMIN: server}


USER_UPDATE = _by_access(ClientUserUpdateBody, ServerUserUpdateBody)
TEAM_CREATE = _by_access(ClientTeamCreateBody, ServerTeamCreateBody)
TEAM_UPDATE = _by_access(ClientTeamUpdateBody, ServerTeamUpdateBody)
CHANNEL_CREATE = _by_access(ClientContactChannelCreateBody, ServerContactChannelCreateBody)
CHANNEL_UPDATE = _by_access(ClientContactChannelUpdateBody, ServerContactChannelUpdateBody)

_ROUTES: tuple[Route, ...] = (
    Route("GET", V1, meta.welcome, access=None, produces="text/plain"),
    Route("GET", f"{V1}/openapi.json", meta.openapi, access=None),
    # What the original's SDK fetches besides the API: a reachability probe (after a network error), and the
    # failover URLs (on every page load when it was given no explicit base URL).
    Route("GET", "/health", meta.health, access=None, query=HealthQuery),
    Route("GET", f"{V1}/internal/backend-urls", meta.backend_urls, access=None),
    # projects
    Route("GET", f"{V1}/projects/current", projects.get_current_project),
    Route("PATCH", f"{V1}/projects/current", projects.update_current_project, ADMIN_ONLY, ProjectUpdateBody),
    Route(
        "GET",
        f"{V1}/projects/{{project_id}}/.well-known/jwks.json",
        projects.jwks,
        access=None,
        query=JwksQuery,
        params=AnyProjectIdParams,
    ),
    Route("GET", f"{V1}/internal/projects", projects.list_projects_endpoint, ADMIN_ONLY),
    Route(
        "POST",
        f"{V1}/internal/projects",
        projects.create_project_endpoint,
        ADMIN_ONLY,
        ProjectCreateBody,
        success=201,
    ),
    Route(
        "DELETE",
        f"{V1}/internal/projects/{{project_id}}",
        projects.delete_project_endpoint,
        ADMIN_ONLY,
        params=ProjectIdParams,
    ),
    # sign-in
    Route("POST", f"{V1}/auth/otp/send-sign-in-code", otp.send_sign_in_code, body=SendSignInCodeBody),
    Route("POST", f"{V1}/auth/otp/sign-in", otp.sign_in_with_code, body=CodeBody),
    Route("POST", f"{V1}/auth/otp/sign-in/check-code", otp.check_sign_in_code, body=CodeBody),
    Route("POST", f"{V1}/auth/mfa/sign-in", mfa.mfa_sign_in, body=MfaSignInBody),
    Route("POST", f"{V1}/auth/password/sign-up", password.sign_up_with_password, body=PasswordSignUpBody),
    Route("POST", f"{V1}/auth/password/sign-in", password.sign_in_with_password, body=PasswordSignInBody),
    # anonymous users
    Route("POST", f"{V1}/auth/anonymous/sign-up", anonymous.sign_up_anonymously),
    # passkeys (WebAuthn)
    Route("POST", f"{V1}/auth/passkey/initiate-passkey-registration", passkeys.initiate_registration),
    Route("POST", f"{V1}/auth/passkey/register", passkeys.register_passkey, body=PasskeyRegisterBody),
    Route("POST", f"{V1}/auth/passkey/initiate-passkey-authentication", passkeys.initiate_authentication),
    Route("POST", f"{V1}/auth/passkey/sign-in", passkeys.sign_in_with_passkey, body=PasskeySignInBody),
    Route(
        "GET", f"{V1}/users/{{user_id}}/passkeys", passkeys.list_user_passkeys, SERVER_AND_ADMIN, params=UserIdParams
    ),
    # passwords (reference part 2 §1): forgotten, changed and set passwords
    Route("POST", f"{V1}/auth/password/send-reset-code", passwords.send_reset_code, body=SendResetCodeBody),
    Route("POST", f"{V1}/auth/password/reset", passwords.reset_password, body=ResetPasswordBody),
    Route("POST", f"{V1}/auth/password/reset/check-code", passwords.check_reset_code, body=ResetCodeBody),
    Route("POST", f"{V1}/auth/password/update", passwords.update_password, body=UpdatePasswordBody),
    Route("POST", f"{V1}/auth/password/set", passwords.set_password, body=SetPasswordBody, plain_errors=(400,)),
    # sessions
    Route(
        "POST",
        f"{V1}/auth/sessions/current/refresh",
        sessions.refresh_access_token,
        required_headers=("x-service-refresh-token",),
        checks_own_session=True,  # the refresh token alone decides (an access token sent along grants nothing)
    ),
    # OAuth sign-in (the token endpoint serves the refresh grant too: `flows.sessions.oauth_token`)
    Route(
        "POST",
        f"{V1}/auth/oauth/token",
        oauth.oauth_token,
        access=None,
        body=OAuthTokenGrantBody,
        consumes="application/x-www-form-urlencoded",
        plain_errors=(400,),
    ),
    Route(
        "POST",
        f"{V1}/auth/oauth/cross-domain/authorize",
        oauth.cross_domain_authorize,
        body=CrossDomainAuthorizeBody,
        required_headers=("x-service-refresh-token",),
        plain_errors=(400, 401),
    ),
    Route(
        "GET",
        f"{V1}/auth/oauth/authorize/{{provider_id}}",
        oauth.authorize,
        access=None,
        query=OAuthAuthorizeQuery,
        params=OAuthProviderIdParams,
        plain_errors=(400, 403),
    ),
    Route(
        "GET",
        f"{V1}/auth/oauth/callback/{{provider_id}}",
        oauth.callback,
        access=None,
        query=OAuthCallbackInput,
        params=OAuthProviderIdParams,
        plain_errors=(400,),
    ),
    Route(
        "POST",
        f"{V1}/auth/oauth/callback/{{provider_id}}",
        oauth.callback,
        access=None,
        query=OAuthCallbackInput,
        body=OAuthCallbackForm,
        params=OAuthProviderIdParams,
        consumes="application/x-www-form-urlencoded",
        plain_errors=(400,),
    ),
    Route("DELETE", f"{V1}/auth/sessions/current", sessions.sign_out, checks_own_session=True),
    Route("POST", f"{V1}/auth/sessions", sessions.create_session_endpoint, SERVER_AND_ADMIN, CreateSessionBody),
    Route("GET", f"{V1}/auth/sessions", sessions.list_sessions_endpoint, query=ListSessionsQuery),
    Route(
        "DELETE",
        f"{V1}/auth/sessions/{{session_id}}",
        sessions.delete_session_endpoint,
        body=IgnoredBody,
        query=SessionUserQuery,
        params=SessionIdParams,
    ),
    # e-mail
    Route("GET", f"{V1}/emails/outbox", emails.list_outbox, SERVER_AND_ADMIN, query=OutboxQuery),
    # users
    Route("GET", f"{V1}/users/me", users.get_me),
    Route("PATCH", f"{V1}/users/me", users.update_me, body=USER_UPDATE),
    Route("DELETE", f"{V1}/users/me", users.delete_me),
    Route("GET", f"{V1}/users", users.list_users, SERVER_AND_ADMIN, query=ListUsersQuery),
    Route("POST", f"{V1}/users", users.create_user, SERVER_AND_ADMIN, UserCreateBody, success=201),
    # the original's routes of one resource share its list's query (and ignore it); its DELETEs take any body
    Route(
        "GET", f"{V1}/users/{{user_id}}", users.get_user, SERVER_AND_ADMIN, query=ListUsersQuery, params=UserIdParams
    ),
    Route(
        "PATCH",
        f"{V1}/users/{{user_id}}",
        users.update_user,
        SERVER_AND_ADMIN,
        ServerUserUpdateBody,
        params=UserIdParams,
    ),
    Route("DELETE", f"{V1}/users/{{user_id}}", users.delete_user, SERVER_AND_ADMIN, params=UserIdParams),
    # teams
    Route("POST", f"{V1}/teams", teams.create_team, body=TEAM_CREATE, success=201),
    Route("GET", f"{V1}/teams", teams.list_teams, query=ListTeamsQuery),
    Route("GET", f"{V1}/teams/{{team_id}}", teams.get_team, params=TeamIdParams),
    Route("PATCH", f"{V1}/teams/{{team_id}}", teams.update_team, body=TEAM_UPDATE, params=TeamIdParams),
    Route("DELETE", f"{V1}/teams/{{team_id}}", teams.delete_team, body=IgnoredBody, params=TeamIdParams),
    Route(
        "POST",
        f"{V1}/team-memberships/{{team_id}}/{{user_id}}",
        teams.add_membership,
        SERVER_AND_ADMIN,
        params=MembershipParams,
        success=201,
    ),
    Route("DELETE", f"{V1}/team-memberships/{{team_id}}/{{user_id}}", teams.remove_membership, params=MembershipParams),
    # permissions (reference part 2 §6)
    Route(
        "GET",
        f"{V1}/team-permissions",
        permissions.list_team_permissions,
        query=ListTeamPermissionsQuery,
        plain_errors=(403,),
    ),
    Route(
        "POST",
        f"{V1}/team-permissions/{{team_id}}/{{user_id}}/{{permission_id}}",
        permissions.grant_team_permission,
        SERVER_AND_ADMIN,
        params=TeamPermissionParams,
        success=201,
    ),
    Route(
        "DELETE",
        f"{V1}/team-permissions/{{team_id}}/{{user_id}}/{{permission_id}}",
        permissions.revoke_team_permission,
        SERVER_AND_ADMIN,
        params=TeamPermissionParams,
    ),
    Route(
        "GET",
        f"{V1}/project-permissions",
        permissions.list_project_permissions,
        query=ListProjectPermissionsQuery,
        plain_errors=(403,),
    ),
    Route(
        "POST",
        f"{V1}/project-permissions/{{user_id}}/{{permission_id}}",
        permissions.grant_project_permission,
        SERVER_AND_ADMIN,
        params=ProjectPermissionParams,
        success=201,
    ),
    Route(
        "DELETE",
        f"{V1}/project-permissions/{{user_id}}/{{permission_id}}",
        permissions.revoke_project_permission,
        SERVER_AND_ADMIN,
        params=ProjectPermissionParams,
    ),
    Route("GET", f"{V1}/team-permission-definitions", permissions.list_team_permission_definitions, ADMIN_ONLY),
    Route(
        "POST",
        f"{V1}/team-permission-definitions",
        permissions.create_team_permission_definition,
        ADMIN_ONLY,
        PermissionDefinitionCreateBody,
        success=201,
    ),
    Route(
        "PATCH",
        f"{V1}/team-permission-definitions/{{permission_id}}",
        permissions.update_team_permission_definition,
        ADMIN_ONLY,
        PermissionDefinitionUpdateBody,
        params=PermissionDefinitionParams,
    ),
    Route(
        "DELETE",
        f"{V1}/team-permission-definitions/{{permission_id}}",
        permissions.delete_team_permission_definition,
        ADMIN_ONLY,
        params=PermissionDefinitionParams,
    ),
    Route("GET", f"{V1}/project-permission-definitions", permissions.list_project_permission_definitions, ADMIN_ONLY),
    Route(
        "POST",
        f"{V1}/project-permission-definitions",
        permissions.create_project_permission_definition,
        ADMIN_ONLY,
        PermissionDefinitionCreateBody,
        success=201,
    ),
    Route(
        "PATCH",
        f"{V1}/project-permission-definitions/{{permission_id}}",
        permissions.update_project_permission_definition,
        ADMIN_ONLY,
        PermissionDefinitionUpdateBody,
        params=PermissionDefinitionParams,
    ),
    Route(
        "DELETE",
        f"{V1}/project-permission-definitions/{{permission_id}}",
        permissions.delete_project_permission_definition,
        ADMIN_ONLY,
        params=PermissionDefinitionParams,
    ),
    # team member profiles
    Route("GET", f"{V1}/team-member-profiles", team_member_profiles.list_member_profiles, query=ListMembershipsQuery),
    Route(
        "GET",
        f"{V1}/team-member-profiles/{{team_id}}/{{user_id}}",
        team_member_profiles.get_member_profile,
        params=MembershipParams,
    ),
    Route(
        "PATCH",
        f"{V1}/team-member-profiles/{{team_id}}/{{user_id}}",
        team_member_profiles.update_member_profile,
        body=MemberProfileUpdateBody,
        params=MembershipParams,
    ),
    # API keys (reference part 2 §5)
    Route("POST", f"{V1}/user-api-keys", api_keys.create_user_api_key, body=UserApiKeyCreateBody),
    Route("GET", f"{V1}/user-api-keys", api_keys.list_user_api_keys, query=UserApiKeysQuery),
    Route("POST", f"{V1}/user-api-keys/check", api_keys.check_user_api_key, SERVER_AND_ADMIN, ApiKeyCheckBody),
    Route(
        "GET",
        f"{V1}/user-api-keys/{{api_key_id}}",
        api_keys.get_user_api_key,
        query=UserApiKeysQuery,
        params=ApiKeyIdParams,
    ),
    Route(
        "PATCH",
        f"{V1}/user-api-keys/{{api_key_id}}",
        api_keys.update_user_api_key,
        body=ApiKeyUpdateBody,
        query=UserApiKeysQuery,
        params=ApiKeyIdParams,
    ),
    Route("POST", f"{V1}/team-api-keys", api_keys.create_team_api_key, body=TeamApiKeyCreateBody),
    Route("GET", f"{V1}/team-api-keys", api_keys.list_team_api_keys, query=TeamApiKeysQuery),
    Route("POST", f"{V1}/team-api-keys/check", api_keys.check_team_api_key, SERVER_AND_ADMIN, ApiKeyCheckBody),
    Route(
        "GET",
        f"{V1}/team-api-keys/{{api_key_id}}",
        api_keys.get_team_api_key,
        query=TeamApiKeysQuery,
        params=ApiKeyIdParams,
    ),
    Route(
        "PATCH",
        f"{V1}/team-api-keys/{{api_key_id}}",
        api_keys.update_team_api_key,
        body=ApiKeyUpdateBody,
        query=TeamApiKeysQuery,
        params=ApiKeyIdParams,
    ),
    # team invitations (reference part 2 §3)
    Route("POST", f"{V1}/team-invitations/send-code", team_invitations.send_invitation, body=SendTeamInvitationBody),
    Route(
        "GET",
        f"{V1}/team-invitations",
        team_invitations.list_invitations,
        query=ListTeamInvitationsQuery,
        plain_errors=(400,),
    ),
    Route(
        "DELETE",
        f"{V1}/team-invitations/{{invitation_id}}",
        team_invitations.revoke_invitation,
        query=RevokeTeamInvitationQuery,
        params=TeamInvitationIdParams,
        plain_errors=(400,),
    ),
    Route("POST", f"{V1}/team-invitations/accept", team_invitations.accept_invitation, body=TeamInvitationCodeBody),
    Route(
        "POST",
        f"{V1}/team-invitations/accept/check-code",
        team_invitations.check_invitation_code,
        body=TeamInvitationCodeBody,
    ),
    Route(
        "POST",
        f"{V1}/team-invitations/accept/details",
        team_invitations.invitation_details,
        body=TeamInvitationCodeBody,
    ),
    Route(
        "POST",
        f"{V1}/team-invitations/{{invitation_id}}/accept",
        team_invitations.accept_invitation_by_id,
        query=AcceptTeamInvitationQuery,
        params=TeamInvitationIdParams,
    ),
    # contact channels (reference part 2 §2)
    Route("GET", f"{V1}/contact-channels", contact_channels.list_contact_channels, query=ListContactChannelsQuery),
    Route("POST", f"{V1}/contact-channels", contact_channels.create_contact_channel, body=CHANNEL_CREATE, success=201),
    Route(
        "POST",
        f"{V1}/contact-channels/send-verification-code",
        contact_channels.send_primary_verification_code,
        body=SendPrimaryVerificationBody,
    ),
    Route("POST", f"{V1}/contact-channels/verify", contact_channels.verify_contact_channel, body=VerificationCodeBody),
    Route(
        "POST",
        f"{V1}/contact-channels/verify/check-code",
        contact_channels.check_contact_channel_code,
        body=VerificationCodeBody,
    ),
    Route(
        "GET",
        f"{V1}/contact-channels/{{user_id}}/{{contact_channel_id}}",
        contact_channels.get_contact_channel,
        params=ContactChannelParams,
    ),
    Route(
        "PATCH",
        f"{V1}/contact-channels/{{user_id}}/{{contact_channel_id}}",
        contact_channels.update_contact_channel,
        body=CHANNEL_UPDATE,
        params=ContactChannelParams,
    ),
    Route(
        "DELETE",
        f"{V1}/contact-channels/{{user_id}}/{{contact_channel_id}}",
        contact_channels.delete_contact_channel,
        params=ContactChannelParams,
    ),
    Route(
        "POST",
        f"{V1}/contact-channels/{{user_id}}/{{contact_channel_id}}/send-verification-code",
        contact_channels.send_channel_verification_code,
        body=SendChannelVerificationBody,
        params=ContactChannelParams,
    ),
    # OAuth accounts: linked accounts and connected accounts (reference part 2 §7.6)
    Route(
        "GET",
        f"{V1}/oauth-providers",
        oauth_accounts.list_oauth_providers,
        query=ListOAuthProvidersQuery,
        plain_errors=(403,),
    ),
    Route(
        "POST",
        f"{V1}/oauth-providers",
        oauth_accounts.create_oauth_provider,
        SERVER_AND_ADMIN,
        OAuthProviderCreateBody,
        success=201,
        plain_errors=(400, 404),
    ),
    Route(
        "GET",
        f"{V1}/oauth-providers/{{user_id}}/{{provider_id}}",
        oauth_accounts.get_oauth_provider,
        params=OAuthProviderParams,
        plain_errors=(403, 404),
    ),
    Route(
        "PATCH",
        f"{V1}/oauth-providers/{{user_id}}/{{provider_id}}",
        oauth_accounts.update_oauth_provider,
        body=_by_access(ClientOAuthProviderUpdateBody, ServerOAuthProviderUpdateBody),
        params=OAuthProviderParams,
        plain_errors=(400, 403, 404),
    ),
    Route(
        "DELETE",
        f"{V1}/oauth-providers/{{user_id}}/{{provider_id}}",
        oauth_accounts.delete_oauth_provider,
        params=OAuthProviderParams,
        plain_errors=(403, 404),
    ),
    Route(
        "GET",
        f"{V1}/connected-accounts/{{user_id}}",
        connected_accounts.list_connected_accounts,
        params=ConnectedAccountsParams,
        plain_errors=(403,),
    ),
    Route(
        "POST",
        f"{V1}/connected-accounts/{{user_id}}/{{provider_id}}/{{provider_account_id}}/access-token",
        connected_accounts.connected_account_access_token,
        body=ConnectedAccessTokenBody,
        params=ConnectedAccessTokenParams,
        success=201,
        plain_errors=(403,),
    ),
    Route(
        "POST",
        f"{V1}/connected-accounts/{{user_id}}/{{provider_id}}/access-token",
        connected_accounts.legacy_connected_account_access_token,
        body=ConnectedAccessTokenBody,
        params=LegacyConnectedAccessTokenParams,
        success=201,
        plain_errors=(403,),
    ),
    Route(
        "POST",
        f"{V1}/auth/oauth/connected-accounts/{{provider_id}}/access-token",
        connected_accounts.deprecated_connected_account_access_token,
        body=ConnectedAccessTokenBody,
        params=DeprecatedConnectedAccessTokenParams,
        success=201,
    ),
    # webhook endpoints (admin; ours: the original keeps endpoints in Svix)
    Route(
        "POST",
        f"{V1}/webhook-endpoints",
        webhooks.create_webhook_endpoint,
        ADMIN_ONLY,
        WebhookEndpointCreateBody,
        success=201,
    ),
    Route("GET", f"{V1}/webhook-endpoints", webhooks.list_webhook_endpoints, ADMIN_ONLY),
    Route(
        "GET",
        f"{V1}/webhook-endpoints/{{endpoint_id}}",
        webhooks.get_webhook_endpoint,
        ADMIN_ONLY,
        params=WebhookEndpointParams,
    ),
    Route(
        "PATCH",
        f"{V1}/webhook-endpoints/{{endpoint_id}}",
        webhooks.update_webhook_endpoint,
        ADMIN_ONLY,
        WebhookEndpointUpdateBody,
        params=WebhookEndpointParams,
    ),
    Route(
        "DELETE",
        f"{V1}/webhook-endpoints/{{endpoint_id}}",
        webhooks.delete_webhook_endpoint,
        ADMIN_ONLY,
        params=WebhookEndpointParams,
    ),
    Route(
        "POST",
        f"{V1}/webhook-endpoints/{{endpoint_id}}/rotate-secret",
        webhooks.rotate_webhook_secret,
        ADMIN_ONLY,
        params=WebhookEndpointParams,
    ),
    Route(
        "GET",
        f"{V1}/webhook-endpoints/{{endpoint_id}}/deliveries",
        webhooks.list_webhook_deliveries,
        ADMIN_ONLY,
        query=WebhookDeliveriesQuery,
        params=WebhookEndpointParams,
    ),
    Route(
        "POST",
        f"{V1}/webhook-endpoints/{{endpoint_id}}/deliveries/{{message_id}}/replay",
        webhooks.replay_webhook_delivery,
        ADMIN_ONLY,
        params=WebhookMessageParams,
    ),
    Route(
        "POST",
        f"{V1}/webhook-endpoints/{{endpoint_id}}/test",
        webhooks.send_endpoint_test_event,
        ADMIN_ONLY,
        params=WebhookEndpointParams,
    ),
    Route("POST", f"{V1}/internal/send-test-webhook", webhooks.send_test_webhook, ADMIN_ONLY, SendTestWebhookBody),
)


#: Compatibility mode only (`IDENTITY_COMPAT=stack`): the original's project routes its dashboard uses with the
#: project's own admin access.
_COMPAT_ROUTES: tuple[Route, ...] = (
    Route("GET", f"{V1}/internal/projects/current", projects.get_current_project_original, ADMIN_ONLY),
    Route(
        "PATCH",
        f"{V1}/internal/projects/current",
        projects.update_current_project_original,
        ADMIN_ONLY,
        OriginalProjectUpdateBody,
    ),
    Route("DELETE", f"{V1}/internal/projects/current", projects.delete_current_project, ADMIN_ONLY),
)


#: Dev/test mode only (see identity_proto.flows.testing).
_TESTING_ROUTES: tuple[Route, ...] = (
    Route("GET", f"{V1}/testing/clock", testing.get_clock, ADMIN_ONLY),
    Route("POST", f"{V1}/testing/clock", testing.set_clock, ADMIN_ONLY, ClockBody),
    Route(
        "POST",
        f"{V1}/testing/projects/{{project_id}}/reset",
        testing.reset_project,
        ADMIN_ONLY,
        params=AnyProjectIdParams,
    ),
    Route(
        "GET",
        f"{V1}/testing/projects/{{project_id}}/export",
        testing.export_project,
        ADMIN_ONLY,
        params=AnyProjectIdParams,
    ),
    Route(
        "POST",
        f"{V1}/testing/projects/{{project_id}}/import",
        testing.import_project,
        ADMIN_ONLY,
        ImportBody,
        params=AnyProjectIdParams,
    ),
)


#: The mock OAuth provider (identity_proto.flows.mock_oauth), beside /api/v1: dev/test mode only, like
#: TESTING_ROUTES. It speaks OAuth, not this API: no authentication, its own error answers.
_MOCK = MOCK_OAUTH_PATH
_MOCK_OAUTH_ROUTES: tuple[Route, ...] = (
    Route("GET", f"{_MOCK}/.well-known/openid-configuration", mock_oauth.discovery, access=None),
    Route(
        "GET",
        f"{_MOCK}/authorize",
        mock_oauth.authorize_page,
        access=None,
        query=MockAuthorizeParams,
        produces="text/html",
        plain_errors=(400,),
    ),
    Route(
        "POST",
        f"{_MOCK}/authorize",
        mock_oauth.login,
        access=None,
        body=MockAuthorizeParams,
        consumes="application/x-www-form-urlencoded",
        success=303,
        produces="text/html",
        plain_errors=(400,),
    ),
    Route(
        "POST",
        f"{_MOCK}/token",
        mock_oauth.token,
        access=None,
        body=MockTokenForm,
        consumes="application/x-www-form-urlencoded",
        plain_errors=(503,),
    ),
    Route("GET", f"{_MOCK}/userinfo", mock_oauth.userinfo, access=None),
    Route("GET", f"{_MOCK}/jwks", mock_oauth.jwks, access=None),
    Route(
        "POST",
        f"{_MOCK}/hooks/fail-next",
        mock_oauth.fail_next,
        access=None,
        body=MockFailNextBody,
        plain_errors=(400,),
    ),
    Route("POST", f"{_MOCK}/hooks/revoke", mock_oauth.revoke, access=None, body=MockRevokeBody),
)


def route_table(*, dev_mode: bool, compat: bool) -> tuple[Route, ...]:
    """The routes of a service: the test-only routes and the mock OAuth provider only in dev/test mode (a production
    service has no such path at all), the original's routes that compatibility mode adds only in that mode. Its flows
    and models are named, not imported (`identity_proto.routing.Deferred`): its `Router` imports each route's when a
    request first reaches it."""
    routes = _ROUTES + _TESTING_ROUTES + _MOCK_OAUTH_ROUTES if dev_mode else _ROUTES
    return routes + _COMPAT_ROUTES if compat else routes


_TABLES = {
    "ROUTES": _ROUTES,
    "COMPAT_ROUTES": _COMPAT_ROUTES,
    "TESTING_ROUTES": _TESTING_ROUTES,
    "MOCK_OAUTH_ROUTES": _MOCK_OAUTH_ROUTES,
}

if TYPE_CHECKING:
    ROUTES: tuple[Route, ...]
    COMPAT_ROUTES: tuple[Route, ...]
    TESTING_ROUTES: tuple[Route, ...]
    MOCK_OAUTH_ROUTES: tuple[Route, ...]
else:

    def __getattr__(name: str) -> Any:
        """`ROUTES` and the other tables with every flow and model imported (PEP 562: on first use, for the OpenAPI
        document's readers and tests; a service's router imports them route by route)."""
        table = _TABLES.get(name)
        if table is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        resolved = globals()[name] = tuple(route.resolved() for route in table)
        return resolved
