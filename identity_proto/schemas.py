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
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from identity_proto.errors import ErrorCode, KnownError
from identity_proto.records import TrustedDomain

__all__ = [
    "Body",
    "DomainIn",
    "EmptyBody",
    "EmptyQuery",
    "ProjectConfigPatch",
    "ProjectCreateBody",
    "ProjectIdParams",
    "ProjectUpdateBody",
    "Query",
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


def schema_error(method: str, path: str, lines: Sequence[str]) -> KnownError:
    """The SCHEMA_ERROR for these problem lines, worded as the original words it."""
    message = f"Request validation failed on {method} {path}:\n" + "\n".join(f"  - {line}" for line in lines)
    return KnownError(ErrorCode.SCHEMA_ERROR, details={"message": message})


def validate_model(model: type[M], data: Any, location: str) -> M | list[str]:
    """`data` validated as `model`, or the list of problem lines (prefixed with `location`: body, query)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return [f"{location} must be an object"]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        return _problem_lines(exc.errors(include_url=False), location)


def _problem_lines(errors: list[ErrorDetails], location: str) -> list[str]:
    lines: list[str] = []
    unknown: dict[str, list[str]] = {}
    for error in errors:
        loc = error["loc"]
        if error["type"] == "extra_forbidden":
            unknown.setdefault(_path(location, loc[:-1]), []).append(str(loc[-1]))
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
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname or " " in value:
            raise ValueError("is not a valid URL")
        return value.rstrip("/")

    @field_validator("handler_path")
    @classmethod
    def _path_is_absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with /")
        return value


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

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        # Config keys always have a value: `null` is a mistake, not "reset" (omit the key to keep it).
        if value is None:
            raise ValueError("cannot be null")
        return value

    def changes(self) -> tuple[tuple[str, Any], ...]:
        """The (config field, stored value) pairs this patch sets."""
        out: list[tuple[str, Any]] = []
        for name in sorted(self.model_fields_set):
            value = getattr(self, name)
            if name == "domains":
                value = tuple(TrustedDomain(item.domain, item.handler_path) for item in value)
            elif isinstance(value, list):
                value = tuple(value)
            out.append((name, value))
        return tuple(out)


class ProjectCreateBody(Body):
    """POST /internal/projects."""

    display_name: str = Field(min_length=1, max_length=256)
    config: ProjectConfigPatch | None = None


class ProjectUpdateBody(Body):
    """PATCH /projects/current."""

    display_name: str | None = Field(default=None, min_length=1, max_length=256)
    config: ProjectConfigPatch | None = None

    @field_validator("display_name", "config", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("cannot be null")
        return value


class ProjectIdParams(Query):
    """Path parameters naming a project by id."""

    project_id: str

    @field_validator("project_id")
    @classmethod
    def _uuid(cls, value: str) -> str:
        if not is_uuid(value):
            raise ValueError("must be a valid UUID")
        return value
