"""The models' bases, validating one input into a model or its problem lines, and the field rules models share."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator
from pydantic_core import ErrorDetails

from identity_proto.schemas.problems import _UUID, Validated, not_an_object, unknown_properties
from identity_proto.schemas.problems import is_uuid as is_uuid  # where the schemas import it from
from identity_proto.urls import UnsafeURL, parse_web_url
from identity_proto.users import checked_email

M = TypeVar("M", bound=BaseModel)

F = TypeVar("F", bound=Callable[..., Any])


def documented(rule: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[F], F]:
    """Marks a field validator with what it accepts in JSON Schema terms: keywords added to the field's schema
    (its non-null branch), or a function rewriting that schema. The OpenAPI document applies them
    (`identity_proto.openapi`), so the document is as strict as the validators wherever JSON Schema can say it;
    what it cannot say (bytes of JSON, parsers' agreement on a URL) is in the rule's `description`."""

    def mark(func: F) -> F:
        func.__json_schema__ = rule  # type: ignore[attr-defined]
        return func

    return mark


#: A UUID in canonical lower-case form, as JSON Schema (ECMA 262) and Python read it alike.
UUID_PATTERN = _UUID.pattern
UUID_OR_ME_PATTERN = r"^(?:me|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$"
#: An http(s) URL every parser reads alike (identity_proto.urls), in the common form the document promises: a
#: lower-case DNS host (or `localhost`), an optional port, printable ASCII after it; the service accepts a few more
#: (IPv4 and IPv6 literals, upper-case hosts), normalised.
WEB_URL_PATTERN = (
    r"^https?://(?:[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?\.){0,4}[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?"
    r"(?::[1-9][0-9]{0,3})?(?:[/?#][!#-\[\]-~]*)?$"
)


class Body(BaseModel):
    """Base of every JSON body model: strict types, no unknown keys, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)
    #: Whether a request must send the body (the OpenAPI document's `requestBody.required`): a request without one
    #: is 400 SCHEMA_ERROR "body must be defined", as the original's `.defined()` body schemas answer, even when
    #: every field is optional (`{}` is the empty update; nothing at all is a mistake).
    body_required: ClassVar[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        """An integer field takes a JSON number with a zero fraction (`60000.0`) as that integer: JSON has one
        number type (the original, in JavaScript, cannot tell them apart; JSON Schema's `integer` includes them),
        so the document's `integer` and the service agree. A fraction (`50.5`) is still refused."""
        if isinstance(data, dict):
            for name in _integer_fields(cls):
                value = data.get(name)
                if type(value) is float and value.is_integer():
                    data = {**data, name: int(value)}
        return data


#: model -> the names of its fields typed `int` or `int | None`.
_INTEGER_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {}


def _integer_fields(model: type[BaseModel]) -> tuple[str, ...]:
    names = _INTEGER_FIELDS.get(model)
    if names is None:
        names = _INTEGER_FIELDS[model] = tuple(
            name for name, info in model.model_fields.items() if info.annotation in (int, int | None)
        )
    return names


class IgnoredBody(Body):
    """The body of a DELETE that the original takes and ignores (its schema is `yupMixed`): any JSON object."""

    model_config = ConfigDict(extra="ignore")
    body_required: ClassVar[bool] = False


class Query(BaseModel):
    """Base of every query model: values arrive as text and are coerced; no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


#: What a name shown to people may not contain: C0 and C1 control characters and DEL (NUL, ANSI escape sequences
#: that rewrite a terminal or a log viewer, line breaks that forge log lines) and the bidirectional overrides and
#: isolates that make a name read differently from what it is ("Trojan Source").
_NOT_IN_NAMES = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@documented({"pattern": "^[^\\x00-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069]*$"})
def _plain_name(value: Any) -> Any:
    """For names shown to people (users', teams', member profiles', projects' display names): no control
    characters or bidirectional overrides (400 `SCHEMA_ERROR`); everything else as given."""
    if isinstance(value, str) and _NOT_IN_NAMES.search(value):
        raise ValueError("must not contain control characters or bidirectional overrides")
    return value


def _non_null_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`null` taken out of a field's schema (`anyOf [T, null]` -> T; `type: [T, "null"]` -> T)."""
    any_of = schema.get("anyOf")
    if any_of is not None:
        rest = [branch for branch in any_of if branch != {"type": "null"}]
        others = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
        return {**rest[0], **others} if len(rest) == 1 else {**others, "anyOf": rest}
    if schema.get("type") == "null":
        return {k: v for k, v in schema.items() if k not in ("type", "default")}
    return {k: v for k, v in schema.items() if k != "default"}


@documented(_non_null_schema)
def _not_null(value: Any) -> Any:
    """For optional fields that, when sent, must have a value: omit the key to keep the stored one; `null` is a
    mistake, not a reset."""
    if value is None:
        raise ValueError("cannot be null")
    return value


#: model -> its instance from an empty input, for models that accept one (every model is frozen: one instance
#: serves every request that sent nothing, such as a listing's absent query).
_EMPTY_INSTANCES: dict[type[BaseModel], BaseModel] = {}


def validate_model(model: type[M], data: Any, location: str, context: dict[str, Any] | None = None) -> Validated[M]:
    """`data` validated as `model` (with pydantic's validation `context`), or its problem lines (prefixed with
    `location`: body, query)."""
    if data is None and location == "body" and getattr(model, "body_required", False):
        as_empty = validate_model(model, {}, location, context)
        return as_empty if as_empty.problems else Validated(problems=(f"{location} must be defined",))
    if data is None or data == {}:
        empty = _EMPTY_INSTANCES.get(model)
        if empty is not None:
            return Validated(cast(M, empty))
        data = {}
    if not isinstance(data, dict):
        return Validated(problems=(not_an_object(location),))
    try:
        validated = model.model_validate(data, context=context)
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
        lines.extend(_message(_path(location, loc), error).splitlines())
    lines.extend(unknown_properties(parent, names) for parent, names in unknown.items())
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
        # Our validators raise ValueError with a message written to follow the field path; one of several lines
        # states as many problems with the field, each line one.
        return "\n".join(f"{where} {line}" for line in str(ctx.get("error")).splitlines())
    return f"{where} is invalid: {error['msg']}"


# --------------------------------------------------------------------------------------------------------------
# Shared field rules


@documented({"pattern": UUID_OR_ME_PATTERN})
def _uuid_or_me(value: str) -> str:
    if value != "me" and not is_uuid(value):
        raise ValueError("must be a valid UUID")
    return value


#: A trusted domain (`identity_proto.urls.parse_origin_pattern`) in the form the document promises: an http(s) origin
#: with an optional `*.` or `**.` wildcard, and an optional path (ignored).
ORIGIN_PATTERN = (
    r"^https?://(?:\*\*?\.)?(?:[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?\.){0,4}[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?"
    r"(?::[1-9][0-9]{0,3})?(?:/[!#-\[\]-~]*)?$"
)

#: A URL with a scheme and no white space (`_url_without_spaces`).
URL_PATTERN = r"^[A-Za-z][A-Za-z0-9+.-]*:[!-~]+$"


@documented({"pattern": UUID_OR_ME_PATTERN})
def _optional_uuid_or_me(value: str | None) -> str | None:
    return None if value is None else _uuid_or_me(value)


def _items_rule(schema: dict[str, Any], rule: dict[str, Any], **array: Any) -> dict[str, Any]:
    """`rule` for the items of an array field's schema, `array` for the array itself (for `documented`)."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [_items_rule(branch, rule, **array) for branch in schema["anyOf"]]}
    if "items" in schema:
        return {**schema, **array, "items": {**schema["items"], **rule}}
    return schema


def _url_without_spaces(value: str) -> str:
    parts = urlsplit(value)
    if not parts.scheme or not (parts.netloc or parts.path) or any(c.isspace() for c in value):
        raise ValueError("is not a valid URL")
    return value


@documented({"pattern": WEB_URL_PATTERN})
def _web_url(value: str | None) -> str | None:
    """A callback or redirect URL: refused unless every parser reads it alike (identity_proto.urls), and kept in
    its normalised form, so that what is checked is what is stored and mailed."""
    if value is None:
        return None
    try:
        return parse_web_url(value).href
    except UnsafeURL:
        raise ValueError("is not a valid URL") from None  # the original's words


#: An e-mail address in the form the document promises: `checked_email` accepts more (and normalises it).
EMAIL_PATTERN = r"^[a-z0-9](?:[a-z0-9._+-]{0,30}[a-z0-9])?@(?:[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?\.){1,3}[a-z]{2,12}$"


@documented({"pattern": EMAIL_PATTERN, "format": "email"})
def _email(value: str | None) -> str | None:
    """Every e-mail field of every route: the one rule of `identity_proto.users.checked_email`, whose stored
    (normalised) form is what the flow sees. (`""` is worded as the original words it for primary_email.)"""
    if value is None:
        return None
    if value.strip() == "":
        raise ValueError("must not be empty")
    return checked_email(value)


@documented({"pattern": EMAIL_PATTERN, "format": "email"})
def _user_email(value: str | None, info: ValidationInfo) -> str | None:
    """A user's primary e-mail on create and update by a server: `_email`, or in compatibility mode (validation
    context `compat`) the original's looser rule (`identity_proto.users.checked_email`); clients keep `_email`."""
    if value is None or not (info.context or {}).get("compat"):
        return _email(value)
    if value.strip() == "":
        raise ValueError("must not be empty")
    return checked_email(value, original_user_rule=True)


@documented({"pattern": "^[^\\x00]*$"})
def _no_nul(value: str | None) -> str | None:
    # bcrypt cannot hash a NUL byte: refuse it as invalid input rather than fail while hashing.
    if value is not None and "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


@documented({"minLength": 45, "maxLength": 45})
def _code_of_45(value: str) -> str:
    if len(value) != 45:
        raise ValueError("must be exactly 45 characters")
    return value


@documented({"minLength": 45, "maxLength": 45})
def _sign_in_code(value: str) -> str:
    """A sign-in code: the mail's 6 characters are not enough on their own, and the message says what is."""
    if len(value) != 45:
        raise ValueError(
            "must be exactly 45 characters: the 6-character code from the e-mail followed by the nonce returned "
            "when it was sent (or the code parameter of the magic link)"
        )
    return value


#: The spec: a profile image (URL or base64 data URL) is smaller than 100KB.
MAX_PROFILE_IMAGE_BYTES = 100 * 1024


#: The largest metadata object accepted (client_metadata, client_read_only_metadata, server_metadata of users and
#: teams), as compact JSON: 64 KiB. Metadata is stored inline with its owner and sent back with every read of it,
#: so without a cap of its own one client could make its user (or its team, read by every member) as large as a
#: whole request body allows (1 MiB by default) and every read of it that slow. Larger objects are refused with
#: SCHEMA_ERROR naming the field and this limit.
MAX_METADATA_BYTES = 64 * 1024


@documented({"description": "Any JSON value, at most 64 KiB as compact JSON."})
def _metadata(value: Any) -> Any:
    # orjson is the service's JSON encoder (render.dump_json): the size counted is the size stored and sent.
    if value is not None and len(orjson.dumps(value)) > MAX_METADATA_BYTES:
        raise ValueError(f"must be at most {MAX_METADATA_BYTES} bytes as JSON (64 KiB)")
    return value


@documented({"pattern": URL_PATTERN, "description": "A URL or a base64 data URL, smaller than 100 KB (UTF-8 bytes)."})
def _profile_image(value: str | None) -> str | None:
    if value is None:
        return None
    if len(value.encode()) >= MAX_PROFILE_IMAGE_BYTES:
        raise ValueError("must be smaller than 100KB")
    return _url_without_spaces(value)
