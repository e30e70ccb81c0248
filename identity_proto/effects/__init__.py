"""The effect vocabulary: every operation a flow needs from the outside world, as a frozen value.

A flow is a generator that *yields* effects and is resumed with their results (`Flow[R]` returns `R`). Drivers
(`identity_proto.drivers`) perform the effects:

- `StorageEffect`: performed by a store (backends/). Each one is **atomic by contract**: a backend performs it
  all or not at all, and no other effect observes it half done. Flows read with typed read effects and write with
  one `Commit` (`effects.commit`: guards, writes, events); a few specific operations (rate-limit counters, a code's
  attempts, webhook delivery) remain effects of their own. Backends raise only `StorageUnavailable`; domain
  outcomes are return values. backends/README.md describes the contract.
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
from identity_proto.effects.commit import (
    Announce,
    Commit,
    CommitConflict,
    CommitGuard,
    Committed,
    CommitWrite,
    Conflict,
    ReferencedBy,
)
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
from identity_proto.effects.email_sign_in import (
    EmailRefusal,
    EmailSignIn,
    EmailSignInOutcome,
)
from identity_proto.effects.mock_oauth import (
    GenerateMockSigningKeys,
    MockAuthorization,
    MockFailureKind,
    MockSigningKeys,
    MockToken,
)
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
from identity_proto.effects.oauth_provider import (  # talking to OAuth providers (performed by hosts)
    CheckProviderAccessToken,
    DiscoverProvider,
    ExchangeProviderCode,
    ProviderEffect,
    ProviderFailure,
    RefreshProviderToken,
)
from identity_proto.effects.outbox import ListOutbox, SendEmail, append_outbox
from identity_proto.effects.passkeys import SetPasskeys, find_user_by_passkey
from identity_proto.effects.passwords import (
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
    reset_primary,
)
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
from identity_proto.effects.rate_limits import Admission, Admit, HitRateLimits, RateLimitHit
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
from identity_proto.effects.webhooks import (
    RETRY_SCHEDULE_MS,
    TEST_EVENT_TYPE,
    AddTestEvent,
    ClaimDeliveries,
    ClaimedDelivery,
    CountPendingDeliveries,
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
    Route,
    SendWebhooks,
    TrimWebhookData,
    WebhookEndpoint,
    WebhookRequest,
    WebhookResult,
)
from identity_proto.quickinit import quick_init

__all__ = [
    "ANONYMOUS_PERSONAL_TEAM_NAME",
    "API_KEY_CHANGEABLE",
    "PRIMARY_FIELDS",
    "READ_EFFECTS",
    "RESET_FIELDS",
    "RETRY_SCHEDULE_MS",
    "TEST_EVENT_TYPE",
    "AddTestEvent",
    "AddressHolder",
    "Admission",
    "Admit",
    "ApiKeyIs",
    "ApiKeyOwnerExists",
    "ApiKeyWrite",
    "AttemptVerificationCode",
    "ChannelVerification",
    "ChannelWrite",
    "ChannelsAre",
    "CheckProviderAccessToken",
    "ClaimDeliveries",
    "ClaimedDelivery",
    "CodeAttempt",
    "CodeIsUnused",
    "CodeOutcome",
    "Commit",
    "CommitConflict",
    "Committed",
    "ComputeEffect",
    "Conflict",
    "CountPendingDeliveries",
    "DefinitionsWrite",
    "DeleteProject",
    "DeliveriesAre",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryIs",
    "DeliveryState",
    "DiscoverProvider",
    "DropChannel",
    "DropDelivery",
    "DropInvitation",
    "DropMembership",
    "DropSession",
    "DropTeam",
    "DropUser",
    "DropWebhookEndpoint",
    "Effect",
    "EmailRefusal",
    "EmailSignIn",
    "EmailSignInOutcome",
    "EndSession",
    "EndpointCountIs",
    "EndpointIs",
    "ExchangeProviderCode",
    "Exists",
    "FanOutEvents",
    "FindApiKeyByHash",
    "FindAuthAddressHolder",
    "FindUserByIndex",
    "Flow",
    "GenerateMockSigningKeys",
    "HashPassword",
    "HitRateLimits",
    "InvitationAcceptance",
    "InvitationIsStored",
    "InvitationIsUnused",
    "ListApiKeys",
    "ListContactChannels",
    "ListDeliveries",
    "ListEvents",
    "ListMemberships",
    "ListOutbox",
    "ListProjectContactChannels",
    "ListProjectPermissions",
    "ListProjects",
    "ListSessions",
    "ListTeamInvitations",
    "ListTeams",
    "ListUsers",
    "ListWebhookEndpoints",
    "ListWebhookProjects",
    "LoadApiKey",
    "LoadClockOverride",
    "LoadDelivery",
    "LoadMembership",
    "LoadProject",
    "LoadProviderTokens",
    "LoadSession",
    "LoadTeam",
    "LoadTeamInvitation",
    "LoadUser",
    "LoadUserWithTeam",
    "LoadWebhookEndpoint",
    "MailEffect",
    "MembershipFieldsAre",
    "MembershipIsAbsent",
    "MockAuthorization",
    "MockFailureKind",
    "MockSigningKeys",
    "MockToken",
    "OAuthState",
    "OuterCode",
    "PasswordWrite",
    "PatchApiKey",
    "PatchMembership",
    "PatchProject",
    "ProjectConfigIs",
    "ProjectGrantIs",
    "ProviderEffect",
    "ProviderFailure",
    "PutApiKey",
    "PutChannel",
    "PutCode",
    "PutInvitation",
    "PutMail",
    "PutProject",
    "PutShortLived",
    "PutWebhookEndpoint",
    "R",
    "RateLimitHit",
    "RecordAttempt",
    "RecordExists",
    "RefreshProviderToken",
    "ResetProjectData",
    "RestartDelivery",
    "RevokePermission",
    "Route",
    "SendEmail",
    "SendWebhooks",
    "SessionExists",
    "SetClockOverride",
    "SetPasskeys",
    "ShortLived",
    "StorageEffect",
    "T",
    "TakeShortLived",
    "TeamApiKeysAre",
    "TeamMembersAre",
    "TeamWrite",
    "Together",
    "TrimWebhookData",
    "UpgradeRefusal",
    "UseCode",
    "UseInvitation",
    "UseRefreshToken",
    "UserChannels",
    "VerifyPassword",
    "WebhookEndpoint",
    "WebhookRequest",
    "WebhookResult",
    "address_taken",
    "append_outbox",
    "auth_address_verified",
    "channel_commit",
    "channels_of",
    "claimed",
    "claims_address",
    "create_project",
    "created_channels",
    "delete_project",
    "deleted_channels",
    "ensure_project",
    "find_user_by_email",
    "find_user_by_oauth_account",
    "find_user_by_passkey",
    "list_projects",
    "load_project",
    "matched_address_verified",
    "may_reset_through",
    "oauth_index_key",
    "password_fingerprint",
    "perform",
    "reset_code_holds",
    "reset_primary",
    "update_project",
    "updated_channels",
    "verified_channel",
]

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
        ListProjectPermissions,
        LoadApiKey,
        FindApiKeyByHash,
        ListApiKeys,
        LoadTeamInvitation,
        ListTeamInvitations,
        ListContactChannels,
        ListProjectContactChannels,
        FindAuthAddressHolder,
        LoadProviderTokens,
        LoadWebhookEndpoint,
        ListWebhookEndpoints,
        ListEvents,
        ListWebhookProjects,
        ListDeliveries,
        CountPendingDeliveries,
    }
)


def _effect_classes() -> list[type[Any]]:
    found: list[type[Any]] = [Announce, ReferencedBy, Committed, Conflict]
    pending: list[type[Any]] = [Effect, CommitGuard, CommitWrite]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                pending.append(sub)
    return found


# Every concrete effect, and every part and answer of a commit, is a frozen dataclass made per request: each gets the
# cheaper `__init__`.
for _effect in _effect_classes():
    if dataclasses.is_dataclass(_effect) and "__init__" in vars(_effect):
        quick_init(_effect)
