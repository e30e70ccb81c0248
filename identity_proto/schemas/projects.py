"""Projects, and the keys that sign a project's tokens."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from identity_proto.changes import ProjectConfigChanges
from identity_proto.records import RateLimitSetting, TrustedDomain
from identity_proto.schemas.base import (
    ORIGIN_PATTERN,
    UUID_PATTERN,
    Body,
    Query,
    _not_null,
    _plain_name,
    documented,
    is_uuid,
)
from identity_proto.schemas.oauth_accounts import MergeStrategy, OAuthProviderIn, unique_provider_ids
from identity_proto.urls import UnsafeURL, parse_origin_pattern


def _rule_names(schema: dict[str, Any]) -> dict[str, Any]:
    """`rate_limits` in the document: its keys are the rules' names."""
    from identity_proto.ratelimits import DEFAULT_RULES

    names = {"propertyNames": {"enum": sorted(DEFAULT_RULES)}}
    if "anyOf" in schema:
        return {**schema, "anyOf": [b if b.get("type") == "null" else {**b, **names} for b in schema["anyOf"]]}
    return {**schema, **names}


class DomainIn(Body):
    """A trusted callback base: an http(s) URL with a host and nothing after the path."""

    domain: str = Field(max_length=2048)
    handler_path: str = Field(default="/handler", max_length=2048)

    @field_validator("domain")
    @classmethod
    @documented({"pattern": ORIGIN_PATTERN})
    def _domain_is_url(cls, value: str) -> str:
        # The one rule of identity_proto.urls: a domain that a browser might read differently is refused here.
        try:
            parse_origin_pattern(value)
        except UnsafeURL:
            raise ValueError("is not a valid URL") from None  # the original's words (why: UnsafeURL's message)
        return value.rstrip("/")

    @field_validator("handler_path")
    @classmethod
    @documented({"pattern": "^/"})
    def _path_is_absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with /")
        return value


class RateLimitIn(Body):
    """One rate-limit rule's value: `limit` requests per `window_seconds` (limit 0: off)."""

    limit: int = Field(ge=0, le=10_000_000)
    window_seconds: int = Field(ge=1, le=86_400)


class ProjectConfigPatch(Body):
    """Any subset of the project's config keys; omitted keys keep their value."""

    sign_up_enabled: bool | None = None
    magic_link_enabled: bool | None = None
    credential_enabled: bool | None = None
    allow_localhost: bool | None = None
    domains: list[DomainIn] | None = None
    client_team_creation_enabled: bool | None = None
    client_user_deletion_enabled: bool | None = None
    create_team_on_sign_up: bool | None = None
    require_email_verification: bool | None = None
    require_publishable_client_key: bool | None = None
    team_creator_default_permissions: list[str] | None = None
    team_member_default_permissions: list[str] | None = None
    #: Project permissions granted to every new user (permissions group).
    user_default_permissions: list[str] | None = None
    #: The project's own rate-limit rules, by rule name (the whole set: rules left out take their defaults).
    rate_limits: dict[str, RateLimitIn] | None = None
    # API keys (reference part 2 §5)
    allow_user_api_keys: bool | None = None
    allow_team_api_keys: bool | None = None
    # passkeys: WebAuthn registration and sign-in (off by default)
    passkey_enabled: bool | None = None
    # OAuth accounts: providers (the whole list; a secret left out is kept) and the account merge strategy
    oauth_providers: list[OAuthProviderIn] | None = Field(default=None, max_length=64)
    oauth_account_merge_strategy: MergeStrategy | None = None
    _oauth_ids = field_validator("oauth_providers")(unique_provider_ids)

    @field_validator("rate_limits")
    @classmethod
    @documented(lambda schema: _rule_names(schema))
    def _known_rules(cls, value: dict[str, RateLimitIn] | None) -> dict[str, RateLimitIn] | None:
        from identity_proto.ratelimits import DEFAULT_RULES  # the rules live with the machinery that applies them

        unknown = sorted(set(value or {}) - set(DEFAULT_RULES))
        if unknown:
            raise ValueError(f"has unknown rules: {', '.join(unknown)} (known: {', '.join(sorted(DEFAULT_RULES))})")
        return value

    _non_null = field_validator("*", mode="before")(_not_null)

    def changes(self) -> ProjectConfigChanges:
        """The config changes this patch makes (stored values: tuples, records)."""
        out: list[tuple[str, Any]] = []
        for name in sorted(self.model_fields_set):
            value = getattr(self, name)
            if name == "domains":
                value = tuple(TrustedDomain(item.domain, item.handler_path) for item in value)
            elif name == "rate_limits":
                value = tuple(RateLimitSetting(rule, v.limit, v.window_seconds) for rule, v in sorted(value.items()))
            elif name == "oauth_providers":  # OAuth accounts
                value = tuple(item.record() for item in value)
            elif isinstance(value, list):
                value = tuple(value)
            out.append((name, value))
        return ProjectConfigChanges(tuple(out))


class ProjectCreateBody(Body):
    """POST /internal/projects."""

    display_name: str = Field(min_length=1, max_length=256)
    config: ProjectConfigPatch | None = None

    _plain_display_name = field_validator("display_name")(_plain_name)


class ProjectUpdateBody(Body):
    """PATCH /projects/current."""

    display_name: str | None = Field(default=None, min_length=1, max_length=256)
    config: ProjectConfigPatch | None = None

    _non_null = field_validator("display_name", "config", mode="before")(_not_null)
    _plain_display_name = field_validator("display_name")(_plain_name)


class ProjectIdParams(Query):
    """Path parameters naming a project by id."""

    project_id: str

    @field_validator("project_id")
    @classmethod
    @documented({"pattern": UUID_PATTERN})
    def _uuid(cls, value: str) -> str:
        if not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value


# --------------------------------------------------------------------------------------------------------------
# Keys


class JwksQuery(Query):
    """GET /projects/{project_id}/.well-known/jwks.json: `include_restricted=true` adds the key of restricted users'
    tokens, `include_anonymous=true` that one and the key of anonymous users' tokens."""

    include_restricted: Literal["true", "false"] | None = None
    include_anonymous: Literal["true", "false"] | None = None


class AnyProjectIdParams(Query):
    """Path parameters naming a project by id (a UUID or `internal`)."""

    project_id: str = Field(max_length=64)


# --------------------------------------------------------------------------------------------------------------
# Compatibility mode: the original's admin project update (its SDK's `project.update`)

#: The original's default e-mail theme (`render.ORIGINAL_DEFAULT_EMAIL_THEME_ID`): the only one mail here has.
_ORIGINAL_DEFAULT_EMAIL_THEME_ID = "1df07ae6-abf3-4a40-83a5-a1a2cbe336ac"


class OriginalIdIn(Body):
    """A permission of the original's default permission lists: `{"id": ...}`."""

    id: str = Field(min_length=1, max_length=256)


class OriginalProviderIn(Body):
    """One provider of the original's `config.oauth_providers`: "shared" (its development keys, served here by
    the mock provider, in dev mode) or "standard" with the provider's client id and secret."""

    id: str
    type: Literal["shared", "standard"]
    client_id: str | None = Field(default=None, min_length=1, max_length=512)
    client_secret: str | None = Field(default=None, min_length=1, max_length=2048)
    microsoft_tenant_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]{1,128}$")
    facebook_config_id: str | None = None
    apple_bundle_ids: list[str] | None = None

    @field_validator("id")
    @classmethod
    def _provider(cls, value: str) -> str:
        from identity_proto.records import OAUTH_PROVIDER_TYPES

        if value not in OAUTH_PROVIDER_TYPES or value in ("oidc", "mock"):
            raise ValueError(f"{value!r} is not a provider of this service")
        return value

    @field_validator("facebook_config_id", "apple_bundle_ids")
    @classmethod
    def _unsupported(cls, value: Any) -> Any:
        if value:
            raise ValueError("is not supported by this service (no Facebook or Apple provider)")
        return value

    def ours(self) -> dict[str, Any]:
        """This provider in `OAuthProviderIn`'s shape."""
        if self.type == "shared":
            return {"id": self.id, "type": "mock"}
        out: dict[str, Any] = {"id": self.id, "type": self.id, "client_id": self.client_id}
        if self.client_secret is not None:
            out["client_secret"] = self.client_secret
        if self.microsoft_tenant_id is not None:
            out["microsoft_tenant_id"] = self.microsoft_tenant_id
        return out


class OriginalEmailConfigIn(Body):
    """The original's `config.email_config`: only `{"type": "shared"}` here (mail goes out through the service's
    own mailer, `IDENTITY_MAIL`; a project has no SMTP server of its own)."""

    type: Literal["shared"]


class OriginalConfigPatch(Body):
    """The original's admin config update (`projectsCrudAdminUpdateSchema.config`), in its names and shapes."""

    sign_up_enabled: bool | None = None
    credential_enabled: bool | None = None
    magic_link_enabled: bool | None = None
    passkey_enabled: bool | None = None
    allow_localhost: bool | None = None
    create_team_on_sign_up: bool | None = None
    client_team_creation_enabled: bool | None = None
    client_user_deletion_enabled: bool | None = None
    allow_user_api_keys: bool | None = None
    allow_team_api_keys: bool | None = None
    oauth_account_merge_strategy: MergeStrategy | None = None
    domains: list[DomainIn] | None = None
    oauth_providers: list[OriginalProviderIn] | None = Field(default=None, max_length=64)
    email_config: OriginalEmailConfigIn | None = None
    email_theme: Literal["1df07ae6-abf3-4a40-83a5-a1a2cbe336ac"] | None = None
    team_creator_default_permissions: list[OriginalIdIn] | None = None
    team_member_default_permissions: list[OriginalIdIn] | None = None
    user_default_permissions: list[OriginalIdIn] | None = None

    @field_validator("oauth_providers")
    @classmethod
    def _unique(cls, value: list[OriginalProviderIn] | None) -> list[OriginalProviderIn] | None:
        ids = [p.id for p in value or ()]
        if len(ids) != len(set(ids)):
            raise ValueError("has a provider id more than once")
        return value

    def ours(self) -> ProjectConfigPatch:
        """The same update in this service's config names (what stays the same here is left out)."""
        data: dict[str, Any] = {}
        for name in sorted(self.model_fields_set):
            value = getattr(self, name)
            if value is None or name in ("email_config", "email_theme"):
                continue  # null keeps the value, as in the original; the rest is what this service always has
            if name == "oauth_providers":
                data[name] = [p.ours() for p in value]
            elif name.endswith("_permissions"):
                data[name] = [item.id for item in value]
            elif name == "domains":
                data[name] = [{"domain": d.domain, "handler_path": d.handler_path} for d in value]
            else:
                data[name] = value
        return ProjectConfigPatch.model_validate(data)


class OriginalProjectUpdateBody(Body):
    """PATCH /internal/projects/current (compatibility mode): the original's admin project update. What this
    service has no notion of is accepted only with the value it always answers (no description or logos, not in
    production mode, onboarding completed): anything else is refused (400), never acknowledged and lost."""

    display_name: str | None = Field(default=None, min_length=1, max_length=256)
    description: Literal[""] | None = None
    is_production_mode: Literal[False] | None = None
    onboarding_status: Literal["completed"] | None = None
    logo_url: None = None
    logo_full_url: None = None
    logo_dark_mode_url: None = None
    logo_full_dark_mode_url: None = None
    config: OriginalConfigPatch | None = None

    _plain_display_name = field_validator("display_name")(_plain_name)
