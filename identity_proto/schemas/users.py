"""Users (reference §3.2; our spec wins where it speaks: profile images smaller than 100KB)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from identity_proto.passwords import hash_cost_problem
from identity_proto.schemas.base import (
    UUID_PATTERN,
    Body,
    Query,
    _email,
    _metadata,
    _no_nul,
    _not_null,
    _plain_name,
    _profile_image,
    _user_email,
    _uuid_or_me,
    documented,
    is_uuid,
)

_BASE64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")
_COUNTRY = re.compile(r"^[A-Z]{2}$")


def _empty_to_none(value: Any) -> Any:
    return None if value == "" else value


@documented({"pattern": _BASE64.pattern})
def _base64_or_none(value: str | None) -> str | None:
    if value is not None and not _BASE64.match(value):
        raise ValueError("is not valid base64")
    return value


@documented({"pattern": "^[ \\t]*[A-Za-z]{2}[ \\t]*$"})
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
    _plain_display_name = field_validator("display_name")(_plain_name)
    _image = field_validator("profile_image_url")(_profile_image)
    _email_rule = field_validator("primary_email")(_email)
    _client_metadata = field_validator("client_metadata")(_metadata)
    _totp = field_validator("totp_secret_base64")(_base64_or_none)

    @field_validator("selected_team_id")
    @classmethod
    @documented({"pattern": UUID_PATTERN})
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

    # `_restriction_needs_the_flag` in the document: a reason or details only with restricted_by_admin: true
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["restricted_by_admin"], "properties": {"restricted_by_admin": {"const": True}}},
                {
                    "properties": {
                        "restricted_by_admin_reason": {"type": "null"},
                        "restricted_by_admin_private_details": {"type": "null"},
                    }
                },
            ]
        }
    )

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
    _email_rule = field_validator("primary_email")(_user_email)  # type: ignore[assignment]  # compat: the original's
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
    @documented(lambda schema: {"type": "null"})
    def _no_selected_team(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError("cannot be set when creating a user")
        return value


class UserIdParams(Query):
    """Path parameters naming a user by id (or `me`)."""

    user_id: str
    _user_id = field_validator("user_id")(_uuid_or_me)


#: The largest page a listing counts as a page; a larger `limit` is no limit (see `ListUsersQuery`).
MAX_PAGE = 1_000_000


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

    @field_validator("limit")
    @classmethod
    def _page_bound(cls, value: int | None) -> int | None:
        # The original bounds `limit` below only: a huge one asks for every user. Beyond `MAX_PAGE` it is read as
        # no limit, so every store gets an integer it can count with (Lua's numbers are doubles: 10**17 reached
        # the Redis listing as "1e+17" and answered 500 where the memory store answered 200).
        return None if value is not None and value > MAX_PAGE else value

    @field_validator("cursor", "team_id")
    @classmethod
    @documented({"pattern": UUID_PATTERN})
    def _uuid(cls, value: str | None) -> str | None:
        if value is not None and not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value
