"""Stored records: what the store keeps, as frozen dataclasses.

Records hold exactly what is stored, secrets included in hashed form (key hashes, the token signing key);
what a caller may *see* of them is decided in one place, `identity_proto.render`. Backends import this module
to (de)serialise records; `to_json`/`from_json` here are the one mapping between records and JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from identity_proto.quickinit import quick_init

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


_R = TypeVar("_R")

__all__ = [
    "BUILT_IN_PERMISSION_DEFINITIONS",
    "INTERNAL_PROJECT_ID",
    "OAUTH_MERGE_STRATEGIES",
    "OAUTH_PROVIDER_TYPES",
    "ApiKey",
    "ApiKeyType",
    "ClockOverride",
    "CodePurpose",
    "ContactChannel",
    "Email",
    "Membership",
    "OAuthAccount",
    "OAuthProviderConfig",
    "Passkey",
    "PermissionDefinition",
    "Project",
    "ProjectConfig",
    "ProjectKeys",
    "RateLimitSetting",
    "RiskScores",
    "Session",
    "StoredEvent",
    "Team",
    "TrustedDomain",
    "User",
    "VerificationCode",
    "config_from_json",
    "config_to_json",
    "contact_channel_from_json",
    "contact_channel_to_json",
    "derived_primary_channel_id",
    "primary_channel",
    "project_from_json",
    "project_to_json",
    "replaced",
    "user_from_json",
    "user_to_json",
]

#: The project that manages the others (reference §1.1: the literal project id `internal`).
INTERNAL_PROJECT_ID = "internal"


@dataclass(frozen=True, slots=True)
class TrustedDomain:
    """A callback base URL the project trusts (reference §2.2 step 4), e.g. https://app.example.com."""

    domain: str
    handler_path: str = "/handler"


@dataclass(frozen=True, slots=True)
class RateLimitSetting:
    """A project's own value for one rate-limit rule (identity_proto.ratelimits): `limit` requests per
    `window_seconds`; a limit of 0 switches the rule off."""

    name: str
    limit: int
    window_seconds: int


# permissions: definitions (reference part 2 §6)


@dataclass(frozen=True, slots=True)
class PermissionDefinition:
    """A permission a project defines (reference part 2 §6: the config's `rbac.permissions`): its id (unique
    across both scopes), its scope (`team` or `project`), an optional description, and the ids it contains,
    sorted (a team permission may contain the system `$` ids)."""

    id: str
    scope: str
    description: str | None = None
    contained_permission_ids: tuple[str, ...] = ()


#: The definitions every project is created with (reference part 2 §6, "Built-ins"): `team_admin` holds the six
#: system permissions, `team_member` two of them. They are ordinary definitions afterwards (editable, deletable).
BUILT_IN_PERMISSION_DEFINITIONS: tuple[PermissionDefinition, ...] = (
    PermissionDefinition(
        "team_admin",
        "team",
        "Default permission for team admins",
        (
            "$delete_team",
            "$invite_members",
            "$manage_api_keys",
            "$read_members",
            "$remove_members",
            "$update_team",
        ),
    ),
    PermissionDefinition(
        "team_member", "team", "Default permission for team members", ("$invite_members", "$read_members")
    ),
)


# OAuth (reference part 2 §7)
#: Provider types a project may configure (`OAuthProviderConfig.type`). `oidc` is any OpenID Connect provider found
#: by its `issuer_url`; `mock` is the service's own dev/test provider (dev mode only, see `identity_proto.flows.
#: mock_oauth`), which also stands in for any other type when a provider's `client_id` is "MOCK".
OAUTH_PROVIDER_TYPES = ("google", "github", "microsoft", "discord", "gitlab", "bitbucket", "spotify", "oidc", "mock")
#: What signing in with a provider account does when its e-mail already signs someone in (reference §7.4).
OAUTH_MERGE_STRATEGIES = ("link_method", "raise_error", "allow_duplicates")


@dataclass(frozen=True, slots=True)
class OAuthProviderConfig:
    """One OAuth provider of a project; `id` is the URL's `{provider_id}` and users' `oauth_providers[].id`."""

    id: str
    type: str
    client_id: str | None = None
    #: Never rendered in full (admin reads see the last four characters).
    client_secret: str | None = field(default=None, repr=False)
    #: The OpenID Connect issuer (`oidc` type): its `/.well-known/openid-configuration` names the endpoints.
    issuer_url: str | None = None
    #: Microsoft's tenant (default "common").
    microsoft_tenant_id: str | None = None
    allow_sign_in: bool = True
    allow_connected_accounts: bool = True


@dataclass(frozen=True, slots=True)
class OAuthAccount:
    """A provider account linked to a user (the original's "OAuth provider" of a user, reference §7.6). Kept on the
    `User` record (`User.oauth_accounts`), so every user read renders `oauth_providers` without a second read.

    Invariant kept by every store: an account with `allow_sign_in` is in the project's OAuth index under
    (`provider_config_id`, `account_id`), mapped to its user; no two sign-in accounts share that pair."""

    #: The row id (a UUID), the `id` of `/oauth-providers` objects.
    id: str
    provider_config_id: str
    #: The provider's id for the account (`sub`, GitHub's numeric id, ...).
    account_id: str
    email: str | None = None
    allow_sign_in: bool = True
    allow_connected_accounts: bool = True
    created_at_millis: int = 0


@dataclass(frozen=True, slots=True)
class Passkey:
    """A WebAuthn credential registered by a user (`identity_proto.flows.passkeys`). Kept on the `User` record
    (`User.passkeys`), so every user read renders `passkey_auth_enabled` without a second read. Nothing secret: the
    private key never leaves the authenticator.

    Invariant kept by every store: each passkey is in the project's passkey index under its `credential_id`,
    mapped to its user; no two passkeys of a project share a credential id."""

    #: The credential id, base64url without padding (as WebAuthn's JSON carries it: the response's `id`).
    credential_id: str
    #: The credential's public key as a COSE_Key, base64url without padding.
    public_key: str
    #: The authenticator's signature counter as last seen; a later sign-in must present a higher one unless both
    #: are 0 (an authenticator that does not count), else it is refused as a cloned authenticator's.
    sign_count: int = 0
    #: The transports the browser reported (`usb`, `internal`, `hybrid`, ...), for the client's hints.
    transports: tuple[str, ...] = ()
    #: The authenticator model's AAGUID (all zeros with `none` attestation, as most passkeys register).
    aaguid: str = ""
    created_at_millis: int = 0
    #: The relying party id it was registered for: the host of the page's origin.
    rp_id: str = ""


@dataclass(frozen=True, slots=True)
class ProjectConfig:
    """A project's configuration. Defaults suit a service developers run locally with code sign-in first."""

    sign_up_enabled: bool = True
    magic_link_enabled: bool = True
    credential_enabled: bool = True
    allow_localhost: bool = True
    domains: tuple[TrustedDomain, ...] = ()
    client_team_creation_enabled: bool = False
    client_user_deletion_enabled: bool = False
    create_team_on_sign_up: bool = False
    require_email_verification: bool = False
    #: Reference §1.2 step 7: when true, client requests without a publishable key are refused.
    require_publishable_client_key: bool = False
    team_creator_default_permissions: tuple[str, ...] = ("team_admin",)
    team_member_default_permissions: tuple[str, ...] = ("team_member",)
    # permissions
    #: Project permissions every new user is granted at sign-up (direct grants; reference: `user_default_permissions`).
    user_default_permissions: tuple[str, ...] = ()
    #: The project's permission definitions of both scopes, sorted by id (changed only through the definition
    #: endpoints: a commit of `flows.permissions.change_definitions`).
    permission_definitions: tuple[PermissionDefinition, ...] = BUILT_IN_PERMISSION_DEFINITIONS
    #: Rate-limit rules this project sets itself (the others keep their defaults).
    rate_limits: tuple[RateLimitSetting, ...] = ()
    # API keys (reference part 2 §5: the legacy names of `apiKeys.enabled.user|team`; off by default)
    allow_user_api_keys: bool = False
    allow_team_api_keys: bool = False
    # OAuth
    oauth_providers: tuple[OAuthProviderConfig, ...] = ()
    #: One of `OAUTH_MERGE_STRATEGIES`.
    oauth_account_merge_strategy: str = "link_method"
    # passkeys (`identity_proto.flows.passkeys`): WebAuthn registration and sign-in
    passkey_enabled: bool = False


@dataclass(frozen=True, slots=True)
class ProjectKeys:
    """SHA-256 hex digests of the project's API keys; None where the project has no such key."""

    publishable_client_key_hash: str | None = None
    secret_server_key_hash: str | None = None
    super_secret_admin_key_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Project:
    """A project (tenant): every user, team and session belongs to exactly one."""

    id: str
    display_name: str
    created_at_millis: int
    #: The private scalar of the project's ES256 signing key, hex. Every worker sharing a store reads it from
    #: there, so tokens issued by one worker verify on any other.
    signing_key: str
    config: ProjectConfig = field(default_factory=ProjectConfig)
    keys: ProjectKeys = field(default_factory=ProjectKeys)


def config_to_json(config: ProjectConfig) -> dict[str, Any]:
    """The config as a JSON-ready dict (tuples as lists, domains as objects, rate limits by rule name)."""
    data = {name: _plain(getattr(config, name)) for name in (f.name for f in dataclasses.fields(ProjectConfig))}
    data["rate_limits"] = {s.name: {"limit": s.limit, "window_seconds": s.window_seconds} for s in config.rate_limits}
    return data


def config_from_json(data: dict[str, Any]) -> ProjectConfig:
    """Inverse of `config_to_json`; keys missing from `data` take their defaults (records written by older
    versions stay readable)."""
    known = {f.name for f in dataclasses.fields(ProjectConfig)}
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name not in known:
            continue
        if name == "domains":
            values[name] = tuple(TrustedDomain(**item) for item in value)
        elif name == "permission_definitions":
            values[name] = tuple(
                PermissionDefinition(
                    item["id"],
                    item["scope"],
                    item.get("description"),
                    tuple(item.get("contained_permission_ids", ())),
                )
                for item in value
            )
        elif name == "oauth_providers":
            values[name] = tuple(OAuthProviderConfig(**item) for item in value)
        elif name == "rate_limits":
            items = [{"name": k, **v} for k, v in value.items()] if isinstance(value, dict) else value
            values[name] = tuple(sorted((RateLimitSetting(**item) for item in items), key=lambda r: r.name))
        elif isinstance(value, list):
            values[name] = tuple(value)
        else:
            values[name] = value
    return ProjectConfig(**values)


def project_to_json(project: Project) -> dict[str, Any]:
    """The whole record (hashes and signing key included) as JSON for a store; never for a response."""
    return {
        "id": project.id,
        "display_name": project.display_name,
        "created_at_millis": project.created_at_millis,
        "signing_key": project.signing_key,
        "config": config_to_json(project.config),
        "keys": dataclasses.asdict(project.keys),
    }


def project_from_json(data: dict[str, Any]) -> Project:
    """Inverse of `project_to_json`."""
    return Project(
        id=data["id"],
        display_name=data["display_name"],
        created_at_millis=data["created_at_millis"],
        signing_key=data["signing_key"],
        config=config_from_json(data.get("config", {})),
        keys=ProjectKeys(**data.get("keys", {})),
    )


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


# --------------------------------------------------------------------------------------------------------------
# Users, sessions, one-time codes, e-mail


@dataclass(frozen=True, slots=True)
class RiskScores:
    """Sign-up risk scores (spec: risk_scores.sign_up.{bot, free_trial_abuse}), integers 0-100."""

    bot: int = 0
    free_trial_abuse: int = 0


@dataclass(frozen=True, slots=True)
class User:
    """A user of one project. Metadata fields hold any JSON value and are never mutated once stored."""

    id: str
    signed_up_at_millis: int
    last_active_at_millis: int
    display_name: str | None = None
    primary_email: str | None = None
    primary_email_verified: bool = False
    #: Whether the primary e-mail signs the user in; auth-enabled e-mails are unique within a project.
    primary_email_auth_enabled: bool = False
    #: Modular Crypt Format hash (bcrypt; argon2 accepted on import), or None when the user has no password.
    password_hash: str | None = None
    #: Base64 of the raw TOTP secret; set means two-factor sign-in is required.
    totp_secret_base64: str | None = None
    #: The time step (Unix time // 30 s) of the last TOTP accepted for this user; a TOTP of this step or an earlier
    #: one is never accepted again (RFC 6238 §5.2). None before the first.
    totp_last_step: int | None = None
    otp_auth_enabled: bool = False
    is_anonymous: bool = False
    restricted_by_admin: bool = False
    restricted_by_admin_reason: str | None = None
    restricted_by_admin_private_details: str | None = None
    profile_image_url: str | None = None
    client_metadata: Any = None
    client_read_only_metadata: Any = None
    server_metadata: Any = None
    selected_team_id: str | None = None
    country_code: str | None = None
    risk_scores: RiskScores = field(default_factory=RiskScores)
    # contact channels: the primary e-mail channel is these `primary_email*` fields (see `ContactChannel`)
    #: The id of the primary e-mail channel; None: the id derived from the user's id (`primary_channel`). Set by
    #: every contact-channel write that moves a channel in or out of these fields.
    primary_email_channel_id: str | None = None
    #: When the primary e-mail channel was created; None: when the user signed up.
    primary_email_channel_created_at_millis: int | None = None
    # OAuth: the user's linked provider accounts, in creation order (see `OAuthAccount`)
    oauth_accounts: tuple[OAuthAccount, ...] = ()
    # passkeys: the user's registered WebAuthn credentials (see `Passkey`); `passkey_auth_enabled` is whether any
    passkeys: tuple[Passkey, ...] = ()

    @property
    def auth_email(self) -> str | None:
        """The address that signs this user in, or None (the key of the project's e-mail index)."""
        return self.primary_email if self.primary_email_auth_enabled else None


class CodePurpose(StrEnum):
    """What a one-time code is for (the values are stored: a code of one purpose never passes as another's)."""

    #: Signing in by e-mail (a sign-in code and its magic link).
    SIGN_IN = "sign_in"
    #: The second factor's attempt code, returned by a first factor that needs a TOTP next.
    MFA = "mfa"
    # team invitations
    #: An invitation to join a team, mailed to an address (reference part 2 §3).
    TEAM_INVITATION = "team_invitation"
    # passwords (reference part 2 §1)
    #: Resetting a forgotten password: the whole 45-character code is mailed in a link (no nonce is returned);
    #: the code names the user it was sent for (`user_id`), the address (`email`), the password it may replace
    #: (`password_fingerprint`) and the user's primary e-mail channel (`primary_channel_id`).
    PASSWORD_RESET = "password_reset"  # noqa: S105 (a purpose, not a password)
    # contact channels
    #: Verifying a contact channel (reference part 2 §2): the code names the user and the address.
    CONTACT_CHANNEL_VERIFICATION = "contact_channel_verification"
    # passkeys
    #: A passkey registration's challenge: returned whole to the signed-in user it names (`user_id`); the WebAuthn
    #: challenge is derived from it (`identity_proto.passkeys.challenge_of`).
    PASSKEY_REGISTRATION = "passkey_registration"
    #: A passkey sign-in's challenge (no user: the credential names them).
    PASSKEY_AUTHENTICATION = "passkey_authentication"


@dataclass(frozen=True, slots=True)
class VerificationCode:
    """A one-time code. Only hashes are stored: of the whole code (its key) and of its nonce (the last 39
    characters, which key the attempt counter shared by every code with that nonce)."""

    code_hash: str
    nonce_hash: str
    purpose: CodePurpose
    created_at_millis: int
    expires_at_millis: int
    #: Sign-in codes: the (normalised) address the code was sent to.
    email: str | None = None
    #: MFA attempt codes: the user who passed the first factor, and whether that sign-in created them.
    user_id: str | None = None
    is_new_user: bool = False
    used: bool = False
    # team invitations
    #: Team invitations: the invitation's id (a UUID, what the API shows; the code itself is never shown) and the
    #: team it invites to. `email` is the invited address.
    id: str | None = None
    team_id: str | None = None
    # passwords
    #: Password-reset codes: the user's password when the code was sent, as `password_fingerprint` makes it ('' for
    #: none). The code resets only while the user's password is still that one (None: it never does).
    password_fingerprint: str | None = None
    #: Password-reset codes: the id of the user's primary e-mail channel when the code was stored ('' for none;
    #: `effects.passwords.reset_primary`). The code resets only while that channel is still their primary (None: it
    #: never does), so a code mailed before the primary moved (the old address kept as a channel) dies with it.
    primary_channel_id: str | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in session. Its refresh token is stored only as a hash."""

    id: str
    user_id: str
    refresh_token_hash: str
    created_at_millis: int
    last_used_at_millis: int
    expires_at_millis: int
    is_impersonation: bool = False


@dataclass(frozen=True, slots=True)
class Email:
    """An e-mail the service sent (kept in the outbox when mail goes there).

    A sign-in mail also carries its parts for test suites reading the outbox: `code`, the 6-character code a
    person types (upper case, as mailed), and `magic_link`, the link whose `code` parameter is the full
    45-character code. Mailers send only `to`, `subject` and `text`."""

    id: str
    to: str
    subject: str
    text: str
    created_at_millis: int
    code: str | None = None
    magic_link: str | None = None


_USER_FIELDS = frozenset(f.name for f in dataclasses.fields(User))


def user_to_json(user: User) -> dict[str, Any]:
    """The whole user record (password hash and TOTP secret included) as JSON for a store."""
    return dataclasses.asdict(user)


def user_from_json(data: dict[str, Any]) -> User:
    """Inverse of `user_to_json`; unknown keys are ignored, missing ones take their defaults (a missing id or
    time is a `TypeError`, as the constructor would raise). Every user a Redis store reads comes through here:
    the constructor is called positionally by a function written once for `User` (as `replaced` does)."""
    try:
        return _user_from_json(data, data.get)
    except KeyError as missing:
        raise TypeError(f"a stored user has no {missing}") from None


def _accounts(value: Any) -> tuple[OAuthAccount, ...]:
    if not value:
        return ()
    return tuple(item if isinstance(item, OAuthAccount) else OAuthAccount(**item) for item in value)


def _passkeys(value: Any) -> tuple[Passkey, ...]:
    if not value:
        return ()
    return tuple(
        item if isinstance(item, Passkey) else Passkey(**{**item, "transports": tuple(item.get("transports", ()))})
        for item in value
    )


def _scores(value: Any) -> RiskScores:
    return RiskScores(**value) if isinstance(value, dict) else value if value is not None else RiskScores()


def _make_user_reader() -> Callable[[dict[str, Any], Any], User]:
    arguments = []
    namespace: dict[str, Any] = {"User": User, "_scores": _scores, "_accounts": _accounts, "_passkeys": _passkeys}
    for f in dataclasses.fields(User):
        if f.name == "risk_scores":
            arguments.append("_scores(get('risk_scores'))")
        elif f.name == "oauth_accounts":
            arguments.append("_accounts(get('oauth_accounts'))")
        elif f.name == "passkeys":
            arguments.append("_passkeys(get('passkeys'))")
        elif f.default is dataclasses.MISSING:
            arguments.append(f"data[{f.name!r}]")
        else:
            namespace[f"_default_{f.name}"] = f.default
            arguments.append(f"get({f.name!r}, _default_{f.name})")
    local: dict[str, Any] = {}
    exec(f"def read(data, get):\n    return User({', '.join(arguments)})\n", namespace, local)  # noqa: S102
    return local["read"]  # type: ignore[no-any-return]


_user_from_json = _make_user_reader()


@dataclass(frozen=True, slots=True)
class Team:
    """A team of one project."""

    id: str
    display_name: str
    created_at_millis: int
    profile_image_url: str | None = None
    client_metadata: Any = None
    client_read_only_metadata: Any = None
    server_metadata: Any = None


@dataclass(frozen=True, slots=True)
class Membership:
    """A user's membership of a team, with their team member profile and their team permissions."""

    team_id: str
    user_id: str
    created_at_millis: int
    #: The member's own profile; None falls back to the user's own display name and image.
    display_name: str | None = None
    profile_image_url: str | None = None
    #: Permission ids held in this team (e.g. team_admin, $read_members), sorted.
    permissions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClockOverride:
    """Dev/test mode only: how the service's clock differs from the host's. Frozen at `frozen_ms` when set,
    else the host's time plus `offset_ms`. Kept in the store so every worker sharing it agrees."""

    frozen_ms: int | None = None
    offset_ms: int = 0

    def now(self, host_now_ms: int) -> int:
        """The service's time when the host's is `host_now_ms`."""
        return self.frozen_ms if self.frozen_ms is not None else host_now_ms + self.offset_ms


# --------------------------------------------------------------------------------------------------------------
# API keys


class ApiKeyType(StrEnum):
    """Whose an API key is (the values are stored, and are the key's `type` and the fourth part of its text)."""

    USER = "user"
    TEAM = "team"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A user or team API key (reference part 2 §5). The key itself is never stored: only its SHA-256 hex digest
    (`key_hash`, what `check` looks it up by) and its last four characters (what lists show)."""

    id: str
    type: ApiKeyType
    #: The user id (a user key) or team id (a team key) the key belongs to.
    owner_id: str
    description: str
    is_public: bool
    created_at_millis: int
    key_hash: str
    last_four: str
    expires_at_millis: int | None = None
    manually_revoked_at_millis: int | None = None


# Contact channels (reference part 2 §2)


@dataclass(frozen=True, slots=True)
class ContactChannel:
    """One e-mail address of a user (`type` is always "email").

    A user's primary channel is not stored as a `ContactChannel`: it *is* the user's `primary_email*` fields
    (`primary_channel` builds it from them), so a user record and its channels cannot disagree. Only the other
    channels are stored as records of their own (see `identity_proto.effects.contact_channels`)."""

    id: str
    user_id: str
    value: str
    is_verified: bool
    used_for_auth: bool
    created_at_millis: int
    is_primary: bool = False


#: The namespace of the ids derived for primary channels whose user record names none (uuid5 of the user's id).
_PRIMARY_CHANNEL_NAMESPACE = uuid.UUID("7c0b6f2e-3f55-4d3e-9a43-6f1f6d1e2c51")


@functools.lru_cache(maxsize=4096)  # else a uuid5 per read of a user's channels (sending a sign-in code reads them)
def derived_primary_channel_id(user_id: str) -> str:
    """The id of the primary channel of a user whose record names none (`User.primary_email_channel_id`)."""
    return str(uuid.uuid5(_PRIMARY_CHANNEL_NAMESPACE, user_id))


def primary_channel(user: User) -> ContactChannel | None:
    """The user's primary e-mail channel, read from their `primary_email*` fields; None without a primary e-mail.
    A user created or changed only through /users has no `primary_email_channel_id`: its channel's id is derived
    from the user's id (stable for as long as the user has it; a write that moves it away pins a fresh one)."""
    if user.primary_email is None:
        return None
    channel_id = user.primary_email_channel_id or derived_primary_channel_id(user.id)
    created = user.primary_email_channel_created_at_millis
    return ContactChannel(
        id=channel_id,
        user_id=user.id,
        value=user.primary_email,
        is_verified=user.primary_email_verified,
        used_for_auth=user.primary_email_auth_enabled,
        created_at_millis=user.signed_up_at_millis if created is None else created,
        is_primary=True,
    )


def contact_channel_to_json(channel: ContactChannel) -> dict[str, Any]:
    """A stored (non-primary) channel as JSON for a store (its user is the key it is stored under)."""
    return {
        "id": channel.id,
        "value": channel.value,
        "is_verified": channel.is_verified,
        "used_for_auth": channel.used_for_auth,
        "created_at_millis": channel.created_at_millis,
    }


def contact_channel_from_json(user_id: str, data: dict[str, Any]) -> ContactChannel:
    """Inverse of `contact_channel_to_json`, for the channel stored under `user_id`."""
    return ContactChannel(
        id=data["id"],
        user_id=user_id,
        value=data["value"],
        is_verified=bool(data["is_verified"]),
        used_for_auth=bool(data["used_for_auth"]),
        created_at_millis=int(data["created_at_millis"]),
    )


# Records made on every request get the cheaper frozen `__init__` (identity_proto.quickinit).
for _record in (RiskScores, User, VerificationCode, Session, Email, Team, Membership, ContactChannel):
    quick_init(_record)


def replaced(record: _R, changes: Mapping[str, Any], *, known: bool = False) -> _R:
    """`record` with `changes` (field -> value) made: `dataclasses.replace`, without its per-field bookkeeping.

    `dataclasses.replace` walks the fields, looks each up and calls the constructor with keywords: for a 24-field
    `User` that is most of the cost of a PATCH's write. The function made here for each record type (once, as
    `dataclasses` makes `__init__`) calls the constructor with every field positionally, so what the constructor
    checks is still checked. A name that is not a field is a `TypeError`, as with `dataclasses.replace`, unless
    the caller says the names are `known` fields (a validated change set: `identity_proto.changes`)."""
    cls = type(record)
    found = _REPLACERS.get(cls)
    if found is None:
        found = _REPLACERS[cls] = _make_replacer(cls)
    make, names = found
    if not known:
        unknown = changes.keys() - names
        if unknown:
            raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    return make(record, changes.get)  # type: ignore[no-any-return]


_REPLACERS: dict[type[Any], tuple[Callable[[Any, Any], Any], frozenset[str]]] = {}


def _make_replacer(cls: type[Any]) -> tuple[Callable[[Any, Any], Any], frozenset[str]]:
    fields = dataclasses.fields(cls)
    names = frozenset(f.name for f in fields)
    if any(not f.init or f.kw_only for f in fields):  # no record has such a field; a new one would say so here
        raise TypeError(f"replaced() needs every field of {cls.__name__} positional in __init__")
    arguments = ", ".join(f"get({f.name!r}, r.{f.name})" for f in fields)
    namespace: dict[str, Any] = {}
    exec(f"def replace(r, get):\n    return cls({arguments})\n", {"cls": cls}, namespace)  # noqa: S102
    return namespace["replace"], names


# webhooks: what a store records with a change (see identity_proto.events)
@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as a store recorded it."""

    #: The message id receivers see (`svix-id` / `webhook-id`), unique within the project, stable over retries.
    id: str
    type: str
    #: When the store recorded it (the store's clock: for retention only).
    created_at_millis: int
    #: The changed record: a `User`/`Team` object (memory store) or the JSON text of its stored fields (Redis).
    record: Any = None
    #: The user's selected team, likewise (user events), or None.
    team: Any = None
    ids: tuple[str, ...] = ()


quick_init(StoredEvent)  # made with every recorded change (identity_proto.quickinit)
