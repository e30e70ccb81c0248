"""The effect vocabulary: every operation a flow needs from the outside world, as a frozen value.

A flow is a generator that *yields* effects and is resumed with their results (`Flow[R]` returns `R`). Drivers
(`identity_proto.drivers`) perform the effects:

- `StorageEffect`: performed by a store (backends/). Each one is **atomic by contract**: a backend performs it
  all or not at all, and no other effect observes it half done. Two writes that must happen together are one
  effect. Backends raise only `StorageUnavailable`; domain outcomes are return values.
- `ComputeEffect`: CPU-heavy pure work (password hashing). `compute()` runs it; the async driver runs it in a
  worker thread so the event loop never stalls.
- `MailEffect`: hand an e-mail to the host's mailer (SMTP, console). Mail kept in the outbox is a storage effect.

Secrets in effects (a password to hash) are excluded from `repr`, so an effect in a log line or a traceback never
shows one.

Each effect's docstring is its contract; each backend implements it once. The typed helpers (`effects.projects`)
are what flows call: `project = yield from load_project(project_id)`.

The vocabulary is split by resource, in modules named as the storage backends' (`backends/README.md`); `base`
holds the effect kinds, `Flow`, `perform` and `Together`. Import from this package: it re-exports every name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from identity_proto.effects.anonymous import (
    ANONYMOUS_PERSONAL_TEAM_NAME,
    UpgradeRefusal,
)
from identity_proto.effects.api_keys import (
    API_KEY_CHANGEABLE,
    ApiKeyIs,
    ApiKeyOwnerExists,
    ApiKeyWrite,
    FindApiKeyByHash,
    ListApiKeys,
    LoadApiKey,
    PatchApiKey,
    PutApiKey,
)
from identity_proto.effects.base import ComputeEffect, Effect, Flow, MailEffect, R, StorageEffect, T, Together, perform
from identity_proto.effects.codes import (
    AddressHolder,
    AttemptVerificationCode,
    CodeAttempt,
    CodeOutcome,
)
from identity_proto.effects.commit import Commit, CommitConflict, Committed, Conflict

# --- contact channels ---
from identity_proto.effects.contact_channels import (
    PRIMARY_FIELDS,
    ChannelsAre,
    ChannelVerification,
    ChannelWrite,
    CodeIsUnused,
    DropChannel,
    ListContactChannels,
    ListProjectContactChannels,
    PutChannel,
    UseCode,
    UserChannels,
    address_taken,
    auth_address_verified,
    channel_commit,
    channels_of,
    claimed,
    claims_address,
    created_channels,
    deleted_channels,
    matched_address_verified,
    updated_channels,
    verified_channel,
)

# --- end contact channels ---
from identity_proto.effects.email_sign_in import (
    EmailRefusal,
    EmailSignIn,
    EmailSignInOutcome,
)

# --- mock OAuth provider (dev/test mode only) ---
from identity_proto.effects.mock_oauth import (
    GenerateMockSigningKeys,
    MockAuthorization,
    MockFailureKind,
    MockSigningKeys,
    MockToken,
)

# --- end mock OAuth provider ---
# --- OAuth storage ---
from identity_proto.effects.oauth import (
    LoadProviderTokens,
    OAuthState,
    OuterCode,
    PutShortLived,
    ShortLived,
    TakeShortLived,
    find_user_by_oauth_account,
    oauth_index_key,
)

# --- end OAuth storage ---
from identity_proto.effects.oauth_provider import (  # talking to OAuth providers (performed by hosts)
    CheckProviderAccessToken,
    DiscoverProvider,
    ExchangeProviderCode,
    ProviderEffect,
    ProviderFailure,
    RefreshProviderToken,
)
from identity_proto.effects.outbox import ListOutbox, SendEmail, append_outbox

# --- end permissions ---
from identity_proto.effects.passwords import (  # with the password flows' reads, guards and writes (part 2 §1)
    RESET_FIELDS,
    FindAuthAddressHolder,
    HashPassword,
    PasswordWrite,
    PutCode,
    PutMail,
    VerifyPassword,
    may_reset_through,
    password_fingerprint,
    reset_code_holds,
)

# --- permissions ---
from identity_proto.effects.permissions import (
    DefinitionsWrite,
    ListProjectPermissions,
    ProjectGrantIs,
    RevokePermission,
)
from identity_proto.effects.projects import (
    DeleteProject,
    ListProjects,
    LoadProject,
    PatchProject,
    ProjectConfigIs,
    PutProject,
    create_project,
    delete_project,
    ensure_project,
    list_projects,
    load_project,
    update_project,
)
from identity_proto.effects.rate_limits import HitRateLimits, RateLimitHit
from identity_proto.effects.sessions import (
    DropSession,
    EndSession,
    ListSessions,
    LoadSession,
    SessionExists,
    UseRefreshToken,
)
from identity_proto.effects.team_invitations import (
    DropInvitation,
    InvitationAcceptance,
    InvitationIsStored,
    InvitationIsUnused,
    ListTeamInvitations,
    LoadTeamInvitation,
    PutInvitation,
    UseInvitation,
)
from identity_proto.effects.teams import (
    DropMembership,
    DropTeam,
    ListMemberships,
    ListTeams,
    LoadMembership,
    LoadTeam,
    MembershipFieldsAre,
    MembershipIsAbsent,
    PatchMembership,
    RecordExists,
    TeamApiKeysAre,
    TeamMembersAre,
    TeamWrite,
)
from identity_proto.effects.testing import LoadClockOverride, ResetProjectData, SetClockOverride
from identity_proto.effects.users import (
    DropUser,
    Exists,
    FindUserByIndex,
    ListUsers,
    LoadUser,
    LoadUserWithTeam,
    find_user_by_email,
)

# --- webhooks ---
from identity_proto.effects.webhooks import (
    RETRY_SCHEDULE_MS,
    TEST_EVENT_TYPE,
    AddTestEvent,
    ClaimDeliveries,
    ClaimedDelivery,
    DeliveriesAre,
    Delivery,
    DeliveryAttempt,
    DeliveryIs,
    DeliveryState,
    DropDelivery,
    DropWebhookEndpoint,
    EndpointCountIs,
    EndpointIs,
    FanOutEvents,
    ListDeliveries,
    ListEvents,
    ListWebhookEndpoints,
    ListWebhookProjects,
    LoadDelivery,
    LoadWebhookEndpoint,
    PutWebhookEndpoint,
    RecordAttempt,
    RestartDelivery,
    SendWebhooks,
    TrimWebhookData,
    WebhookEndpoint,
    WebhookRequest,
    WebhookResult,
)

# --- end webhooks ---
from identity_proto.quickinit import quick_init

__all__ = [
    "ANONYMOUS_PERSONAL_TEAM_NAME",
    "READ_EFFECTS",
    "AddressHolder",
    "AttemptVerificationCode",
    "CodeAttempt",
    "CodeOutcome",
    "ComputeEffect",
    "DefinitionsWrite",
    "DeleteProject",
    "DropInvitation",
    "DropMembership",
    "DropSession",
    "DropTeam",
    "DropUser",
    "Effect",
    "EmailRefusal",
    "EmailSignIn",
    "EmailSignInOutcome",
    "EndSession",
    "Exists",
    "FindAuthAddressHolder",
    "FindUserByIndex",
    "Flow",
    "HashPassword",
    "HitRateLimits",
    "InvitationAcceptance",
    "InvitationIsStored",
    "InvitationIsUnused",
    "ListMemberships",
    "ListOutbox",
    "ListProjectPermissions",
    "ListProjects",
    "ListSessions",
    "ListTeamInvitations",
    "ListTeams",
    "ListUsers",
    "LoadClockOverride",
    "LoadMembership",
    "LoadProject",
    "LoadSession",
    "LoadTeam",
    "LoadTeamInvitation",
    "LoadUser",
    "LoadUserWithTeam",
    "MailEffect",
    "MembershipFieldsAre",
    "MembershipIsAbsent",
    "PasswordWrite",
    "PatchMembership",
    "PatchProject",
    "ProjectConfigIs",
    "ProjectGrantIs",
    "PutCode",
    "PutInvitation",
    "PutMail",
    "PutProject",
    "R",
    "RateLimitHit",
    "RecordExists",
    "ResetProjectData",
    "RevokePermission",
    "SendEmail",
    "SessionExists",
    "SetClockOverride",
    "StorageEffect",
    "T",
    "TeamApiKeysAre",
    "TeamMembersAre",
    "TeamWrite",
    "Together",
    "UpgradeRefusal",
    "UseInvitation",
    "UseRefreshToken",
    "VerifyPassword",
    "create_project",
    "delete_project",
    "ensure_project",
    "find_user_by_email",
    "list_projects",
    "load_project",
    "perform",
    "update_project",
]
# API keys
__all__ += ["API_KEY_CHANGEABLE", "ApiKeyIs", "ApiKeyOwnerExists", "ApiKeyWrite", "FindApiKeyByHash"]
__all__ += ["ListApiKeys", "LoadApiKey", "PatchApiKey", "PutApiKey"]
# --- contact channels ---
__all__ += [
    "PRIMARY_FIELDS",
    "ChannelVerification",
    "ChannelWrite",
    "ChannelsAre",
    "CodeIsUnused",
    "DropChannel",
    "ListContactChannels",
    "ListProjectContactChannels",
    "PutChannel",
    "UseCode",
    "UserChannels",
    "address_taken",
    "append_outbox",
    "auth_address_verified",
    "channel_commit",
    "channels_of",
    "claimed",
    "claims_address",
    "created_channels",
    "deleted_channels",
    "matched_address_verified",
    "updated_channels",
    "verified_channel",
]
# --- end contact channels ---
# --- password resets: who may reset through an address ---
__all__ += ["RESET_FIELDS", "may_reset_through", "password_fingerprint", "reset_code_holds"]
# --- OAuth: talking to providers (performed by hosts) ---
__all__ += [
    "CheckProviderAccessToken",
    "DiscoverProvider",
    "ExchangeProviderCode",
    "ProviderEffect",
    "ProviderFailure",
    "RefreshProviderToken",
]

# --- mock OAuth provider (dev/test mode only) ---
__all__ += ["GenerateMockSigningKeys", "MockAuthorization", "MockFailureKind", "MockSigningKeys", "MockToken"]
# --- end mock OAuth provider ---
# --- OAuth storage ---
__all__ += [
    "LoadProviderTokens",
    "OAuthState",
    "OuterCode",
    "PutShortLived",
    "ShortLived",
    "TakeShortLived",
    "find_user_by_oauth_account",
    "oauth_index_key",
]
# --- end OAuth storage ---
# --- webhooks ---
__all__ += [
    "RETRY_SCHEDULE_MS",
    "TEST_EVENT_TYPE",
    "AddTestEvent",
    "ClaimDeliveries",
    "ClaimedDelivery",
    "DeliveriesAre",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryIs",
    "DeliveryState",
    "DropDelivery",
    "DropWebhookEndpoint",
    "EndpointCountIs",
    "EndpointIs",
    "FanOutEvents",
    "ListDeliveries",
    "ListEvents",
    "ListWebhookEndpoints",
    "ListWebhookProjects",
    "LoadDelivery",
    "LoadWebhookEndpoint",
    "PutWebhookEndpoint",
    "RecordAttempt",
    "RestartDelivery",
    "SendWebhooks",
    "TrimWebhookData",
    "WebhookEndpoint",
    "WebhookRequest",
    "WebhookResult",
]
# --- end webhooks ---
__all__ += ["Commit", "CommitConflict", "Committed", "Conflict"]  # the one generic write (`effects.commit`)

#: Effects that only read: a request's rate-limit counters may ride along with one of these (if the request turns
#: out to be over its limit, nothing was written).
READ_EFFECTS: frozenset[type[StorageEffect[Any]]] = frozenset(
    {
        LoadProject,
        ListProjects,
        LoadUser,
        LoadUserWithTeam,
        FindUserByIndex,
        ListUsers,
        LoadSession,
        ListSessions,
        LoadTeam,
        ListTeams,
        LoadMembership,
        ListMemberships,
        ListOutbox,
        LoadClockOverride,
        ListProjectPermissions,  # permissions
        # API keys
        LoadApiKey,
        FindApiKeyByHash,
        ListApiKeys,
        # --- team invitations ---
        LoadTeamInvitation,
        ListTeamInvitations,
        # --- contact channels ---
        ListContactChannels,
        ListProjectContactChannels,
        FindAuthAddressHolder,  # passwords
        # --- OAuth storage ---
        LoadProviderTokens,
        # --- webhooks ---
        LoadWebhookEndpoint,
        ListWebhookEndpoints,
        ListEvents,
        ListWebhookProjects,
        ListDeliveries,
    }
)


def _effect_classes() -> list[type[Any]]:
    found: list[type[Any]] = []
    pending: list[type[Any]] = [Effect]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                pending.append(sub)
    return found


# Every concrete effect is a frozen dataclass made per request: each gets the cheaper `__init__`.
for _effect in _effect_classes():
    if dataclasses.is_dataclass(_effect) and "__init__" in vars(_effect):
        quick_init(_effect)
