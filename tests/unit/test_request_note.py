"""What the core notes about a request for the host's metrics and access log (`identity_proto.RequestNote`): the
matched route's template (never the path), the caller's access type, the known error answered, the conflicts re-run.
Driven by hand through `Service.handle`, on the memory store."""

from __future__ import annotations

from typing import Any

import orjson

from identity_proto import AccessType, ErrorCode, Request, RequestNote, Service, ServiceOptions, run
from identity_proto.service import MAX_COMMIT_ATTEMPTS
from tests.support import Harness, client_headers, server_headers
from tests.unit.test_commit_reruns import Contended


def _noted(
    h: Harness, method: str, path: str, headers: dict[str, str] | None = None, json: Any = None
) -> tuple[int, RequestNote]:
    raw = dict(headers or {})
    body = b""
    if json is not None:
        body, raw["content-type"] = orjson.dumps(json), "application/json"
    note = RequestNote()
    request = Request(method, path, tuple(raw.items()), body, "", "127.0.0.1")
    response = run(h.service.handle(request, h.now_ms, h.entropy, note), h.store)
    return response.status, note


def test_the_route_is_its_template_and_the_access_type_the_callers() -> None:
    h = Harness()
    status, note = _noted(h, "GET", "/api/v1/users/0f1e2d3c-4b5a-4678-9abc-def012345678", server_headers())
    assert (status, note) == (
        404,
        RequestNote(route="/api/v1/users/{user_id}", access_type=AccessType.SERVER, error=ErrorCode.USER_NOT_FOUND),
    )


def test_a_request_no_route_matched_has_no_route() -> None:
    status, note = _noted(Harness(), "GET", "/secret-token-in-a-path/abc123")
    assert (status, note) == (404, RequestNote(error=ErrorCode.ROUTE_NOT_FOUND))


def test_a_request_refused_before_authentication_has_its_route_and_no_access_type() -> None:
    headers = client_headers() | {"x-service-publishable-client-key": "pck_wrong_key_0000000000000"}
    status, note = _noted(Harness(), "GET", "/api/v1/users/me", headers)
    assert status in (400, 401)
    assert (note.route, note.access_type, note.error is not None) == ("/api/v1/users/me", None, True)


def test_a_rate_limit_refusal_is_noted() -> None:
    h = Harness(service=Service(ServiceOptions(password_rounds=4, rate_limits_enabled=True)))
    notes = [_noted(h, "POST", "/api/v1/auth/anonymous/sign-up", client_headers(), {})[1] for _ in range(12)]
    assert notes[-1].error is ErrorCode.RATE_LIMITED
    assert notes[-1].route == "/api/v1/auth/anonymous/sign-up"


def test_conflicts_re_run_are_counted_and_a_conflict_given_up_is_noted() -> None:
    store = Contended()
    h = Harness(store=store)
    status, created = _noted(h, "POST", "/api/v1/users", server_headers(), {"display_name": "Ada"})
    assert (status, created.reruns) == (201, 0)
    user_id = next(u for u in store.tenant("00000000-0000-4000-8000-000000000000").users)
    store.conflicts = 2
    status, once = _noted(h, "PATCH", f"/api/v1/users/{user_id}", server_headers(), {"primary_email": "g@example.com"})
    assert (status, once.reruns, once.error) == (200, 2, None)
    store.conflicts = MAX_COMMIT_ATTEMPTS
    status, given_up = _noted(
        h, "PATCH", f"/api/v1/users/{user_id}", server_headers(), {"primary_email": "h@example.com"}
    )
    assert (status, given_up.reruns, given_up.error) == (503, MAX_COMMIT_ATTEMPTS - 1, ErrorCode.WRITE_CONFLICT)
