"""Request schemas (pydantic models, built once at import) and their translation into SCHEMA_ERROR.

Rules:
- Unknown keys are never dropped: every model forbids extra keys, at every nesting level, and the error reads
  like the original's: `body contains unknown properties: a, b` (reference §0.1).
- JSON bodies are validated strictly (no "123" for a number); query strings, which are text by nature, laxly.
- All errors of one request are collected into one SCHEMA_ERROR whose `details.message` starts with
  `Request validation failed on <METHOD> <path>:` and lists one `  - <message>` line per problem.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from identity_proto.changes import ProjectConfigChanges
from identity_proto.errors import ErrorCode, KnownError
from identity_proto.passwords import hash_cost_problem
from identity_proto.records import RateLimitSetting, TrustedDomain
from identity_proto.urls import UnsafeURL, parse_origin_pattern, parse_web_url
from identity_proto.users import checked_email

__all__ = [
    "MAX_METADATA_BYTES",
    "Body",
    "DomainIn",
    "EmptyBody",
    "EmptyQuery",
    "ProjectConfigPatch",
    "ProjectCreateBody",
    "ProjectIdParams",
    "ProjectUpdateBody",
    "Query",
    "Validated",
    "schema_error",
    "validate_model",
]

M = TypeVar("M", bound=BaseModel)

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class Body(BaseModel):
    """Base of every JSON body model: strict types, no unknown keys, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Query(BaseModel):
    """Base of every query model: values arrive as text and are coerced; no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EmptyBody(Body):
    """The body of an endpoint that takes none: absent, or `{}`."""


class EmptyQuery(Query):
    """The query of an endpoint that takes none."""


def is_uuid(value: str) -> bool:
    """Whether `value` is a UUID in canonical lower-case form."""
    return _UUID.match(value) is not None


def _not_null(value: Any) -> Any:
    """For optional fields that, when sent, must have a value: omit the key to keep the stored one; `null` is a
    mistake, not a reset."""
    if value is None:
        raise ValueError("cannot be null")
    return value


def schema_error(method: str, path: str, lines: Sequence[str]) -> KnownError:
    """The SCHEMA_ERROR for these problem lines, worded as the original words it."""
    message = f"Request validation failed on {method} {path}:\n" + "\n".join(f"  - {line}" for line in lines)
    return KnownError(ErrorCode.SCHEMA_ERROR, details={"message": message})


#: model -> its instance from an empty input, for models that accept one (every model is frozen: one instance
#: serves every request that sent nothing, such as each GET's absent query and body).
_EMPTY_INSTANCES: dict[type[BaseModel], BaseModel] = {}


@dataclass(frozen=True, slots=True)
class Validated(Generic[M]):
    """What validating one input gave: the model (`value`), or the problem lines (`problems`, never empty)."""

    value: M | None = None
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the input was valid (`value` is set)."""
        return not self.problems


def validate_model(model: type[M], data: Any, location: str) -> Validated[M]:
    """`data` validated as `model`, or its problem lines (prefixed with `location`: body, query)."""
    if data is None or data == {}:
        empty = _EMPTY_INSTANCES.get(model)
        if empty is not None:
            return Validated(cast(M, empty))
        data = {}
    if not isinstance(data, dict):
        return Validated(problems=(f"{location} must be an object",))
    try:
        validated = model.model_validate(data)
    except ValidationError as exc:
        return Validated(problems=tuple(_problem_lines(exc.errors(include_url=False), location)))
    if not data:
        _EMPTY_INSTANCES[model] = validated
    return Validated(validated)


def _problem_lines(errors: list[ErrorDetails], location: str) -> list[str]:
    lines: list[str] = []
    unknown: dict[str, list[str]] = {}
    for error in errors:
        loc = error["loc"]
        if error["type"] == "extra_forbidden":
            unknown.setdefault(_path(location, loc[:-1]), []).append(str(loc[-1]))
            continue
        if not loc and error["type"] == "value_error":
            # A rule about the whole object (a model validator): its message lines stand on their own.
            lines.extend(str((error.get("ctx") or {}).get("error", error["msg"])).splitlines())
            continue
        lines.append(_message(_path(location, loc), error))
    lines.extend(f"{parent} contains unknown properties: {', '.join(names)}" for parent, names in unknown.items())
    return lines


def _path(location: str, loc: tuple[int | str, ...]) -> str:
    path = location
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _message(where: str, error: ErrorDetails) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return f"{where} must be defined"
    if error.get("input", ...) is None and kind.endswith("_type"):
        return f"{where} cannot be null"
    simple = {
        "string_type": "must be a string",
        "bool_type": "must be a boolean",
        "bool_parsing": "must be a boolean",
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "int_from_float": "must be an integer",
        "float_type": "must be a number",
        "dict_type": "must be an object",
        "model_type": "must be an object",
        "model_attributes_type": "must be an object",
        "list_type": "must be an array",
        "tuple_type": "must be an array",
        "uuid_parsing": "must be a valid UUID",
        "uuid_type": "must be a valid UUID",
    }
    if kind in simple:
        return f"{where} {simple[kind]}"
    if kind == "string_too_long":
        return f"{where} must be at most {ctx.get('max_length')} characters"
    if kind == "string_too_short":
        return f"{where} must be at least {ctx.get('min_length')} characters"
    if kind == "less_than_equal":
        return f"{where} must be less than or equal to {ctx.get('le')}"
    if kind == "greater_than_equal":
        return f"{where} must be greater than or equal to {ctx.get('ge')}"
    if kind in {"literal_error", "enum"}:
        expected = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        # Spelled as JSON, not Python: the caller wrote false, not False.
        expected = ", ".join({"False": "false", "True": "true", "None": "null"}.get(v, v) for v in expected.split(", "))
        return f"{where} must be one of the following values: {expected}"
    if kind == "value_error":
        # Our validators raise ValueError with a message written to follow the field path.
        return f"{where} {ctx.get('error')}"
    return f"{where} is invalid: {error['msg']}"


# --------------------------------------------------------------------------------------------------------------
# Projects


class DomainIn(Body):
    """A trusted callback base: an http(s) URL with a host and nothing after the path."""

    domain: str = Field(max_length=2048)
    handler_path: str = Field(default="/handler", max_length=2048)

    @field_validator("domain")
    @classmethod
    def _domain_is_url(cls, value: str) -> str:
        # The one rule of identity_proto.urls: a domain that a browser might read differently is refused here.
        try:
            parse_origin_pattern(value)
        except UnsafeURL:
            raise ValueError("is not a valid URL") from None  # the original's words (why: UnsafeURL's message)
        return value.rstrip("/")

    @field_validator("handler_path")
    @classmethod
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
    #: The project's own rate-limit rules, by rule name (the whole set: rules left out take their defaults).
    rate_limits: dict[str, RateLimitIn] | None = None

    @field_validator("rate_limits")
    @classmethod
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
            elif isinstance(value, list):
                value = tuple(value)
            out.append((name, value))
        return ProjectConfigChanges(tuple(out))


class ProjectCreateBody(Body):
    """POST /internal/projects."""

    display_name: str = Field(min_length=1, max_length=256)
    config: ProjectConfigPatch | None = None


class ProjectUpdateBody(Body):
    """PATCH /projects/current."""

    display_name: str | None = Field(default=None, min_length=1, max_length=256)
    config: ProjectConfigPatch | None = None

    _non_null = field_validator("display_name", "config", mode="before")(_not_null)


class ProjectIdParams(Query):
    """Path parameters naming a project by id."""

    project_id: str

    @field_validator("project_id")
    @classmethod
    def _uuid(cls, value: str) -> str:
        if not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value


# --------------------------------------------------------------------------------------------------------------
# Shared field rules


def _uuid_or_me(value: str) -> str:
    if value != "me" and not is_uuid(value):
        raise ValueError("must be a valid UUID")
    return value


def _url_without_spaces(value: str) -> str:
    parts = urlsplit(value)
    if not parts.scheme or not (parts.netloc or parts.path) or any(c.isspace() for c in value):
        raise ValueError("is not a valid URL")
    return value


def _web_url(value: str | None) -> str | None:
    """A callback or redirect URL: refused unless every parser reads it alike (identity_proto.urls), and kept in
    its normalised form, so that what is checked is what is stored and mailed."""
    if value is None:
        return None
    try:
        return parse_web_url(value).href
    except UnsafeURL:
        raise ValueError("is not a valid URL") from None  # the original's words


def _email(value: str | None) -> str | None:
    """Every e-mail field of every route: the one rule of `identity_proto.users.checked_email`, whose stored
    (normalised) form is what the flow sees. (`""` is worded as the original words it for primary_email.)"""
    if value is None:
        return None
    if value.strip() == "":
        raise ValueError("must not be empty")
    return checked_email(value)


def _no_nul(value: str | None) -> str | None:
    # bcrypt cannot hash a NUL byte: refuse it as invalid input rather than fail while hashing.
    if value is not None and "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _code_of_45(value: str) -> str:
    if len(value) != 45:
        raise ValueError("must be exactly 45 characters")
    return value


def _sign_in_code(value: str) -> str:
    """A sign-in code: the mail's 6 characters are not enough on their own, and the message says what is."""
    if len(value) != 45:
        raise ValueError(
            "must be exactly 45 characters: the 6-character code from the e-mail followed by the nonce returned "
            "when it was sent (or the code parameter of the magic link)"
        )
    return value


# --------------------------------------------------------------------------------------------------------------
# Sign-in


class SendSignInCodeBody(Body):
    """POST /auth/otp/send-sign-in-code (reference §2.2)."""

    email: str
    callback_url: str = Field(max_length=2048)
    bot_challenge_token: str | None = None
    bot_challenge_phase: Literal["invisible", "visible"] | None = None
    bot_challenge_unavailable: Literal["true"] | None = None

    _email_rule = field_validator("email")(_email)
    _callback = field_validator("callback_url")(_web_url)


class CodeBody(Body):
    """POST /auth/otp/sign-in and /auth/otp/sign-in/check-code."""

    code: str
    _code = field_validator("code")(_sign_in_code)


class MfaSignInBody(Body):
    """POST /auth/mfa/sign-in (reference §2.5)."""

    type: Literal["totp"]
    totp: str = Field(max_length=64)
    code: str
    _code = field_validator("code")(_code_of_45)


class PasswordSignUpBody(Body):
    """POST /auth/password/sign-up."""

    email: str
    password: str
    verification_callback_url: str | None = Field(default=None, max_length=2048)
    _password = field_validator("password")(_no_nul)
    _email_rule = field_validator("email")(_email)
    _callback = field_validator("verification_callback_url")(_web_url)


class PasswordSignInBody(Body):
    """POST /auth/password/sign-in."""

    email: str = Field(max_length=256)
    password: str = Field(max_length=256)
    _email_rule = field_validator("email")(_email)


# --------------------------------------------------------------------------------------------------------------
# Sessions

#: reference §1.4: at most 367 days.
MAX_SESSION_LIFETIME_MS = 31_708_800_000


class OAuthTokenBody(Body):
    """POST /auth/oauth/token, form-encoded (official-sdk §3.8): the refresh grant only."""

    grant_type: Literal["refresh_token"]
    refresh_token: str = Field(min_length=1, max_length=256)
    client_id: str = Field(min_length=1, max_length=64)
    client_secret: str = Field(min_length=1, max_length=256)
    scope: str | None = None


class CreateSessionBody(Body):
    """POST /auth/sessions (server, admin)."""

    user_id: str
    expires_in_millis: int = Field(default=365 * 24 * 3600 * 1000, ge=1, le=MAX_SESSION_LIFETIME_MS)
    is_impersonation: bool = False
    _user_id = field_validator("user_id")(_uuid_or_me)


class ListSessionsQuery(Query):
    """GET /auth/sessions."""

    user_id: str
    _user_id = field_validator("user_id")(_uuid_or_me)


class SessionIdParams(Query):
    """Path parameters naming a session."""

    session_id: str

    @field_validator("session_id")
    @classmethod
    def _uuid(cls, value: str) -> str:
        if not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value


# --------------------------------------------------------------------------------------------------------------
# E-mail and keys


class OutboxQuery(Query):
    """GET /emails/outbox."""

    to: str | None = Field(default=None, max_length=256)
    _to_rule = field_validator("to")(_email)
    limit: int = Field(default=100, ge=1, le=1000)


class JwksQuery(Query):
    """GET /projects/{project_id}/.well-known/jwks.json (the original's filters are accepted and change nothing:
    one key signs every kind of token)."""

    include_restricted: Literal["true", "false"] | None = None
    include_anonymous: Literal["true", "false"] | None = None


class AnyProjectIdParams(Query):
    """Path parameters naming a project by id (a UUID or `internal`)."""

    project_id: str = Field(max_length=64)


# --------------------------------------------------------------------------------------------------------------
# Users (reference §3.2; our spec wins where it speaks: profile images smaller than 100KB)

#: The spec: a profile image (URL or base64 data URL) is smaller than 100KB.
MAX_PROFILE_IMAGE_BYTES = 100 * 1024

_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")
_COUNTRY = re.compile(r"^[A-Z]{2}$")


#: The largest metadata object accepted (client_metadata, client_read_only_metadata, server_metadata of users and
#: teams), as compact JSON: 64 KiB. Metadata is stored inline with its owner and sent back with every read of it,
#: so without a cap of its own one client could make its user (or its team, read by every member) as large as a
#: whole request body allows (1 MiB by default) and every read of it that slow. Larger objects are refused with
#: SCHEMA_ERROR naming the field and this limit.
MAX_METADATA_BYTES = 64 * 1024


def _metadata(value: Any) -> Any:
    # orjson is the service's JSON encoder (render.dump_json): the size counted is the size stored and sent.
    if value is not None and len(orjson.dumps(value)) > MAX_METADATA_BYTES:
        raise ValueError(f"must be at most {MAX_METADATA_BYTES} bytes as JSON (64 KiB)")
    return value


def _empty_to_none(value: Any) -> Any:
    return None if value == "" else value


def _profile_image(value: str | None) -> str | None:
    if value is None:
        return None
    if len(value.encode()) >= MAX_PROFILE_IMAGE_BYTES:
        raise ValueError("must be smaller than 100KB")
    return _url_without_spaces(value)


def _base64_or_none(value: str | None) -> str | None:
    if value is not None and not _BASE64.match(value):
        raise ValueError("is not valid base64")
    return value


def _country_or_none(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip().upper()
    if not _COUNTRY.match(value):
        raise ValueError("must be a 2-letter country code")
    return value


class SignUpRiskScores(Body):
    """risk_scores.sign_up: both keys required, integers 0-100."""

    bot: int = Field(ge=0, le=100)
    free_trial_abuse: int = Field(ge=0, le=100)


class RiskScoresIn(Body):
    """risk_scores."""

    sign_up: SignUpRiskScores


class ClientUserUpdateBody(Body):
    """PATCH /users/me with client access: only the client-writable fields (reference §3.2)."""

    display_name: str | None = Field(default=None, max_length=256)
    profile_image_url: str | None = None
    client_metadata: Any = None
    selected_team_id: str | None = None
    totp_secret_base64: str | None = None
    otp_auth_enabled: bool | None = None
    passkey_auth_enabled: bool | None = None
    primary_email: str | None = None

    _display_name = field_validator("display_name", mode="before")(_empty_to_none)
    _image = field_validator("profile_image_url")(_profile_image)
    _email_rule = field_validator("primary_email")(_email)
    _client_metadata = field_validator("client_metadata")(_metadata)
    _totp = field_validator("totp_secret_base64")(_base64_or_none)

    @field_validator("selected_team_id")
    @classmethod
    def _team_id(cls, value: str | None) -> str | None:
        if value is not None and not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value

    _non_null = field_validator("otp_auth_enabled", "passkey_auth_enabled", mode="before")(_not_null)


def _affordable_hash(value: str | None) -> str | None:
    """An imported hash whose verification costs no more than `passwords.hash_cost_problem` allows."""
    problem = None if value is None else hash_cost_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


class ServerUserUpdateBody(ClientUserUpdateBody):
    """PATCH /users/{user_id} and /users/me with server or admin access: every field of the spec's table."""

    client_read_only_metadata: Any = None
    server_metadata: Any = None
    primary_email_verified: bool | None = None
    primary_email_auth_enabled: bool | None = None
    password: str | None = Field(default=None, max_length=70)
    password_hash: str | None = Field(default=None, min_length=1)
    is_anonymous: Literal[False] | None = None
    restricted_by_admin: bool | None = None
    restricted_by_admin_reason: str | None = None
    restricted_by_admin_private_details: str | None = None
    country_code: str | None = None
    risk_scores: RiskScoresIn | None = None

    _restriction_text = field_validator(
        "restricted_by_admin_reason", "restricted_by_admin_private_details", mode="before"
    )(_empty_to_none)
    _server_metadata = field_validator("client_read_only_metadata", "server_metadata")(_metadata)
    _country = field_validator("country_code")(_country_or_none)
    _password = field_validator("password")(_no_nul)
    _password_hash = field_validator("password_hash")(_affordable_hash)

    # A name of its own: the client model's `_non_null` stays in force for the fields it covers.
    _server_non_null = field_validator(
        "primary_email_verified",
        "primary_email_auth_enabled",
        "is_anonymous",
        "restricted_by_admin",
        "risk_scores",
        mode="before",
    )(_not_null)

    @model_validator(mode="after")
    def _restriction_needs_the_flag(self) -> ServerUserUpdateBody:
        # reference §3.2: unless this very body says restricted_by_admin: true, a reason or details must be null.
        if self.restricted_by_admin is not True:
            problems = [
                f"{name} must be null when restricted_by_admin is not true"
                for name in ("restricted_by_admin_reason", "restricted_by_admin_private_details")
                if getattr(self, name) is not None
            ]
            if problems:
                raise ValueError("\n".join(problems))
        return self


class UserCreateBody(ServerUserUpdateBody):
    """POST /users (server, admin): the update fields but `selected_team_id`, plus `is_anonymous` (any boolean)
    and `oauth_providers` (none are configured here, so only an empty list is accepted)."""

    is_anonymous: bool | None = None  # type: ignore[assignment]
    oauth_providers: list[dict[str, Any]] | None = None

    @field_validator("selected_team_id")
    @classmethod
    def _no_selected_team(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError("cannot be set when creating a user")
        return value


class UserIdParams(Query):
    """Path parameters naming a user by id (or `me`)."""

    user_id: str
    _user_id = field_validator("user_id")(_uuid_or_me)


class ListUsersQuery(Query):
    """GET /users (reference §4)."""

    limit: int | None = Field(default=None, ge=1)
    cursor: str | None = None
    order_by: Literal["signed_up_at"] = "signed_up_at"
    desc: Literal["true", "false"] = "false"
    query: str | None = Field(default=None, max_length=256)
    team_id: str | None = None
    include_restricted: Literal["true", "false"] = "false"
    include_anonymous: Literal["true", "false"] = "false"
    only_anonymous: Literal["true", "false"] = "false"

    @field_validator("cursor", "team_id")
    @classmethod
    def _uuid(cls, value: str | None) -> str | None:
        if value is not None and not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value


# --------------------------------------------------------------------------------------------------------------
# Teams, memberships, permissions, member profiles (reference §5)


def _uuid_only(value: str | None) -> str | None:
    if value is not None and not is_uuid(value):
        raise ValueError("must be a valid UUID")
    return value


class ClientTeamCreateBody(Body):
    """POST /teams with client access."""

    display_name: str = Field(max_length=256)
    profile_image_url: str | None = None
    client_metadata: Any = None
    creator_user_id: str | None = None
    _image = field_validator("profile_image_url")(_profile_image)
    _client_metadata = field_validator("client_metadata")(_metadata)
    _creator = field_validator("creator_user_id")(lambda v: v if v is None else _uuid_or_me(v))


class ServerTeamCreateBody(ClientTeamCreateBody):
    """POST /teams with server or admin access."""

    client_read_only_metadata: Any = None
    server_metadata: Any = None
    _server_metadata = field_validator("client_read_only_metadata", "server_metadata")(_metadata)


class ClientTeamUpdateBody(Body):
    """PATCH /teams/{team_id} with client access."""

    display_name: str | None = Field(default=None, max_length=256)
    profile_image_url: str | None = None
    client_metadata: Any = None
    _image = field_validator("profile_image_url")(_profile_image)
    _client_metadata = field_validator("client_metadata")(_metadata)

    _non_null = field_validator("display_name", mode="before")(_not_null)


class ServerTeamUpdateBody(ClientTeamUpdateBody):
    """PATCH /teams/{team_id} with server or admin access."""

    client_read_only_metadata: Any = None
    server_metadata: Any = None
    _server_metadata = field_validator("client_read_only_metadata", "server_metadata")(_metadata)


class TeamIdParams(Query):
    """Path parameters naming a team."""

    team_id: str
    _team = field_validator("team_id")(_uuid_only)


class MembershipParams(Query):
    """Path parameters naming a membership: a team and a user (or `me`)."""

    team_id: str
    user_id: str
    _team = field_validator("team_id")(_uuid_only)
    _user = field_validator("user_id")(_uuid_or_me)


class PermissionParams(MembershipParams):
    """Path parameters naming one permission of a membership."""

    permission_id: str = Field(max_length=128, pattern=r"^\$?[a-z0-9_:-]+$")


class ListTeamsQuery(Query):
    """GET /teams."""

    user_id: str | None = None
    _user = field_validator("user_id")(lambda v: v if v is None else _uuid_or_me(v))


class ListMembershipsQuery(Query):
    """GET /team-member-profiles and GET /team-permissions."""

    team_id: str | None = None
    user_id: str | None = None
    recursive: Literal["true", "false"] = "false"
    _team = field_validator("team_id")(_uuid_only)
    _user = field_validator("user_id")(lambda v: v if v is None else _uuid_or_me(v))


class MemberProfileUpdateBody(Body):
    """PATCH /team-member-profiles/{team_id}/{user_id}."""

    display_name: str | None = Field(default=None, max_length=256)
    profile_image_url: str | None = None
    _image = field_validator("profile_image_url")(_profile_image)

    _non_null = field_validator("display_name", mode="before")(_not_null)


# --------------------------------------------------------------------------------------------------------------
# Dev/test mode


class ClockBody(Body):
    """POST /testing/clock: any of, applied in this order: reset, freeze (true/false), set, advance."""

    reset: bool = False
    freeze: bool | None = None
    set_millis: int | None = Field(default=None, ge=0)
    advance_millis: int | None = None


class ImportBody(Body):
    """POST /testing/projects/{project_id}/import: an export document (checked by the import itself)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
