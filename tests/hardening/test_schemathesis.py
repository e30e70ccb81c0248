"""Schemathesis against the service's own OpenAPI document, in process (the WSGI face of an `IdentityFake`).

Every operation of `GET /api/v1/openapi.json` is called with generated requests, per caller:

- `server` and `client` (the dev project's keys; the client also carries a signed-in user's access token) run every
  operation; `admin` (the dev project's admin key) and `internal` (the internal project's admin key) run the
  admin-only operations, which the other two can only be refused.
- three kinds of cases per operation: positive (schema-valid) and negative (schema-invalid) cases generated from
  the document, and positive cases whose path parameters name objects that exist (a user, a team, a session, a
  project), so that generated bodies reach the flows rather than stopping at a 404.

Checks on every response: not a 5xx, the body conforms to the documented schema (every JSON success has a real
schema: identity_proto.schemas.responses, closed objects), the status code and the content type are documented;
and a positive case (valid per the document) is not refused as invalid (400 SCHEMA_ERROR / BODY_PARSING_ERROR):
the document is as strict as the validators. Each test gets a fresh fake, so destructive calls (DELETE, reset,
clock moves) stay local.

Every case runs on the memory store and on Redis: the fake's WSGI face on a `RedisStore` over fakeredis, in process
(a real redis-server per test would make the run several times longer; the contract suite runs the same store code
against a real Redis).

Figures (requests sent, 5xx, positive cases refused) are printed at the end of the module and written to
results/schemathesis.json. `SCHEMATHESIS_MAX_EXAMPLES` (default 5) sets the examples per operation and kind of case
on the memory store; `SCHEMATHESIS_REDIS_MAX_EXAMPLES` (default 2) on Redis.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import fakeredis
import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema

from backends.redis import RedisStore
from identity_hosting.wsgi import IdentityWSGI
from identity_proto.auth import AccessType
from identity_proto.routes import MOCK_OAUTH_ROUTES, ROUTES, TESTING_ROUTES
from identity_proto.routing import Route
from identity_testing import IdentityFake
from tests.hardening._results import write_results

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "5"))
REDIS_MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_REDIS_MAX_EXAMPLES", "2"))
STORES = ("memory", "redis")
#: Measuring only (`SCHEMATHESIS_COUNT_ONLY=1`): positive cases refused as invalid are counted, not failed on, so a run
#: reports all of them (the figures of tests/hardening/README.md).
COUNT_ONLY = os.environ.get("SCHEMATHESIS_COUNT_ONLY") == "1"
#: What a service says when it refuses a request as invalid.
REFUSED_AS_INVALID = {"SCHEMA_ERROR", "BODY_PARSING_ERROR"}
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]
OPENAPI_PATH = "/api/v1/openapi.json"

ALL_ROUTES: tuple[Route, ...] = ROUTES + TESTING_ROUTES + MOCK_OAUTH_ROUTES  # all of a dev-mode service
#: Schemathesis leaves out the operation that serves the document it loaded; everything else is fuzzed.
FUZZED_ROUTES = tuple(r for r in ALL_ROUTES if r.pattern != OPENAPI_PATH)
ADMIN_ONLY_ROUTES = tuple(r for r in FUZZED_ROUTES if r.access is not None and AccessType.SERVER not in r.access)

#: (store, caller, route): server and client call everything; the two admins what only an admin may call.
CASES = [
    pytest.param(store, caller, r, id=f"{store}-{caller}-{r.method} {r.pattern}")
    for store in STORES
    for caller, routes in (
        ("server", FUZZED_ROUTES),
        ("client", FUZZED_ROUTES),
        ("admin", ADMIN_ONLY_ROUTES),
        ("internal", ADMIN_ONLY_ROUTES),
    )
    for r in routes
]


@dataclass
class Tally:
    """What schemathesis sent and got back, over the whole module."""

    requests: Counter[str] = field(default_factory=Counter)  # by caller
    stores: Counter[str] = field(default_factory=Counter)  # by store
    positive: Counter[str] = field(default_factory=Counter)  # positive cases by store
    refused_positive: list[dict[str, Any]] = field(default_factory=list)  # valid per the document, refused
    #: refusals of positive cases for a reason the document cannot state (per access type; the import), by reason
    refused_beyond_the_document: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)  # by "caller status"
    kinds: Counter[str] = field(default_factory=Counter)  # by kind of case
    server_errors: list[dict[str, Any]] = field(default_factory=list)
    operations: set[str] = field(default_factory=set)
    no_negative_case: set[str] = field(default_factory=set)

    def record(self, store: str, caller: str, kind: str, label: str, case: Any, response: Any) -> bool:
        """Counts the response; whether it refuses a positive case as invalid."""
        status, body = response.status_code, response.text
        self.stores[store] += 1
        refused = False
        if kind.startswith("positive"):
            self.positive[store] += 1
            code = (response.headers.get("x-service-known-error") or [None])[0]
            refused = status == 400 and code in REFUSED_AS_INVALID
            reason = _beyond_the_document(caller, label, body) if refused else None
            if reason is not None:
                self.refused_beyond_the_document[reason] += 1
                refused = False
            if refused:
                self.refused_positive.append(
                    {"store": store, "caller": caller, "operation": label, "response": body[:500], **_sent(case)}
                )
        self.requests[caller] += 1
        self.statuses[f"{caller} {status}"] += 1
        self.kinds[kind] += 1
        self.operations.add(label)
        if status >= 500:
            self.server_errors.append(
                {
                    "store": store,
                    "caller": caller,
                    "kind": kind,
                    "operation": label,
                    "status": status,
                    **_sent(case),
                    "response": body[:2000],
                }
            )
        return refused

    def figures(self) -> dict[str, Any]:
        return {
            "schemathesis_version": schemathesis.__version__,
            "max_examples_per_operation_and_kind": {"memory": MAX_EXAMPLES, "redis": REDIS_MAX_EXAMPLES},
            "checks": [*(c.__name__ for c in CHECKS), "positive_cases_not_refused_as_invalid"],
            "requests": sum(self.requests.values()),
            "requests_by_store": dict(self.stores),
            "server_errors_5xx": len(self.server_errors),
            "positive_cases_by_store": dict(self.positive),
            "positive_cases_refused_as_invalid": len(self.refused_positive),
            "refused_positive_by_operation": dict(Counter(r["operation"] for r in self.refused_positive)),
            "refused_positive_beyond_the_document": dict(self.refused_beyond_the_document),
            "refused_positive_samples": self.refused_positive[:50],
            "requests_by_caller": dict(self.requests),
            "requests_by_kind": dict(self.kinds),
            "statuses_by_caller": dict(sorted(self.statuses.items())),
            "operations_called": len(self.operations),
            "operations_without_negative_cases": sorted(self.no_negative_case),
            "server_error_samples": self.server_errors[:50],
        }


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    figures = Tally()
    yield figures
    result = figures.figures()
    path = write_results("schemathesis", result)
    print(
        f"\nschemathesis {result['schemathesis_version']}: {result['requests']} requests "
        f"({result['requests_by_caller']}; {result['requests_by_store']}), {result['server_errors_5xx']} responses "
        f"5xx, {result['operations_called']} operations; {result['positive_cases_refused_as_invalid']} of "
        f"{sum(result['positive_cases_by_store'].values())} positive cases refused as invalid (and "
        f"{sum(result['refused_positive_beyond_the_document'].values())} for a reason OpenAPI cannot state: "
        f"{result['refused_positive_beyond_the_document']}); figures in {path}"
    )


@pytest.fixture(scope="module")
def schema() -> OpenApiSchema:
    """The document as the service serves it (dev/test mode: the testing routes are in it)."""
    return schemathesis.openapi.from_wsgi(OPENAPI_PATH, IdentityFake().wsgi)


@dataclass
class World:
    """A fresh fake with objects that exist, and the headers of one caller."""

    fake: IdentityFake
    headers: dict[str, str]
    known: dict[str, str]


#: Operations whose body model differs per access type (the document's body is anyOf the client's and the server's).
_BODY_PER_ACCESS_TYPE = {f"{r.method} {r.pattern}" for r in ALL_ROUTES if isinstance(r.body, dict)}


_IMPORT = "POST /api/v1/testing/projects/{project_id}/import"


def _beyond_the_document(caller: str, label: str, answer: str) -> str | None:
    """Why a request valid per the document was refused, when the reason is one OpenAPI cannot state: what an
    operation requires or allows per access type (security schemes are alternatives, bodies cannot depend on them),
    and the dev-mode import's checks of a document's records against each other. None: the document should have
    refused the request itself."""
    if label == _IMPORT and "SCHEMA_ERROR" in answer:
        return "an export document's records, checked against each other by the import (dev mode)"
    if "auth.user must be defined" in answer:
        return "needs a signed-in user (x-service-access-token), which server and admin access did not send"
    # the body is anyOf the client's and the server's, or the path's `me` made it /users/me's client body
    shadowed_or_any_of = label in _BODY_PER_ACCESS_TYPE or "/users/me:" in answer
    if caller == "client" and "contains unknown properties" in answer and shadowed_or_any_of:
        return "a field only server and admin may write, sent with client access"
    if "must be defined for type" in answer or "issuer_url" in answer or "microsoft_tenant_id is only" in answer:
        return "an OAuth provider's fields per type, checked with the stored config (a secret left out is kept)"
    if "more than once" in answer:
        return "ids unique within a list of objects (JSON Schema's uniqueItems compares whole items)"
    return None


def _sent(case: Any) -> dict[str, Any]:
    return {
        "path_parameters": case.path_parameters,
        "query": case.query,
        "headers": {k: v for k, v in (case.headers or {}).items() if not k.lower().startswith("x-service-")},
        "body": repr(case.body)[:2000],
        "media_type": case.media_type,
    }


def _fake(store: str) -> IdentityFake:
    """A fresh fake on the memory store, or with its WSGI face on a Redis store (fakeredis, in process)."""
    fake = IdentityFake()
    if store == "redis":
        redis = RedisStore(fakeredis.FakeRedis(server=fakeredis.FakeServer()), namespace="schemathesis")
        fake.store = redis  # type: ignore[assignment]
        fake.wsgi = IdentityWSGI(
            fake.settings, store=redis, service=fake.service, entropy=fake.entropy, webhook_delivery=False
        )
        fake.wsgi.startup()
    return fake


def _world(caller: str, store: str = "memory") -> World:
    fake = _fake(store)
    project = fake.dev_project
    user = project.create_user("ada@example.com", password="correct horse battery", display_name="Ada")
    tokens = project.sign_in(user["id"])
    other_session = project.sign_in(user["id"])  # a session that is not the current one (a client may end it)
    with project.client("server") as http:
        team = http.post("/api/v1/teams", json={"display_name": "Team", "creator_user_id": user["id"]}).json()
        sessions = http.get("/api/v1/auth/sessions", params={"user_id": user["id"]}).json()["items"]
        # --- team invitations: one open invitation to Ada's (verified) address ---
        invitation = http.post(
            "/api/v1/team-invitations/send-code",
            json={"team_id": team["id"], "email": "ada@example.com", "callback_url": "http://localhost:3000/join"},
        ).json()
        channels = http.get("/api/v1/contact-channels", params={"user_id": user["id"]}).json()["items"]
    assert other_session["refresh_token"] != tokens["refresh_token"]
    session_id = next(s["id"] for s in sessions if not s.get("is_current_session"))
    known = {
        "user_id": user["id"],
        "team_id": team["id"],
        "session_id": session_id,
        "project_id": project.id,
        "permission_id": "$read_members",
        "invitation_id": invitation["id"],  # team invitations
        "contact_channel_id": channels[0]["id"],  # contact channels: the user's primary e-mail
        "provider_id": "github",  # OAuth: a provider served by the mock (configured below)
    }
    project.use_mock_oauth("github")
    # API keys: both families on (off, every route answers one plain 400), and a key of the user's
    switched = {"config": {"allow_user_api_keys": True, "allow_team_api_keys": True}}
    with project.client("admin") as http:
        assert http.patch("/api/v1/projects/current", json=switched).status_code == 200
    project.create_api_key(user_id=user["id"])
    with project.client("server") as http:
        known["api_key_id"] = http.get("/api/v1/user-api-keys", params={"user_id": user["id"]}).json()["items"][0]["id"]
    # --- OAuth accounts: a configured provider and a linked account of Ada's (`provider_id` is the account row's id,
    # as /oauth-providers names it; the connected-accounts routes then answer their provider refusal) ---
    providers = [{"id": "github", "type": "github", "client_id": "gh-client", "client_secret": "gh-secret-0001"}]
    with project.client("admin") as http:
        configured = http.patch("/api/v1/projects/current", json={"config": {"oauth_providers": providers}})
        assert configured.status_code == 200
    linked = {"user_id": user["id"], "provider_config_id": "github", "account_id": "gh-1", "allow_sign_in": True}
    with project.client("server") as http:
        row = http.post("/api/v1/oauth-providers", json={**linked, "allow_connected_accounts": True})
        assert row.status_code == 201, row.text
    known["provider_id"] = row.json()["id"]
    known["provider_account_id"] = "gh-1"
    # --- end OAuth accounts ---
    # --- webhooks: an endpoint and a message of it (the test event) ---
    with project.client("admin") as http:
        endpoint = http.post("/api/v1/webhook-endpoints", json={"url": "https://hooks.example.com/identity"})
        assert endpoint.status_code == 201, endpoint.text
        known["endpoint_id"] = endpoint.json()["id"]
        sent = http.post(f"/api/v1/webhook-endpoints/{known['endpoint_id']}/test")
        assert sent.status_code == 200, sent.text
        known["message_id"] = sent.json()["message_id"]
    # --- end webhooks ---
    if caller == "internal":
        second = fake.create_project(display_name="Second")
        known["project_id"] = second.id
        headers = {
            "x-service-access-type": "admin",
            "x-service-project-id": "internal",
            "x-service-super-secret-admin-key": fake.internal_admin_key,
        }
    elif caller == "client":
        headers = project.headers("client", access_token=tokens["access_token"])
    else:
        headers = project.headers(caller)
    return World(fake, headers, known)


def _can_be_broken(operation: Any) -> bool:
    """Whether the document lets a request break it: a body, a required query parameter (left out), or a parameter
    with a constraint. (A path parameter declared as any string accepts every value: Hypothesis would search in vain
    for an invalid one.)"""
    raw = operation.definition.raw
    if "requestBody" in raw:
        return True
    return any(
        (p["in"] != "path" and p.get("required"))
        or set(p["schema"]) - {"type", "title"}
        or p["schema"].get("type") != "string"
        for p in raw["parameters"]
    )


def _run(strategy: Any, call: Callable[[Any], None], max_examples: int = MAX_EXAMPLES) -> None:
    @given(case=strategy)
    @settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        report_multiple_bugs=False,
    )
    def fuzz(case: Any) -> None:
        call(case)

    fuzz()


def test_the_document_lists_every_route(schema: OpenApiSchema) -> None:
    """Nothing escapes the fuzzing: the document lists the whole route table, and schemathesis generates cases for
    all of it but the document itself."""
    in_document = {(method.upper(), path) for path, item in schema.raw_schema["paths"].items() for method in item}
    assert in_document == {(r.method, r.pattern) for r in ALL_ROUTES}
    fuzzed = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert fuzzed == {(r.method, r.pattern) for r in FUZZED_ROUTES}


@pytest.mark.parametrize(("store", "caller", "route"), CASES)
def test_operation(store: str, caller: str, route: Route, schema: OpenApiSchema, tally: Tally) -> None:
    world = _world(caller, store)
    operation = schema[route.pattern][route.method]
    label = f"{route.method} {route.pattern}"
    examples = MAX_EXAMPLES if store == "memory" else REDIS_MAX_EXAMPLES

    def call_with(kind: str) -> Callable[[Any], None]:
        def call(case: Any) -> None:
            response = case.call(app=world.fake.wsgi)
            refused = tally.record(store, caller, kind, label, case, response)
            case.validate_response(response, checks=CHECKS)
            assert COUNT_ONLY or not refused, (
                f"{label}: a request valid per the document was refused as invalid: {response.text[:500]}; "
                f"sent {_sent(case)}"
            )

        return call

    _run(operation.as_strategy(GenerationMode.POSITIVE, headers=world.headers), call_with("positive"), examples)
    if _can_be_broken(operation):
        _run(operation.as_strategy(GenerationMode.NEGATIVE, headers=world.headers), call_with("negative"), examples)
    else:
        tally.no_negative_case.add(label)
    names = [part[1:-1] for part in route.pattern.split("/") if part.startswith("{")]
    if names:
        known = {name: world.known[name] for name in names}
        strategy = operation.as_strategy(GenerationMode.POSITIVE, headers=world.headers, path_parameters=known)
        _run(strategy, call_with("positive, existing objects"), examples)


# ----------------------------------------------------------------------------------------------------------------
# The document and the server agree: a request the document calls valid is not refused as invalid, and the other
# way round. Fuzzing found the disagreements below; each is pinned by one request.

_MISMATCH = "schema mismatch (the OpenAPI document and the server disagree): "


@dataclass(frozen=True)
class Probe:
    caller: str
    method: str
    pattern: str
    path_parameters: dict[str, str] = field(default_factory=dict)  # values; "{user_id}" etc. name known objects
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


PROBES = [
    pytest.param(
        Probe("server", "PATCH", "/api/v1/users/{user_id}", {"user_id": "{user_id}"}, {"display_name": "Ada"}),
        id="agree: server PATCH /users/{id} display_name",
    ),
    pytest.param(
        Probe("server", "PATCH", "/api/v1/users/{user_id}", {"user_id": "{user_id}"}, {"no_such_field": 1}),
        id="agree: unknown field refused",
    ),
    pytest.param(
        Probe("client", "POST", "/api/v1/auth/sessions/current/refresh", headers={"x-service-refresh-token": "x" * 45}),
        id="agree: refresh with the header",
    ),
    pytest.param(
        Probe("client", "PATCH", "/api/v1/users/me", body={"display_name": "Ada"}),
        id="anyOf: client PATCH /users/me display_name",
    ),
    pytest.param(
        Probe("server", "POST", "/api/v1/teams", body={"display_name": "Team"}),
        id="anyOf: server POST /teams display_name",
    ),
    pytest.param(
        Probe("server", "PATCH", "/api/v1/users/{user_id}", {"user_id": "{user_id}"}, {"primary_email_verified": None}),
        id="null: PATCH /users/{id} primary_email_verified null",
    ),
    pytest.param(
        Probe("admin", "PATCH", "/api/v1/projects/current", body={"config": {"sign_up_enabled": None}}),
        id="null: PATCH /projects/current config key null",
    ),
    pytest.param(
        Probe("server", "PATCH", "/api/v1/teams/{team_id}", {"team_id": "{team_id}"}, {"display_name": "A\u202eB"}),
        id="control characters: team display_name with a bidirectional override",
    ),
    pytest.param(
        Probe("server", "POST", "/api/v1/auth/sessions", body={"user_id": "{user_id}", "expires_in_millis": 60000.0}),
        id="integer: POST /auth/sessions expires_in_millis 60000.0 (a JSON integer)",
    ),
    pytest.param(
        Probe("client", "POST", "/api/v1/auth/sessions/current/refresh"),
        id="header: refresh without x-service-refresh-token",
    ),
    pytest.param(
        Probe("server", "GET", "/api/v1/users/{user_id}", {"user_id": "not-a-uuid"}),
        id="format: path user_id not a UUID",
    ),
    pytest.param(
        Probe("client", "POST", "/api/v1/auth/otp/sign-in", body={"code": "ABC123"}),
        id="format: sign-in code shorter than 45",
    ),
    pytest.param(Probe("server", "POST", "/api/v1/users"), id="required body: POST /users without one"),
    pytest.param(Probe("client", "PATCH", "/api/v1/users/me"), id="required body: PATCH /users/me without one"),
    pytest.param(
        Probe("admin", "PATCH", "/api/v1/projects/current"), id="required body: PATCH /projects/current without one"
    ),
    pytest.param(
        Probe("server", "DELETE", "/api/v1/teams/{team_id}", {"team_id": "{team_id}"}),
        id="optional body: DELETE /teams/{id} without one",
    ),
]


def _document_accepts(document: dict[str, Any], probe: Probe, path_parameters: dict[str, str], body: Any) -> bool:
    """Whether the request is valid per the document: declared parameters present and valid, body valid."""
    operation = document["paths"][probe.pattern][probe.method.lower()]
    sent = {"path": path_parameters, "header": {k.lower(): v for k, v in probe.headers.items()}, "query": {}}
    for parameter in operation.get("parameters", []):
        value = sent[parameter["in"]].get(
            parameter["name"].lower() if parameter["in"] == "header" else parameter["name"]
        )
        if value is None:
            if parameter.get("required"):
                return False
            continue
        if not jsonschema_rs.validator_for({**parameter["schema"], "components": document["components"]}).is_valid(
            value
        ):
            return False
    if "requestBody" in operation:
        if body is None:
            return not operation["requestBody"].get("required", False)
        schema = next(iter(operation["requestBody"]["content"].values()))["schema"]
        return bool(jsonschema_rs.validator_for({**schema, "components": document["components"]}).is_valid(body))
    return True


def _fill(value: Any, known: dict[str, str]) -> Any:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in known:
        return known[value[1:-1]]
    if isinstance(value, dict):
        return {k: _fill(v, known) for k, v in value.items()}
    return value


@pytest.mark.parametrize("probe", PROBES)
def test_the_document_and_the_server_agree(probe: Probe, schema: OpenApiSchema) -> None:
    world = _world(probe.caller)
    path_parameters = _fill(probe.path_parameters, world.known)
    body = _fill(probe.body, world.known)
    path = probe.pattern.format(**path_parameters)
    with world.fake.client({**world.headers, **probe.headers}) as http:
        response = http.request(probe.method, path, json=body) if body is not None else http.request(probe.method, path)
    refused_as_invalid = response.status_code == 400 and response.headers.get("x-service-known-error") in {
        "SCHEMA_ERROR",
        "BODY_PARSING_ERROR",
    }
    valid_per_document = _document_accepts(schema.raw_schema, probe, path_parameters, body)
    assert valid_per_document == (not refused_as_invalid), (
        f"{probe.method} {path} body={body!r}: valid per the document: {valid_per_document}; "
        f"server: {response.status_code} {response.text[:300]}"
    )
