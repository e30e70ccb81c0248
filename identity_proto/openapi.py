"""The OpenAPI 3.1 document of the API, generated from the route table and the very pydantic models the core
validates requests with, so its operations and body structures cannot drift from what the service accepts. (Not
every rule a validator checks is expressed yet: UUID formats, code lengths and non-null optional fields are
looser in the document than in the service; tests/hardening pins each such difference.)

Success bodies are described as JSON objects (their shapes are documented in the README); every error is a
known error, `{"code", "error", "details"?}`, with the `X-Service-Known-Error` header, but for the few the original
answers in plain text (`errors.PlainError`: its message as text/plain, no header), which a route
(`Route.plain_errors`) or its flow (a `plain_errors` attribute) lists beside the known errors of that status.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

from identity_proto.auth import AccessType
from identity_proto.errors import ErrorCode
from identity_proto.routing import Route, _compile
from identity_proto.schemas.responses import COMPONENTS, REDIRECTS, response_schema

if TYPE_CHECKING:
    from identity_proto.schemas import Body, Query

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"

_SECURITY_SCHEMES = {
    name: {"type": "apiKey", "in": "header", "name": header}
    for name, header in (
        ("AccessType", "x-service-access-type"),
        ("ProjectId", "x-service-project-id"),
        ("PublishableClientKey", "x-service-publishable-client-key"),
        ("SecretServerKey", "x-service-secret-server-key"),
        ("SuperSecretAdminKey", "x-service-super-secret-admin-key"),
        ("AccessToken", "x-service-access-token"),
    )
}
_SECURITY_BY_ACCESS: dict[AccessType, dict[str, list[str]]] = {
    AccessType.CLIENT: {"AccessType": [], "ProjectId": [], "PublishableClientKey": []},
    AccessType.SERVER: {"AccessType": [], "ProjectId": [], "SecretServerKey": []},
    AccessType.ADMIN: {"AccessType": [], "ProjectId": [], "SuperSecretAdminKey": []},
}
_KNOWN_ERROR = {
    "type": "object",
    "required": ["code", "error"],
    "properties": {
        "code": {"type": "string", "description": "Stable error code; equals the X-Service-Known-Error header."},
        "error": {"type": "string", "description": "A human-readable message."},
        "details": {"type": "object", "description": "Data about this error, per code."},
    },
}


class AsStrictAsTheValidators(GenerateJsonSchema):
    """Pydantic's JSON Schema, plus what each field validator accepts (`identity_proto.schemas.base.documented`):
    patterns, lengths, formats, and `null` taken out where a validator refuses it, so that a request the document
    calls valid is not refused by the service as invalid."""

    def function_after_schema(self, schema: core_schema.AfterValidatorFunctionSchema) -> JsonSchemaValue:
        return _documented(schema, super().function_after_schema(schema))

    def function_before_schema(self, schema: core_schema.BeforeValidatorFunctionSchema) -> JsonSchemaValue:
        return _documented(schema, super().function_before_schema(schema))

    def function_plain_schema(self, schema: core_schema.PlainValidatorFunctionSchema) -> JsonSchemaValue:
        return _documented(schema, super().function_plain_schema(schema))

    def function_wrap_schema(self, schema: core_schema.WrapValidatorFunctionSchema) -> JsonSchemaValue:
        return _documented(schema, super().function_wrap_schema(schema))


def _documented(core: Any, generated: JsonSchemaValue) -> JsonSchemaValue:
    function = core.get("function", {}).get("function")
    rule = getattr(getattr(function, "__func__", function), "__json_schema__", None)
    if rule is None:
        return generated
    if callable(rule):
        return dict(rule(generated))
    return _with_rule(generated, rule)


def _with_rule(schema: JsonSchemaValue, rule: dict[str, Any]) -> JsonSchemaValue:
    """`rule`'s keywords on the non-null branches of `schema`."""
    any_of = schema.get("anyOf")
    if any_of is not None:
        return {**schema, "anyOf": [b if b.get("type") == "null" else _with_rule(b, rule) for b in any_of]}
    if "description" in rule and "description" in schema:
        return {**schema, **rule, "description": f"{schema['description']} {rule['description']}"}
    return {**schema, **rule}


def openapi_document(routes: Sequence[Route], *, title: str = "Identity service", version: str = "1") -> dict[str, Any]:
    """The document for `routes`."""
    routes = [route.resolved() for route in routes]  # a service's table names its flows and models (`Deferred`)
    bodies: list[type[Body]] = []
    for route in routes:
        for model in _body_models(route):
            if model not in bodies:
                bodies.append(model)
    refs, definitions = models_json_schema(
        [(m, "validation") for m in bodies], ref_template=_REF, schema_generator=AsStrictAsTheValidators
    )
    schemas = {**_without_null_defaults(definitions.get("$defs", {})), **COMPONENTS, "KnownError": _KNOWN_ERROR}
    paths: dict[str, dict[str, Any]] = {}
    shadowing = _shadowing(routes)
    literals = tuple(r.pattern for r in routes if "{" not in r.pattern)
    for route in routes:
        body_refs = [refs[(m, "validation")] for m in _body_models(route)]
        shadows = shadowing.get((route.method, route.pattern), [])
        operation = _operation(route, body_refs, shadows, literals)
        paths.setdefault(route.pattern, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": _SECURITY_SCHEMES},
    }


def _without_null_defaults(value: Any) -> Any:
    """Pydantic writes `"default": null` for an omitted optional field; where the field refuses null (a validator
    took `null` out of its schema) that default would tell a client to send what is refused: it goes."""
    if isinstance(value, list):
        return [_without_null_defaults(item) for item in value]
    if not isinstance(value, dict):
        return value
    cleaned = {key: _without_null_defaults(item) for key, item in value.items()}
    if "default" in cleaned and cleaned["default"] is None and not _allows_null(cleaned):
        del cleaned["default"]
    return cleaned


def _allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind is None and "anyOf" not in schema and "$ref" not in schema:
        return True  # any value
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_allows_null(branch) for branch in schema.get("anyOf", ()))


def _body_models(route: Route) -> list[type[Body]]:
    accesses = list(AccessType) if isinstance(route.body, Mapping) else [None]
    unique: list[type[Body]] = []
    for access in accesses:
        model = route.body_model(access)
        if model is not None and model not in unique:
            unique.append(model)
    return unique


def _operation(
    route: Route, body_refs: list[dict[str, Any]], shadowing: Sequence[Route] = (), literals: Sequence[str] = ()
) -> dict[str, Any]:
    body_required = any(getattr(model, "body_required", False) for model in _body_models(route))
    doc = (route.flow.__doc__ or "").strip()
    operation: dict[str, Any] = {
        "operationId": f"{route.method.lower()}_{route.flow.__module__.rsplit('.', 1)[-1]}_{route.flow.__name__}",
        "summary": doc.split("\n", 1)[0],
        "parameters": _parameters(route, literals),
        "responses": {
            **_successes(route),
            "default": {
                "description": "A known error (the X-Service-Known-Error header names its code)",
                "headers": {"x-service-known-error": {"schema": {"type": "string"}}},
                "content": {
                    _JSON: {"schema": {"$ref": _REF.format(model="KnownError")}},
                    # the errors the original answers in plain text (errors.PlainError): the message alone
                    "text/plain": {"schema": {"type": "string"}},
                },
            },
        },
    }
    # The known errors this operation can answer, by status: each status lists its codes (header and body).
    by_status: dict[int, list[str]] = {}
    for code in sorted(known_errors(route, shadowing), key=lambda c: c.name):
        by_status.setdefault(code.status, []).append(code.name)
    for status, names in sorted(by_status.items()):
        operation["responses"][str(status)] = {
            "description": "A known error: " + ", ".join(names),
            "headers": {"x-service-known-error": {"required": True, "schema": {"enum": names}}},
            "content": {
                _JSON: {"schema": {"allOf": [{"$ref": _REF.format(model="KnownError")}, _code_in(names)]}},
            },
        }
    # Refusals the original answers in plain text, without a known error: the route names their statuses
    # (`Route.plain_errors`), or the flow does (its `plain_errors` attribute); those statuses may be either kind.
    for status in plain_statuses(route, shadowing):
        names = by_status.get(status, [])
        operation["responses"][str(status)] = {
            "description": "A refusal in plain text (without X-Service-Known-Error)"
            + (", or a known error: " + ", ".join(names) if names else ""),
            "content": {
                _JSON: {"schema": {"allOf": [{"$ref": _REF.format(model="KnownError")}, _code_in(names)]}},
                "text/plain": {"schema": {"type": "string"}},
            },
        }
    # Answers in OAuth 2's own error format (RFC 6749 §5.2 `{"error", "error_description"}`, RFC 6750 §3 for a bad
    # bearer token): the mock provider's token and userinfo endpoints list their statuses in `oauth_errors`.
    for status in route.flow.__dict__.get("oauth_errors", ()):
        names = by_status.get(status, [])
        operation["responses"][str(status)] = {
            "description": "An OAuth 2 error (RFC 6749 §5.2)"
            + (", or a known error: " + ", ".join(names) if names else ""),
            "content": {
                _JSON: {
                    "schema": {
                        "anyOf": [
                            {"allOf": [{"$ref": _REF.format(model="KnownError")}, _code_in(names)]},
                            {
                                "type": "object",
                                "required": ["error"],
                                "properties": {"error": {"type": "string"}, "error_description": {"type": "string"}},
                            },
                        ]
                    }
                },
                "text/plain": {"schema": {"type": "string"}},
            },
        }
    if route.access is not None:
        operation["security"] = [_SECURITY_BY_ACCESS[t] for t in AccessType if t in route.access]
    if body_refs:
        # anyOf, not oneOf: the server model of a route is a superset of its client model, so a body may match both.
        schema = body_refs[0] if len(body_refs) == 1 else {"anyOf": body_refs}
        operation["requestBody"] = {"required": body_required, "content": {route.consumes: {"schema": schema}}}
    return operation


_JSON = "application/json"


def _code_in(names: list[str]) -> dict[str, Any]:
    return {"properties": {"code": {"enum": names}}}


# --------------------------------------------------------------------------------------------------------------
# Which known errors an operation can answer: those of the request pipeline every route passes through, and those
# its flow raises, found by reading the flow and everything of identity_proto it names (functions, and tables of
# codes), transitively. A superset: a code a helper can raise on some path is listed even where this route never
# takes that path.


def known_errors(route: Route, shadowing: Sequence[Route] = ()) -> frozenset[ErrorCode]:
    """The known errors `route` can answer (default mode); `shadowing`: the routes that answer some of its paths
    (`/users/me` for `/users/{user_id}` with `me`)."""
    codes = set(_PIPELINE_CODES) | {c for c in _flow_codes(route.flow) if isinstance(c, ErrorCode)}
    for other in shadowing:
        codes |= known_errors(other)
    if route.access is not None:
        codes |= {ErrorCode.ACCESS_TYPE_REQUIRED, ErrorCode.INSUFFICIENT_ACCESS_TYPE}
    if route.method != "GET":  # a body is parsed (and refused) whether or not the route takes one
        codes |= {ErrorCode.BODY_PARSING_ERROR, ErrorCode.REQUEST_BODY_TOO_LARGE}
    if route.body is not None or route.query is not None or route.params is not None or route.required_headers:
        codes.add(ErrorCode.SCHEMA_ERROR)
    return frozenset(codes)


#: Every request: authentication (its headers are read whatever the route), the rate limits, a session gone,
#: the store, a bug, a request the host cannot read.
_PIPELINE_CODES = frozenset(
    {
        ErrorCode.RATE_LIMITED,
        ErrorCode.WRITE_CONFLICT,
        ErrorCode.STORAGE_UNAVAILABLE,
        ErrorCode.INTERNAL_ERROR,
        ErrorCode.MALFORMED_REQUEST,
    }
)


@functools.cache
def _pipeline_codes() -> frozenset[ErrorCode]:
    from identity_proto.auth import authenticate, session_precondition
    from identity_proto.context import RequestContext

    found: set[ErrorCode] = set()
    for function in (authenticate, session_precondition, *vars(RequestContext).values()):
        found |= {code for code in _codes(function, set()) if isinstance(code, ErrorCode)}
    return frozenset(found)


@functools.cache
def _flow_codes(flow: Any) -> frozenset[ErrorCode | int]:
    return _pipeline_codes() | _codes(flow, set())


def plain_statuses(route: Route, shadowing: Sequence[Route] = ()) -> tuple[int, ...]:
    """The statuses `route` may answer with a refusal in plain text (no known error): those the route or its flow
    names (`plain_errors`), and those its flow's source answers so."""
    statuses = {*route.plain_errors, *route.flow.__dict__.get("plain_errors", ())}
    statuses |= {c for c in _flow_codes(route.flow) if isinstance(c, int)}
    for other in shadowing:
        statuses |= set(plain_statuses(other))
    return tuple(sorted(statuses))


def _shadowing(routes: Sequence[Route]) -> dict[tuple[str, str], list[Route]]:
    """For each route with path parameters, the routes of the same method on a literal path it would match: a
    request for that path is theirs (`/users/me` is not `/users/{user_id}`)."""
    literal = [r for r in routes if "{" not in r.pattern]
    found: dict[tuple[str, str], list[Route]] = {}
    for route in routes:
        if "{" in route.pattern:
            regex = _compile(route.pattern)
            found[(route.method, route.pattern)] = [
                r for r in literal if r.method == route.method and regex.match(r.pattern)
            ]
    return found


def _codes(value: Any, seen: set[int]) -> set[ErrorCode | int]:
    """The known errors `value` (a function, or a table) can raise, and the statuses of the plain-text refusals
    (`PlainError(status, ...)`, `text_response(status, ...)`) it can answer, read from its source."""
    if id(value) in seen:
        return set()
    seen.add(id(value))
    if isinstance(value, ErrorCode):
        return {value}
    found: set[ErrorCode | int] = set()
    if isinstance(value, Mapping):
        for key, item in value.items():
            found |= _codes(key, seen) | _codes(item, seen)
        return found
    if isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            found |= _codes(item, seen)
        return found
    function = getattr(value, "__func__", value)
    if isinstance(function, property):
        function = function.fget
    if not isinstance(function, types.FunctionType) or not (function.__module__ or "").startswith("identity_proto"):
        return found
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return found
    names = function.__globals__
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("PlainError", "text_response")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, int)
            and node.args[0].value >= 400
        ):
            found.add(node.args[0].value)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = names.get(node.value.id)
            if owner is ErrorCode and node.attr in ErrorCode.__members__:
                found.add(ErrorCode[node.attr])
            elif isinstance(owner, types.ModuleType) and owner.__name__.startswith("identity_proto"):
                found |= _codes(getattr(owner, node.attr, None), seen)
        elif isinstance(node, ast.Name) and node.id in names and names[node.id] is not ErrorCode:
            found |= _codes(names[node.id], seen)
    return found


def _successes(route: Route) -> dict[str, Any]:
    """The success responses: the JSON body's schema (identity_proto.schemas.responses), or the redirect."""
    key = (route.method, route.pattern)
    redirects = REDIRECTS.get(key, {})
    responses: dict[str, Any] = {
        str(status): {
            "description": description,
            "headers": {"location": {"required": True, "schema": {"type": "string"}}},
        }
        for status, description in redirects.items()
    }
    if route.produces != _JSON:
        if route.success not in redirects:
            responses[str(route.success)] = {
                "description": "Success",
                "content": {route.produces: {"schema": {"type": "string"}}},
            }
        return responses
    schema = response_schema(*key)
    if schema is None and redirects:
        return responses
    if schema is None:  # compatibility mode's routes: the original's shapes (the document describes the default mode)
        schema = {"type": "object", "description": "The original's shape (compatibility mode)."}
    responses[str(route.success)] = {"description": "Success", "content": {_JSON: {"schema": schema}}}
    return responses


def _parameters(route: Route, literals: Sequence[str] = ()) -> list[dict[str, Any]]:
    parameters: list[dict[str, Any]] = []
    params = route.params
    path_schema = _properties(params) if params is not None else {}
    for name in _path_names(route.pattern):
        schema = path_schema.get(name, {"type": "string"})
        # A value that makes a path some literal route has is that route's (the router matches literal paths
        # first, whatever the method): `/users/{user_id}` with `me` is `/users/me`, documented on its own.
        taken = sorted(
            {found[name] for found in (_compile(route.pattern).match(path) for path in literals) if found is not None}
        )
        if taken:
            schema = {**schema, "not": {"enum": taken}}
        parameters.append({"name": name, "in": "path", "required": True, "schema": schema})
    for header in route.required_headers:
        # an empty value is no value: the flow refuses it as missing
        parameters.append(
            {"name": header, "in": "header", "required": True, "schema": {"type": "string", "minLength": 1}}
        )
    query = route.query
    if query is not None:
        full = query.model_json_schema(ref_template=_REF, schema_generator=AsStrictAsTheValidators)
        required = set(full.get("required", ()))
        required |= set(_QUERY_REQUIRED_BY_THE_FLOW.get((route.method, route.pattern), ()))
        for name, schema in full.get("properties", {}).items():
            if name in required:
                schema = _without_null_defaults(_non_null(schema))
            parameters.append({"name": name, "in": "query", "required": name in required, "schema": schema})
    return parameters


#: Query parameters a flow requires that its model (shared with the resource's other routes, as the original's are)
#: leaves optional.
_QUERY_REQUIRED_BY_THE_FLOW = {("GET", "/api/v1/user-api-keys"): ("user_id",)}


def _non_null(schema: dict[str, Any]) -> dict[str, Any]:
    branches = [b for b in schema.get("anyOf", ()) if b != {"type": "null"}]
    if len(branches) == 1:
        return {**{k: v for k, v in schema.items() if k != "anyOf"}, **branches[0]}
    return schema


def _properties(model: type[Query]) -> dict[str, Any]:
    return dict(
        model.model_json_schema(ref_template=_REF, schema_generator=AsStrictAsTheValidators).get("properties", {})
    )


def _path_names(pattern: str) -> list[str]:
    names: list[str] = []
    for part in pattern.split("/"):
        if part.startswith("{") and part.endswith("}"):
            names.append(part[1:-1])
    return names
