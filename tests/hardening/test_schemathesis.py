"""Schemathesis against the service's own OpenAPI document, in process (the WSGI face of an `IdentityFake`).

Every operation of `GET /api/v1/openapi.json` is called with generated requests, per caller:

- `server` and `client` (the dev project's keys; the client also carries a signed-in user's access token) run every
  operation; `admin` (the dev project's admin key) and `internal` (the internal project's admin key) run the
  admin-only operations, which the other two can only be refused.
- three kinds of cases per operation: positive (schema-valid) and negative (schema-invalid) cases generated from
  the document, and positive cases whose path parameters name objects that exist (a user, a team, a session, a
  project), so that generated bodies reach the flows rather than stopping at a 404.

Checks on every response: not a 5xx, the body conforms to the documented schema, the status code and the content
type are documented. Each test gets a fresh fake, so destructive calls (DELETE, reset, clock moves) stay local.

Figures (requests sent, 5xx) are printed at the end of the module and written to results/schemathesis.json.
`SCHEMATHESIS_MAX_EXAMPLES` (default 5) sets the examples per operation and kind of case.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

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

from identity_proto.auth import AccessType
from identity_proto.routes import MOCK_OAUTH_ROUTES, ROUTES, TESTING_ROUTES
from identity_proto.routing import Route
from identity_testing import IdentityFake
from tests.hardening._results import write_results

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "5"))
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]
OPENAPI_PATH = "/api/v1/openapi.json"

ALL_ROUTES: tuple[Route, ...] = ROUTES + TESTING_ROUTES + MOCK_OAUTH_ROUTES  # all of a dev-mode service
#: Schemathesis leaves out the operation that serves the document it loaded; everything else is fuzzed.
FUZZED_ROUTES = tuple(r for r in ALL_ROUTES if r.pattern != OPENAPI_PATH)
ADMIN_ONLY_ROUTES = tuple(r for r in FUZZED_ROUTES if r.access is not None and AccessType.SERVER not in r.access)

#: (caller, route) pairs: server and client call everything; the two admins what only an admin may call.
CASES = [
    *(pytest.param("server", r, id=f"server-{r.method} {r.pattern}") for r in FUZZED_ROUTES),
    *(pytest.param("client", r, id=f"client-{r.method} {r.pattern}") for r in FUZZED_ROUTES),
    *(pytest.param("admin", r, id=f"admin-{r.method} {r.pattern}") for r in ADMIN_ONLY_ROUTES),
    *(pytest.param("internal", r, id=f"internal-{r.method} {r.pattern}") for r in ADMIN_ONLY_ROUTES),
]


@dataclass
class Tally:
    """What schemathesis sent and got back, over the whole module."""

    requests: Counter[str] = field(default_factory=Counter)  # by caller
    statuses: Counter[str] = field(default_factory=Counter)  # by "caller status"
    kinds: Counter[str] = field(default_factory=Counter)  # by kind of case
    server_errors: list[dict[str, Any]] = field(default_factory=list)
    operations: set[str] = field(default_factory=set)
    no_negative_case: set[str] = field(default_factory=set)

    def record(self, caller: str, kind: str, label: str, case: Any, status: int, body: str) -> None:
        self.requests[caller] += 1
        self.statuses[f"{caller} {status}"] += 1
        self.kinds[kind] += 1
        self.operations.add(label)
        if status >= 500:
            self.server_errors.append(
                {
                    "caller": caller,
                    "kind": kind,
                    "operation": label,
                    "status": status,
                    "path_parameters": case.path_parameters,
                    "query": case.query,
                    "body": repr(case.body)[:2000],
                    "media_type": case.media_type,
                    "response": body[:2000],
                }
            )

    def figures(self) -> dict[str, Any]:
        return {
            "schemathesis_version": schemathesis.__version__,
            "max_examples_per_operation_and_kind": MAX_EXAMPLES,
            "checks": [c.__name__ for c in CHECKS],
            "requests": sum(self.requests.values()),
            "server_errors_5xx": len(self.server_errors),
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
        f"({result['requests_by_caller']}), {result['server_errors_5xx']} responses 5xx, "
        f"{result['operations_called']} operations; figures in {path}"
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


def _world(caller: str) -> World:
    fake = IdentityFake()
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


def _run(strategy: Any, call: Callable[[Any], None]) -> None:
    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
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


@pytest.mark.parametrize(("caller", "route"), CASES)
def test_operation(caller: str, route: Route, schema: OpenApiSchema, tally: Tally) -> None:
    world = _world(caller)
    operation = schema[route.pattern][route.method]
    label = f"{route.method} {route.pattern}"

    def call_with(kind: str) -> Callable[[Any], None]:
        def call(case: Any) -> None:
            response = case.call(app=world.fake.wsgi)
            tally.record(caller, kind, label, case, response.status_code, response.text)
            case.validate_response(response, checks=CHECKS)

        return call

    _run(operation.as_strategy(GenerationMode.POSITIVE, headers=world.headers), call_with("positive"))
    if _can_be_broken(operation):
        _run(operation.as_strategy(GenerationMode.NEGATIVE, headers=world.headers), call_with("negative"))
    else:
        tally.no_negative_case.add(label)
    names = [part[1:-1] for part in route.pattern.split("/") if part.startswith("{")]
    if names:
        known = {name: world.known[name] for name in names}
        strategy = operation.as_strategy(GenerationMode.POSITIVE, headers=world.headers, path_parameters=known)
        _run(strategy, call_with("positive, existing objects"))


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
        marks=pytest.mark.xfail(
            strict=True,
            reason=_MISMATCH + "fields the server refuses as null (400 SCHEMA_ERROR '... cannot be null': "
            "primary_email_verified, primary_email_auth_enabled, otp_auth_enabled, passkey_auth_enabled, "
            "restricted_by_admin, risk_scores, is_anonymous, display_name of teams/member profiles/projects and "
            "every project config key) are declared anyOf [T, null] in the document.",
        ),
    ),
    pytest.param(
        Probe("admin", "PATCH", "/api/v1/projects/current", body={"config": {"sign_up_enabled": None}}),
        id="null: PATCH /projects/current config key null",
        marks=pytest.mark.xfail(
            strict=True,
            reason=_MISMATCH + "project config keys are declared nullable; "
            "the server answers 400 SCHEMA_ERROR 'body.config.sign_up_enabled cannot be null'.",
        ),
    ),
    pytest.param(
        Probe("server", "POST", "/api/v1/auth/sessions", body={"user_id": "{user_id}", "expires_in_millis": 60000.0}),
        id="integer: POST /auth/sessions expires_in_millis 60000.0",
        marks=pytest.mark.xfail(
            strict=True,
            reason=_MISMATCH + "JSON Schema's 'integer' includes numbers with a zero fraction (60000.0); strict "
            "pydantic refuses them: 400 'body.expires_in_millis must be an integer' (also testing/clock set_millis, "
            "rate_limits limit/window_seconds, risk_scores).",
        ),
    ),
    pytest.param(
        Probe("client", "POST", "/api/v1/auth/sessions/current/refresh"),
        id="header: refresh without x-service-refresh-token",
    ),
    pytest.param(
        Probe("server", "GET", "/api/v1/users/{user_id}", {"user_id": "not-a-uuid"}),
        id="format: path user_id not a UUID",
        marks=pytest.mark.xfail(
            strict=True,
            reason=_MISMATCH + "ids (path user_id/team_id/session_id/project_id, query user_id/team_id/cursor, "
            "body user_id/selected_team_id/creator_user_id) are declared as any string; the server requires a "
            "UUID (or 'me'): 400 'params.user_id must be a valid UUID'. Expected format uuid / a pattern.",
        ),
    ),
    pytest.param(
        Probe("client", "POST", "/api/v1/auth/otp/sign-in", body={"code": "ABC123"}),
        id="format: sign-in code shorter than 45",
        marks=pytest.mark.xfail(
            strict=True,
            reason=_MISMATCH + "code (otp sign-in, check-code, mfa) is declared as any string; the server requires "
            "exactly 45 characters (and e-mails, callback URLs, profile image URLs, base64 TOTP secrets and country "
            "codes are checked by validators the document does not show either).",
        ),
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
