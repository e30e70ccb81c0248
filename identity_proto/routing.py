"""The routing machinery: a table of `Route`s, matched by path then method.

Rules:
- Paths are matched after stripping one trailing slash (the official SDK strips it; curl users add it).
- A path that no route has is 404 ROUTE_NOT_FOUND; a path some route has, with another method, is
  405 METHOD_NOT_ALLOWED with `Allow`; OPTIONS on a known path is a CORS preflight (reference §0.2).
- A route says who may call it (`access`: None for endpoints that need no authentication), and which models
  validate its path parameters, query and body (one body model per access type where the allowed fields differ);
  none: the route takes no such input. Its flow declares the models it receives (`RequestContext[Body, Query,
  Params]`) and mypy checks them against the route's. Models are built on their first use (`defer_build`), or by
  `Service.prepare`.
- A table may name its flows and models without importing them (`Deferred`, `deferred_module`): the router imports
  a route's when a request first reaches it (`Route.resolved`), so a service starts without the modules (and
  pydantic) that only some routes need. `Router.resolve` imports every route's (`Service.prepare`).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar

from identity_proto.auth import AccessType
from identity_proto.errors import ErrorCode, KnownError

if TYPE_CHECKING:
    from dataclasses import dataclass
else:
    from identity_proto.quickinit import dataclass  # methods written on first use


if TYPE_CHECKING:
    from identity_proto.context import RequestContext
    from identity_proto.effects import Flow
    from identity_proto.http import Response
    from identity_proto.schemas import Body, Query

__all__ = ["ALL_ACCESS_TYPES", "SERVER_AND_ADMIN", "Deferred", "Route", "Router", "deferred_module"]

ALL_ACCESS_TYPES = frozenset(AccessType)
SERVER_AND_ADMIN = frozenset({AccessType.SERVER, AccessType.ADMIN})
ADMIN_ONLY = frozenset({AccessType.ADMIN})

B = TypeVar("B")
Q = TypeVar("Q")
P = TypeVar("P")

_PARAM = re.compile(r"\{([a-z_]+)\}")


class Deferred:
    """What a route table names in place of a flow or a model it does not import: `module`'s `name`, imported by
    `resolve`."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def resolve(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)

    def __repr__(self) -> str:
        return f"Deferred({self.module}.{self.name})"


class _DeferredModule:
    __slots__ = ("_module",)

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Deferred:
        if name.startswith("__"):
            raise AttributeError(name)
        return Deferred(self._module, name)


def deferred_module(module: str) -> Any:
    """A stand-in for `module` whose attributes are `Deferred`s of its names: `flows.get_me` without the import."""
    return _DeferredModule(module)


def _resolved(value: Any) -> Any:
    if isinstance(value, Deferred):
        return value.resolve()
    if isinstance(value, dict) and any(isinstance(model, Deferred) for model in value.values()):
        return {access: _resolved(model) for access, model in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint: method and path pattern (`{name}` matches one segment), its flow and its schemas."""

    method: str
    pattern: str
    flow: Callable[[RequestContext[Any, Any, Any]], Flow[Response]]
    #: Access types allowed; None when the endpoint needs no authentication at all.
    access: frozenset[AccessType] | None = ALL_ACCESS_TYPES
    #: The body's model, or one per access type; None: the endpoint takes no body.
    body: type[Body] | Mapping[AccessType, type[Body]] | None = None
    #: The query's model; None: the endpoint takes no query.
    query: type[Query] | None = None
    #: The path parameters' model; None: the parameters are passed on as matched.
    params: type[Query] | None = None
    #: For the OpenAPI document: the success status, and the media types of the body and the answer.
    success: int = 200
    consumes: str = "application/json"
    produces: str = "application/json"
    #: Request headers the flow requires beyond authentication (documented; the flow checks them).
    required_headers: tuple[str, ...] = ()
    #: The flow judges the access token's session itself (sign-out answers REFRESH_TOKEN_NOT_FOUND_OR_EXPIRED for
    #: a session already gone, as the original does; refreshing uses only the refresh token, so a session gone
    #: answers as its refresh token does); every other route refuses a token whose session is gone before its flow
    #: runs (`auth.session_precondition`).
    checks_own_session: bool = False
    #: For the OpenAPI document: statuses the flow may answer with a plain-text body and no known-error code instead
    #: of a known error (the original's "plain" errors, e.g. a client listing another user's permissions, a
    #: listing's 400 for conflicting filters).
    plain_errors: tuple[int, ...] = ()

    if TYPE_CHECKING:
        # What mypy checks a route by: its flow receives what its models give (the dataclass writes the same
        # `__init__` at run time).
        def __init__(
            self,
            method: str,
            pattern: str,
            flow: Callable[[RequestContext[B, Q, P]], Flow[Response]],
            access: frozenset[AccessType] | None = ALL_ACCESS_TYPES,
            body: type[B] | Mapping[AccessType, type[B]] | None = None,
            query: type[Q] | None = None,
            params: type[P] | None = None,
            success: int = 200,
            consumes: str = "application/json",
            produces: str = "application/json",
            required_headers: tuple[str, ...] = (),
            checks_own_session: bool = False,
            plain_errors: tuple[int, ...] = (),
        ) -> None: ...

    @property
    def deferred(self) -> bool:
        """Whether the table named its flow or a model without importing it (`Deferred`)."""
        body = self.body
        return (
            isinstance(self.flow, Deferred)
            or isinstance(self.query, Deferred)
            or isinstance(self.params, Deferred)
            or isinstance(body, Deferred)
            or (isinstance(body, dict) and any(isinstance(model, Deferred) for model in body.values()))
        )

    def resolved(self) -> Route:
        """This route with its flow and models imported (itself when none is `Deferred`)."""
        if not self.deferred:
            return self
        return Route(
            self.method,
            self.pattern,
            _resolved(self.flow),
            self.access,
            _resolved(self.body),
            _resolved(self.query),
            _resolved(self.params),
            self.success,
            self.consumes,
            self.produces,
            self.required_headers,
            self.checks_own_session,
            self.plain_errors,
        )

    def body_model(self, access_type: AccessType | None) -> type[Body] | None:
        """The body model for this caller; None when the endpoint takes no body."""
        body = self.body
        if body is None or isinstance(body, type):  # one model (checked first: `Mapping` is an ABC, slow to test)
            return body
        if isinstance(body, Mapping):
            return next(iter(body.values())) if access_type is None else body[access_type]
        return body


@dataclass(slots=True)
class _PathEntry:
    regex: re.Pattern[str]
    methods: dict[str, Route] = field(default_factory=dict)
    #: Routes whose flow or models are not imported yet, by method: moved to `methods` by their first match.
    deferred: dict[str, Route] = field(default_factory=dict)
    #: The methods, sorted (the `Allow` header and preflights): set once the table is built.
    allowed: tuple[str, ...] = ()


#: The regex of a path without parameters, looked up by its text (never matched against).
_LITERAL = re.compile("(?!)")


def _compile(pattern: str) -> re.Pattern[str]:
    """`/users/{user_id}` -> a regex with one named group per parameter, literal parts escaped."""
    parts = _PARAM.split(pattern)  # literal, name, literal, name, ..., literal
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts))
    return re.compile(f"^{regex}$")


class Router:
    """Matches (method, path) to a route; built once from the route table."""

    def __init__(self, routes: Sequence[Route]) -> None:
        #: The table it was built from, in order (the OpenAPI document describes it).
        self.routes: tuple[Route, ...] = tuple(routes)
        self._static: dict[str, _PathEntry] = {}
        self._dynamic: dict[str, _PathEntry] = {}
        for route in routes:
            table = self._dynamic if "{" in route.pattern else self._static
            entry = table.get(route.pattern)
            if entry is None:
                regex = _compile(route.pattern) if table is self._dynamic else _LITERAL
                entry = table[route.pattern] = _PathEntry(regex)
            if route.method in entry.methods or route.method in entry.deferred:
                raise ValueError(f"duplicate route {route.method} {route.pattern}")
            (entry.deferred if route.deferred else entry.methods)[route.method] = route
        for entry in (*self._static.values(), *self._dynamic.values()):
            entry.allowed = tuple(sorted((*entry.methods, *entry.deferred)))

    def resolve(self) -> tuple[Route, ...]:
        """Import every route's flow and models now (what first matches would do); the table, resolved (the routes
        `match` finds)."""
        resolved = []
        for route in self.routes:
            entry = (self._dynamic if "{" in route.pattern else self._static)[route.pattern]
            found = entry.methods.get(route.method)
            if found is None:
                found = entry.methods[route.method] = route.resolved()
            resolved.append(found)
        self.routes = tuple(resolved)
        return self.routes

    def allowed(self, path: str) -> tuple[str, ...] | None:
        """The methods of `path` (the `Allow` of a 405), or None when no route has it."""
        try:
            return self.match("OPTIONS", path)[2]
        except KnownError:
            return None

    def match(self, method: str, path: str) -> tuple[Route | None, dict[str, str], tuple[str, ...]]:
        """(route, path parameters, allowed methods) for a request.

        The route is None for a preflight (OPTIONS on a known path). Raises ROUTE_NOT_FOUND or
        METHOD_NOT_ALLOWED.
        """
        if len(path) > 1 and path.endswith("/"):
            path = path[:-1]
        entry = self._static.get(path)
        params: dict[str, str] = {}
        if entry is None:
            for candidate in self._dynamic.values():
                found = candidate.regex.match(path)
                if found is not None:
                    entry, params = candidate, found.groupdict()
                    break
        if entry is None:
            raise KnownError(ErrorCode.ROUTE_NOT_FOUND, context={"method": method, "path": path})
        allowed = entry.allowed
        route = entry.methods.get(method)
        if route is None:
            if method in entry.deferred:
                # The first request to reach this route: its flow and models are imported now (once: the resolved
                # route takes its place; threads that race here resolve the same route).
                route = entry.methods[method] = entry.deferred[method].resolved()
            elif method == "OPTIONS":
                return None, params, allowed
            else:
                raise KnownError(
                    ErrorCode.METHOD_NOT_ALLOWED,
                    context={"method": method, "path": path, "allowed": ", ".join(allowed)},
                    headers=(("allow", ", ".join(allowed)),),
                )
        return route, params, allowed
