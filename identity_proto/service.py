"""The service: one parsed request in, one response out, as a flow over storage effects.

The pipeline runs in the original's order (reference §0.1), which decides the error a caller sees first:

1. method known, then path routed               -> 405 / 404 (OPTIONS on a known path: CORS preflight)
2. body parsed by content type (not for GET)    -> 400 BODY_PARSING_ERROR
3. authentication headers (identity_proto.auth) -> 400/401/403 as listed there
4. access type allowed by the route             -> 400 ACCESS_TYPE_REQUIRED, 401 INSUFFICIENT_ACCESS_TYPE
5. rate limits (identity_proto.ratelimits)      -> 429 RATE_LIMITED, with Retry-After
   and the access token's session still live     -> 401 ACCESS_TOKEN_EXPIRED (checked with the flow's first read:
                                                    identity_proto.preconditions)
6. path parameters, query and body validated    -> 400 SCHEMA_ERROR (all problems in one message)
7. the route's flow

Every failure becomes a response here, in the core: known errors as themselves, a `StorageUnavailable` thrown in
by the driver as 503, and anything else (a bug) as 500 with a request id and no internals. Hosts therefore only
ever see a `Response`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import parse_qsl

import orjson

import identity_proto.schemas as schemas
from identity_proto.auth import AccessType, Auth, AuthCache, ProjectCache, authenticate, session_precondition
from identity_proto.context import RequestContext, ServiceOptions, client_address
from identity_proto.effects import (
    READ_EFFECTS,
    Admission,
    Admit,
    CommitConflict,
    Flow,
    HitRateLimits,
    LoadClockOverride,
    RateLimitHit,
    StorageEffect,
    Together,
    perform,
)
from identity_proto.errors import ErrorCode, KnownError, PlainError, StorageUnavailable
from identity_proto.flows.projects import ProjectSeed, bootstrap_projects
from identity_proto.http import Request, Response, check_headers
from identity_proto.passwords import load_hashing
from identity_proto.preconditions import Precondition, check_preconditions, guarded, resume
from identity_proto.ratelimits import RequestCounters
from identity_proto.render import BASE_HEADERS, cors_headers, error_response, preflight_headers, text_response
from identity_proto.routes import route_table
from identity_proto.routing import Route, Router
from identity_proto.schemas import Validated, schema_error, validate_nothing
from identity_proto.tokens import Entropy, VerifiedTokenCache, load_signing, new_request_id

if TYPE_CHECKING:
    from pydantic import BaseModel

    from identity_proto.records import ClockOverride

__all__ = ["RequestNote", "Service"]

logger = logging.getLogger("identity_proto")

_KNOWN_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_ACCESS_ORDER = (AccessType.CLIENT, AccessType.SERVER, AccessType.ADMIN)


@dataclass(slots=True)
class RequestNote:
    """What answering one request found out, for the host's metrics and access log: a host that wants it passes
    one to `Service.handle`, which fills it in as the request goes (a request refused early leaves the later fields
    as they are). Every field is bounded, so that a host may use each as a metric label: never the raw path."""

    #: The matched route's template (`/api/v1/users/{user_id}`); None when no route matched (404, 405, preflight).
    route: str | None = None
    #: The caller's access type once authenticated; None for an unauthenticated request.
    access_type: AccessType | None = None
    #: The known error's code when the answer is one (`RATE_LIMITED`, `WRITE_CONFLICT`, `STORAGE_UNAVAILABLE`...).
    error: ErrorCode | None = None
    #: How often the route's flow ran again after its commit met a concurrent write (`MAX_COMMIT_ATTEMPTS`).
    reruns: int = 0


class Service:
    """The identity service's core. Pure: holds options, the route table and a verified-token cache."""

    def __init__(self, options: ServiceOptions | None = None, routes: Sequence[Route] | None = None) -> None:
        self.options = options or ServiceOptions()
        if routes is None:
            routes = route_table(dev_mode=self.options.dev_mode, compat=self.options.compat)
        self._router = Router(routes)
        self._token_cache = VerifiedTokenCache()
        self._counters = RequestCounters()
        self.projects = ProjectCache(self.options.project_cache_ms)
        self._auth_cache = AuthCache(self.options.header_prefixes)
        self._auth_args: dict[str, Any] = {
            "headers": self.options.headers,
            "token_cache": self._token_cache,
            "projects": self.projects,
            "keys_first": self.options.compat,
        }
        self._empty_inputs: dict[tuple[str, str, AccessType | None], tuple[Any, Any, Any]] = {}
        self._known_error_headers = self.options.known_error_headers
        self._original_words = self.options.compat
        self._validation_context = {"compat": True} if self.options.compat else None
        # Checked here once: `_stamp` appends them to every response unchecked.
        self._request_id_names = self.options.request_id_headers
        check_headers(tuple((name, "") for name in self._request_id_names))
        self._cors_headers = check_headers(cors_headers(self.options.header_prefixes))

    def prepare(self) -> None:
        """Build now what first requests otherwise build on their way: every model of the route table (pydantic's
        validators, deferred until then), the token machinery (`tokens.load_signing`) and password hashing
        (`passwords.load_hashing`). Serving hosts call it at start-up so that no request waits for it; a core used
        in process can leave each to its first use."""
        for route in self._router.resolve():
            for model in (*(route.body_model(access) for access in (None, *_ACCESS_ORDER)), route.query, route.params):
                if model is not None:
                    model.model_rebuild()
        load_signing()
        load_hashing()

    def handle(
        self, request: Request, now_ms: int, entropy: Entropy, note: RequestNote | None = None
    ) -> Flow[Response]:
        """Answer `request` at time `now_ms` (milliseconds since the epoch), drawing randomness from `entropy`;
        what it finds out on the way goes into `note` (when given)."""
        request_id = new_request_id(entropy)
        try:
            routed = self._route(request, note)
            if isinstance(routed, Response):
                response = routed
            elif self.options.dev_mode:
                response = yield from self._on_test_clock(routed, request, now_ms, entropy, request_id, note)
            else:
                response = yield from self._respond(routed, request, now_ms, entropy, request_id, note)
        except KnownError as error:
            if note is not None:
                note.error = error.code
            response = self._error(error)
        except PlainError as error:
            response = text_response(error.status, error.message, error.headers)
        except StorageUnavailable as exc:
            logger.log(
                logging.DEBUG if exc.quiet else logging.WARNING, "storage unavailable (request %s): %s", request_id, exc
            )
            if note is not None:
                note.error = ErrorCode.STORAGE_UNAVAILABLE
            response = self._error(KnownError(ErrorCode.STORAGE_UNAVAILABLE, context={"request_id": request_id}))
        except Exception:
            logger.exception("unhandled error (request %s) on %s %s", request_id, request.method, request.path)
            if note is not None:
                note.error = ErrorCode.INTERNAL_ERROR
            response = self._error(KnownError(ErrorCode.INTERNAL_ERROR, context={"request_id": request_id}))
        # Browsers send an Origin with every cross-origin request, preflights included; an OPTIONS without one is
        # answered as a preflight all the same.
        cors = request.method == "OPTIONS" or request.header("origin") is not None
        return self._stamp(response, request_id, cors=cors)

    def error_response(self, error: KnownError, request_id: str) -> Response:
        """`error` rendered as this service renders it, for hosts that must answer before `handle` can run
        (a body too large to read, bytes that do not form a `Request`)."""
        return self._stamp(self._error(error), request_id, cors=True)

    def bootstrap(
        self,
        default: ProjectSeed | None,
        internal_admin_key: str | None,
        *,
        now_ms: int,
        entropy: Entropy,
        disable: tuple[str, ...] = (),
        recreate_missing: bool = False,
    ) -> Flow[tuple[str, ...]]:
        """Start-up: make sure the internal and the default project exist, and that the projects in `disable`
        authenticate nothing (see `bootstrap_projects`). Returns those of `disable` that were in the store.
        `recreate_missing` (dev mode): a request naming one of those two projects when the store no longer has it
        makes them again, as a restart would."""
        for project_id in ("internal", *((default.id,) if default else ()), *disable):
            self.projects.forget(project_id)
        if recreate_missing:
            self.projects.recreatable = frozenset(("internal", *((default.id,) if default else ())))
            self.projects.recreate = lambda now: bootstrap_projects(
                default, internal_admin_key, now_ms=now, entropy=entropy
            )
        return bootstrap_projects(default, internal_admin_key, now_ms=now_ms, entropy=entropy, disable=disable)

    # ----------------------------------------------------------------------------------------------------------

    def _route(self, request: Request, note: RequestNote | None) -> tuple[Route, dict[str, str]] | Response:
        """Step 1: the route and its raw path parameters, or the preflight's answer."""
        if request.method not in _KNOWN_METHODS:
            # A 405 names what the target allows (RFC 9110 §15.5.6): the path's methods, or for a path no route has
            # (the method is judged first, as the original does) the methods the service knows.
            methods = ", ".join(self._router.allowed(request.path) or sorted(_KNOWN_METHODS))
            raise KnownError(
                ErrorCode.METHOD_NOT_ALLOWED,
                context={"method": request.method, "path": request.path, "allowed": methods},
                headers=(("allow", methods),),
            )
        route, raw_params, allowed = self._router.match(request.method, request.path)
        if route is None:
            return self._preflight(allowed)
        if note is not None:
            note.route = route.pattern
        return route, raw_params

    def _on_test_clock(
        self,
        routed: tuple[Route, dict[str, str]],
        request: Request,
        host_now_ms: int,
        entropy: Entropy,
        request_id: str,
        note: RequestNote | None,
    ) -> Flow[Response]:
        """Dev/test mode: the request answered at the clock tests may have frozen or moved (`LoadClockOverride`,
        kept in the store so that every worker agrees), read without a round trip of its own where it can be.

        The request goes on the host's clock up to its first storage effect (everything before it is pure). When
        that effect only reads, or counts rate limits (`_repeatable`: nearly every request's first trip with rate
        limits on), the override is read in the same trip (`Together`); without an override (the usual case, even
        in dev mode) the request goes on with those answers. With one, nothing the request decided stands: the
        counts it took in the host clock's windows are taken back, and it is answered again from the start at the
        override's time, exactly as if the override had been read first. A first effect that writes goes behind
        the override (`_clock_gated`: an `Admit` with `clock_gate`, for each write of a `Together`): the store does
        the write only when no override is set, in the same step; with one, nothing was written, the counts are
        taken back and the request answered again as above. A first effect that is no storage effect (mail,
        computing) waits for the override, read alone first, and so does a request answered without a storage
        effect (a token's expiry depends on the clock)."""
        answer = self._respond(routed, request, host_now_ms, entropy, request_id, note)
        try:
            first = next(answer)
        except StopIteration as done:
            result, failure = cast(Response, done.value), None
        except Exception as exc:
            result, failure = None, exc
        else:
            parts = _repeatable(first)
            gated = _clock_gated(first) if parts is None else None
            try:
                if gated is not None:
                    admitted = yield from perform(gated)
                    override = _override_met(gated, admitted)
                elif parts is None:
                    override = yield from perform(LoadClockOverride())
                else:
                    answers = yield from perform(Together((LoadClockOverride(), *parts)))
                    override = answers[0]
            except Exception:
                answer.close()
                raise
            if override is None:
                if gated is not None:
                    return (yield from resume(answer, _as_asked(first, gated, admitted)))
                if parts is None:
                    return (yield from resume(answer, None, sent=first))
                return (yield from resume(answer, answers[1:] if isinstance(first, Together) else answers[1]))
            answer.close()
            taken = _taken_back((gated.counter,) if type(gated) is Admit else parts or (), host_now_ms)
            if taken is not None:
                yield from perform(taken)
            return (yield from self._respond(routed, request, override.now(host_now_ms), entropy, request_id, note))
        override = yield from perform(LoadClockOverride())
        if override is not None:
            return (yield from self._respond(routed, request, override.now(host_now_ms), entropy, request_id, note))
        if failure is not None:
            raise failure
        return cast(Response, result)

    def _respond(
        self,
        routed: tuple[Route, dict[str, str]],
        request: Request,
        now_ms: int,
        entropy: Entropy,
        request_id: str,
        note: RequestNote | None,
    ) -> Flow[Response]:
        """Steps 2 to 7, at `now_ms`."""
        route, raw_params = routed
        body = _parse_body(request) if request.method != "GET" else None
        auth = yield from self._authenticate(request, now_ms)
        if note is not None and auth is not None:
            note.access_type = auth.access_type
        _check_access(route, auth)
        preconditions: list[Precondition[Any]] = []
        if self.options.rate_limits_enabled:
            client = client_address(request, self.options)
            counter = self._counters.precondition(auth, client, (route.method, route.pattern), now_ms=now_ms)
            if counter is not None:
                preconditions.append(counter)
        live_session = None if route.checks_own_session else session_precondition(auth, now_ms=now_ms)
        if live_session is not None:
            preconditions.append(live_session)
        try:
            params, query, parsed_body = self._validate_inputs(route, request, auth, raw_params, body)
        except KnownError:
            yield from check_preconditions(preconditions)  # invalid requests count too (a 429 wins)
            raise
        ctx = RequestContext(
            request=request,
            now_ms=now_ms,
            entropy=entropy,
            request_id=request_id,
            options=self.options,
            auth=auth,
            params=params,
            query=query,
            body=parsed_body,
            projects=self.projects,
            routes=self._router.routes,
            live_session=None if live_session is None else live_session.guard,
            token_cache=self._token_cache,
        )
        # The route's flow, run again from its first read when its commit found a guard broken by a concurrent
        # write: the flow is pure given the request, the clock and entropy, so the re-run reads what that write left
        # and decides on it ("one of N concurrent sign-ups wins" is "N-1 conflict, re-run, and see the winner"). A
        # flow commits before any effect that cannot be repeated (mail), so a re-run repeats nothing observable.
        # The preconditions ran with the first run (a conflict comes from a commit, at or after the first effect);
        # re-runs go without them (`_rerun`). Not a generator wrapping the flow: every effect of every request would
        # pass through one more frame.
        try:
            return (yield from guarded(route.flow(ctx), preconditions))
        except CommitConflict as conflict:
            first_conflict = conflict
        return (yield from _rerun(route, ctx, first_conflict, note))

    def _authenticate(self, request: Request, now_ms: int) -> Flow[Auth | None]:
        """Step 3, answered from the `AuthCache` when the same authentication headers succeeded before (and the
        project and token they were checked against are still current)."""
        if self.projects.ttl_ms <= 0:  # no project cache: nothing tells a cached success is still current
            return (yield from authenticate(request, **self._auth_args, now_ms=now_ms))
        key = self._auth_cache.key(request)
        auth = self._auth_cache.get(key, now_ms, self.projects)
        if auth is None:
            auth = yield from authenticate(request, **self._auth_args, now_ms=now_ms)
            if auth is not None:
                self._auth_cache.put(key, auth)
        return auth

    def _validate_inputs(
        self, route: Route, request: Request, auth: Auth | None, raw_params: dict[str, str], body: Any
    ) -> tuple[Any, Any, Any]:
        """Step 6. A request with no path parameters, query or body (most GETs) has the same valid inputs every
        time: those are kept per route and access type (the models are frozen, so one instance serves all)."""
        if raw_params or body is not None or request.query:
            return _validate_inputs(route, request, auth, raw_params, body, self._validation_context)
        key = (route.method, route.pattern, None if auth is None else auth.access_type)
        found = self._empty_inputs.get(key)
        if found is None:
            found = self._empty_inputs[key] = _validate_inputs(
                route, request, auth, raw_params, body, self._validation_context
            )
        return found

    def _error(self, error: KnownError) -> Response:
        if self._original_words:
            original = error.in_original_words()
            if isinstance(original, PlainError):
                return text_response(original.status, original.message, original.headers)
            error = original
        return error_response(error, known_error_headers=self._known_error_headers)

    def _stamp(self, response: Response, request_id: str, *, cors: bool) -> Response:
        """The headers every response gets here and nowhere else: the request id, and the CORS headers (once)."""
        # Trusted: the names were checked in __init__, the id is ours (Crockford characters), the CORS headers too.
        extra = tuple([(name, request_id) for name in self._request_id_names])
        return response.with_trusted_headers(extra + self._cors_headers if cors else extra)

    def _preflight(self, allowed: tuple[str, ...]) -> Response:
        """CORS preflight (reference §0.2): an empty 200 with what only a preflight says (`_stamp` adds the rest)."""
        return Response(200, (*BASE_HEADERS, *preflight_headers(self.options.header_prefixes, allowed)))


#: How often a flow runs when its commit keeps meeting concurrent changes (`effects.commit`); then 503 WRITE_CONFLICT.
MAX_COMMIT_ATTEMPTS = 5


def _rerun(
    route: Route, ctx: RequestContext[Any, Any, Any], conflict: CommitConflict, note: RequestNote | None
) -> Flow[Response]:
    """The route's flow run again after its first run met `conflict`, up to `MAX_COMMIT_ATTEMPTS` runs in all;
    then 503 WRITE_CONFLICT. Each run again is counted in `note`."""
    for _attempt in range(MAX_COMMIT_ATTEMPTS - 1):
        logger.debug("%s %s: %s; running the flow again", route.method, route.pattern, conflict)
        if note is not None:
            note.reruns += 1
        try:
            return (yield from route.flow(ctx))
        except CommitConflict as again:
            conflict = again
    raise KnownError(ErrorCode.WRITE_CONFLICT)


def _repeatable(effect: Any) -> tuple[StorageEffect[Any], ...] | None:
    """The effects of a request's first trip when it may be done again without anything to show for it (reads,
    rate-limit counts: `Service._on_test_clock`), else None."""
    parts = effect.effects if isinstance(effect, Together) else (effect,)
    for part in parts:
        if type(part) not in READ_EFFECTS and type(part) is not HitRateLimits:
            return None
    return parts


def _clock_gated(effect: Any) -> Admit | Together | None:
    """A request's first write behind the clock override (`Admit.clock_gate`: performed only when no override is
    set, which is read in the same step); in a `Together`, each write of it so (its reads go as they are). None when
    it is no storage effect (mail, computing): then the override is read alone first."""
    if type(effect) is Admit:
        return Admit(effect.effect, effect.counter, effect.limits, clock_gate=True)
    if type(effect) is Together:
        return Together(
            tuple(
                [
                    part if type(part) in READ_EFFECTS else Admit(part, _NO_HITS, clock_gate=True)
                    for part in effect.effects
                ]
            )
        )
    if isinstance(effect, StorageEffect):
        return Admit(effect, _NO_HITS, clock_gate=True)
    return None


def _override_met(gated: Admit | Together, answer: Any) -> ClockOverride | None:
    """The clock override a gated first trip (`_clock_gated`) found, if any (then none of its writes was done)."""
    if type(gated) is Admit:
        return cast(Admission, answer).clock_override
    for part in answer:
        if type(part) is Admission and part.clock_override is not None:
            return part.clock_override
    return None


def _as_asked(first: Any, gated: Admit | Together, answer: Any) -> Any:
    """The answer to the effect the request asked for (`first`), from its gated form's (no override was set)."""
    if type(gated) is Together:
        return tuple([part.result if type(part) is Admission else part for part in answer])
    return answer if type(first) is Admit else cast(Admission, answer).result


#: The counter of an `Admit` that counts nothing (only the clock override is looked at).
_NO_HITS = HitRateLimits((), 0)


def _taken_back(parts: tuple[StorageEffect[Any], ...], now_ms: int) -> HitRateLimits | None:
    """The counts `parts` took, taken back (None when they took none)."""
    hits = tuple(
        RateLimitHit(hit.key, hit.expires_at_millis, -hit.amount)
        for part in parts
        if type(part) is HitRateLimits
        for hit in part.hits
        if hit.amount
    )
    return HitRateLimits(hits, now_ms) if hits else None


def _parse_body(request: Request) -> Any:
    """The body as its content type says (reference §0.1 step 2); None when there is none."""
    content_type = request.content_type
    raw = request.body
    if not raw:
        return None
    if content_type is None:
        raise KnownError(
            ErrorCode.BODY_PARSING_ERROR,
            message="The request has a body but no Content-Type header; send Content-Type: application/json.",
        )
    if content_type == "application/octet-stream":
        return raw
    if content_type == "application/json":
        try:
            parsed = orjson.loads(raw)  # orjson checks the UTF-8 itself: no decoded copy first
        except orjson.JSONDecodeError:
            _utf8(raw)  # which of the two it was
            raise KnownError(ErrorCode.BODY_PARSING_ERROR, message="Invalid JSON in request body") from None
        # Deeper than the limit takes more opening brackets than the limit: most bodies skip the walk.
        if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH and _depth_exceeds(parsed, MAX_JSON_DEPTH):
            raise KnownError(
                ErrorCode.BODY_PARSING_ERROR,
                message=f"JSON in request body is nested deeper than {MAX_JSON_DEPTH} levels",
            )
        return parsed
    if content_type == "application/x-www-form-urlencoded":
        return dict(parse_qsl(_utf8(raw), keep_blank_values=True))
    if content_type == "text/plain":
        return _utf8(raw)
    raise KnownError(ErrorCode.BODY_PARSING_ERROR, message=f"Unknown content type in request body: {content_type}")


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KnownError(ErrorCode.BODY_PARSING_ERROR, message="Request body cannot be parsed as UTF-8") from None


#: Deepest nesting of objects and arrays a JSON body may have (metadata included): deeper bodies are refused before
#: anything walks them recursively.
MAX_JSON_DEPTH = 32


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests objects/arrays more than `limit` deep (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _check_access(route: Route, auth: Auth | None) -> None:
    """Step 4: the route's access types (reference §0.1: these win over schema errors)."""
    if route.access is None:
        return
    if auth is None:
        raise KnownError(ErrorCode.ACCESS_TYPE_REQUIRED)
    if auth.access_type not in route.access:
        allowed = [t.value for t in _ACCESS_ORDER if t in route.access]
        quoted = " or ".join(f"'{name}'" for name in allowed)
        raise KnownError(
            ErrorCode.INSUFFICIENT_ACCESS_TYPE,
            message=f"The x-service-access-type header must be {quoted}, but was '{auth.access_type.value}'.",
            details={"actual_access_type": auth.access_type.value, "allowed_access_types": allowed},
        )


def _validate_inputs(
    route: Route,
    request: Request,
    auth: Auth | None,
    raw_params: dict[str, str],
    body: Any,
    context: dict[str, Any] | None = None,
) -> tuple[Any, Any, Any]:
    """Step 5: every input validated, every problem reported at once."""
    params: Validated[Any] = Validated(raw_params)
    if route.params is not None:
        params = schemas.validate_model(route.params, raw_params, "params")
    query = _validated(route.query, _query_dict(request), "query")
    model = route.body_model(auth.access_type if auth else None)
    parsed = validate_nothing(body, "body") if model is None else schemas.validate_model(model, body, "body", context)
    problems = params.problems + query.problems + parsed.problems
    if problems:
        raise schema_error(request.method, request.path, problems)
    return params.value, query.value, parsed.value


def _validated(model: type[BaseModel] | None, data: Any, location: str) -> Validated[Any]:
    # `schemas.validate_model` is loaded (with pydantic) by the first route that has a model.
    return validate_nothing(data, location) if model is None else schemas.validate_model(model, data, location)


def _query_dict(request: Request) -> dict[str, str]:
    # A repeated query parameter keeps its last value, as the original's flat query object does.
    return dict(request.query_items()) if request.query else {}
