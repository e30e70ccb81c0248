"""The fake's `DirectClient` (`identity_direct`, `project.direct_client()`), as a user's suite meets it through the
pytest plugin: the same answers as the in-process `httpx.Client` (status, body, the headers a client reads) for a
whole sign-up, reads, writes, errors, queries and a preflight; its httpx-like surface; webhooks in the "sync" mode;
and the project's shortcuts (which go through it) unchanged."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from identity_testing import IdentityFake, TestProject
from identity_testing.direct import DirectClient, DirectResponse, DirectStatusError
from identity_testing.webhooks import RecordingReceiver

CALLBACK_URL = "http://localhost:3000/handler"
#: Headers whose value is made per request (ids, times): present in both answers, compared by presence only.
PER_REQUEST = {"x-service-request-id", "x-request-id", "date"}


def _same(direct: DirectResponse, via_http: httpx.Response) -> None:
    assert direct.status_code == via_http.status_code, (direct.text, via_http.text)
    http_headers = {k.lower(): v for k, v in via_http.headers.items()}
    # httpx (and the WSGI face) add the framing of an HTTP message; the core's own headers must all be there
    for name, value in direct.headers.items():
        assert name in http_headers, name
        if name not in PER_REQUEST:
            assert http_headers[name] == value, name


def _sign_up(project: TestProject, client: Any, email: str) -> dict[str, Any]:
    sent = client.post("/api/v1/auth/otp/send-sign-in-code", json={"email": email, "callback_url": CALLBACK_URL})
    assert sent.status_code == 200, sent.text
    signed = client.post("/api/v1/auth/otp/sign-in", json={"code": project.last_code(email)})
    assert signed.status_code == 200, signed.text
    tokens: dict[str, Any] = signed.json()
    return tokens


def test_the_direct_client_answers_what_the_http_client_answers(
    identity_project: TestProject, identity_direct: DirectClient, identity_client: httpx.Client
) -> None:
    direct_tokens = _sign_up(identity_project, identity_direct, "direct@example.com")
    http_tokens = _sign_up(identity_project, identity_client, "http@example.com")
    assert set(direct_tokens) == set(http_tokens)
    assert direct_tokens["is_new_user"] is http_tokens["is_new_user"] is True

    for tokens, client in ((direct_tokens, identity_direct), (http_tokens, identity_client)):
        me = {"x-service-access-token": tokens["access_token"]}
        patched = client.patch("/api/v1/users/me", json={"display_name": "Ada"}, headers=me)
        assert patched.status_code == 200, patched.text
        assert patched.json()["display_name"] == "Ada"
        assert client.get("/api/v1/users/me", headers=me).json()["display_name"] == "Ada"

    # the same request, each way: reads, errors, a query, an unknown route, a method not allowed, a preflight
    me = {"x-service-access-token": direct_tokens["access_token"]}
    for method, path, kw in (
        ("GET", "/api/v1/users/me", {"headers": me}),
        ("GET", "/api/v1/users/me", {}),  # no token: 400/401 with a known error
        ("GET", "/api/v1/users/me", {"headers": {"x-service-access-token": "not-a-token"}}),
        ("PATCH", "/api/v1/users/me", {"headers": me, "json": {"display_name": 5}}),
        ("PATCH", "/api/v1/users/me", {"headers": me, "content": b"{not json", "headers_extra": True}),
        ("GET", "/api/v1/nowhere", {}),
        ("PUT", "/api/v1/users/me", {"headers": me}),
        ("GET", "/api/v1/teams?user_id=me", {"headers": me}),
        ("GET", "/api/v1/teams", {"headers": me, "params": {"user_id": "me"}}),
        ("OPTIONS", "/api/v1/users/me", {"headers": {"origin": "http://localhost:3000"}}),
    ):
        kw = dict(kw)
        if kw.pop("headers_extra", False):
            kw["headers"] = {**kw["headers"], "content-type": "application/json"}
        direct = identity_direct.request(method, path, **kw)
        via_http = identity_client.request(method, path, **kw)
        _same(direct, via_http)
        if direct.headers.get("content-type", "").startswith("application/json"):
            assert direct.json() == via_http.json(), (method, path)
        else:
            assert direct.content == via_http.content, (method, path)


def test_its_surface_is_the_part_of_httpx_that_tests_use(
    identity_project: TestProject, identity_server_direct: DirectClient
) -> None:
    created = identity_server_direct.post("/api/v1/users", json={"display_name": "Grace"})
    assert created.status_code == 201
    assert created.is_success
    user_id = created.json()["id"]
    assert created.raise_for_status() is created
    assert '"display_name":"Grace"' in created.text.replace(" ", "")
    assert created.headers["content-type"].startswith("application/json")
    assert identity_server_direct.delete(f"/api/v1/users/{user_id}").status_code == 200

    missing = identity_server_direct.get(f"/api/v1/users/{user_id}")
    assert not missing.is_success
    with pytest.raises(DirectStatusError) as raised:
        missing.raise_for_status()
    assert raised.value.response is missing
    assert "404" in str(raised.value)
    assert "USER_NOT_FOUND" in str(raised.value)
    with identity_project.direct_client("admin") as admin:  # a context manager, like httpx's
        assert admin.get("/api/v1/projects/current").json()["id"] == identity_project.id


def test_requests_through_it_deliver_webhooks_in_the_sync_mode(
    identity_server_direct: DirectClient, identity_webhook_receiver: RecordingReceiver
) -> None:
    created = identity_server_direct.post("/api/v1/users", json={"display_name": "Hopper"})
    assert created.status_code == 201, created.text
    assert "user.created" in identity_webhook_receiver.types()
    assert identity_webhook_receiver.rejected == []


def test_a_fault_of_the_service_is_a_500_as_over_http(
    identity_fake: IdentityFake, identity_project: TestProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(identity_fake.wsgi, "answer", broken)
    answered = identity_project.direct_client("server").get("/api/v1/users")
    assert answered.status_code == 500
    assert answered.json()["code"] == "INTERNAL_ERROR"
    assert "a bug" not in answered.text


def test_the_projects_outbox_is_what_the_outbox_route_lists(
    identity_fake: IdentityFake, identity_project: TestProject, identity_direct: DirectClient
) -> None:
    # `outbox()` reads the store in process; it must list what GET /emails/outbox?to= lists, and where that route
    # refuses (an address it does not take, a server key no longer valid, the project gone), raise its answer
    for email in ("ada@example.com", "grace@example.com", "ada@example.com"):
        sent = identity_direct.post(
            "/api/v1/auth/otp/send-sign-in-code", json={"email": email, "callback_url": CALLBACK_URL}
        )
        assert sent.status_code == 200, sent.text
    with identity_project.client("server") as server:
        for to in (None, "ada@example.com", " ADA@Example.com ", "\uff41da@example.com", "nobody@example.com"):
            listed = server.get("/api/v1/emails/outbox", params={"to": to} if to else {})
            assert listed.status_code == 200, listed.text
            assert identity_project.outbox(to) == listed.json()["items"], to
        assert len(identity_project.outbox()) == 3
        assert [m["to"] for m in identity_project.outbox("ADA@example.com")] == ["ada@example.com"] * 2
        assert server.get("/api/v1/emails/outbox", params={"to": "not an address"}).status_code == 400
    with pytest.raises(AssertionError, match="400"):
        identity_project.outbox("not an address")

    other = identity_fake.create_project()
    keys = other.keys
    stale = TestProject(
        identity_fake, other.id, type(keys)(keys.publishable_client_key, "ssk_0", keys.super_secret_admin_key)
    )
    with pytest.raises(AssertionError, match="401"):
        stale.outbox()
    other.delete()
    with other.client("server") as server:
        gone = server.get("/api/v1/emails/outbox")
    if gone.status_code == 200:
        assert other.outbox() == gone.json()["items"]
    else:
        with pytest.raises(AssertionError, match=str(gone.status_code)):
            other.outbox()
