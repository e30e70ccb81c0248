"""Request schemas (pydantic models, built once at import) and their translation into SCHEMA_ERROR.

Rules:
- Unknown keys are never dropped: every model forbids extra keys, at every nesting level, and the error reads
  like the original's: `body contains unknown properties: a, b` (reference §0.1).
- JSON bodies are validated strictly (no "123" for a number); query strings, which are text by nature, laxly.
- All errors of one request are collected into one SCHEMA_ERROR whose `details.message` starts with
  `Request validation failed on <METHOD> <path>:` and lists one `  - <message>` line per problem.

The models are split by resource (`base` holds the bases, the validation and the field rules models share).
Import from this package: it re-exports every name.
"""

from __future__ import annotations

from identity_proto.schemas.base import (
    MAX_METADATA_BYTES,
    MAX_PROFILE_IMAGE_BYTES,
    Body,
    EmptyBody,
    EmptyQuery,
    M,
    Query,
    Validated,
    is_uuid,
    schema_error,
    validate_model,
)
from identity_proto.schemas.outbox import OutboxQuery
from identity_proto.schemas.projects import (
    AnyProjectIdParams,
    DomainIn,
    JwksQuery,
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
    OAuthTokenBody,
    SessionIdParams,
)
from identity_proto.schemas.sign_in import (
    CodeBody,
    MfaSignInBody,
    PasswordSignInBody,
    PasswordSignUpBody,
    SendSignInCodeBody,
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
from identity_proto.schemas.testing import ClockBody, ImportBody
from identity_proto.schemas.users import (
    ClientUserUpdateBody,
    ListUsersQuery,
    RiskScoresIn,
    ServerUserUpdateBody,
    SignUpRiskScores,
    UserCreateBody,
    UserIdParams,
)

__all__ = [
    "MAX_METADATA_BYTES",
    "MAX_PROFILE_IMAGE_BYTES",
    "MAX_SESSION_LIFETIME_MS",
    "AnyProjectIdParams",
    "Body",
    "ClientTeamCreateBody",
    "ClientTeamUpdateBody",
    "ClientUserUpdateBody",
    "ClockBody",
    "CodeBody",
    "CreateSessionBody",
    "DomainIn",
    "EmptyBody",
    "EmptyQuery",
    "ImportBody",
    "JwksQuery",
    "ListMembershipsQuery",
    "ListSessionsQuery",
    "ListTeamsQuery",
    "ListUsersQuery",
    "M",
    "MemberProfileUpdateBody",
    "MembershipParams",
    "MfaSignInBody",
    "OAuthTokenBody",
    "OutboxQuery",
    "PasswordSignInBody",
    "PasswordSignUpBody",
    "PermissionParams",
    "ProjectConfigPatch",
    "ProjectCreateBody",
    "ProjectIdParams",
    "ProjectUpdateBody",
    "Query",
    "RateLimitIn",
    "RiskScoresIn",
    "SendSignInCodeBody",
    "ServerTeamCreateBody",
    "ServerTeamUpdateBody",
    "ServerUserUpdateBody",
    "SessionIdParams",
    "SignUpRiskScores",
    "TeamIdParams",
    "UserCreateBody",
    "UserIdParams",
    "Validated",
    "is_uuid",
    "schema_error",
    "validate_model",
]
